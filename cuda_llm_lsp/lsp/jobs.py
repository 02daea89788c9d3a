"""Background jobs (optimize, benchmark, tune): one per kernel at a time, with work-done progress.

A job is an asyncio task kept in the server's task set. Its progress is created with
`window/workDoneProgress/create` (a client that refuses still gets the work done), begins
cancellable, reports as the work goes, and ALWAYS ends, in a `finally`, also on errors and
cancels. Cancel, from the progress UI (`window/workDoneProgress/cancel`) or `cudaLlm.cancel`,
cancels the job's `CancelToken` (the engine's one cancel: it stops the LLM requests and the
job's GPU work) and ends the progress at once; the engine's thread winds down on its own.

The server state owns one `JobManager`; this module knows the server only as a `JobHost`, so it
sits below the state. The job kinds (`optimize_job`, `benchmark_job`, `tune_job`) and the
cancel handlers (`cancel`) are features on top.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Protocol

from lsprotocol import types
from pygls.progress import Progress

from cuda_llm_lsp.engine import CancelToken
from cuda_llm_lsp.source.untrusted import neutralize

log = logging.getLogger(__name__)


class JobHost(Protocol):
    """What jobs need of the server (the state is one): its client, messages, tasks, lenses."""

    @property
    def client_capabilities(self) -> types.ClientCapabilities: ...

    @property
    def work_done_progress(self) -> Progress: ...

    def message(self, text: str, kind: types.MessageType = types.MessageType.Info) -> None: ...

    def spawn(self, coro: Coroutine[Any, Any, Any], what: str) -> asyncio.Task[Any]: ...

    def refresh_code_lenses(self) -> None: ...

    def job_label(self) -> str | None:
        """What a job started now says it is (`engine.job_label`: a demo), or None."""
        ...

    def demo_mode(self) -> bool:
        """Whether a job started now answers from the shipped recording (`cudaLlm.demo`)."""
        ...


class JobError(Exception):
    """A job cannot go on; the message is shown to the user as is."""


@dataclass(eq=False)
class Job:
    uri: str
    kernel: str
    kind: str  # "optimize" | "benchmark" | "tune"
    token: str  # the progress token
    cancel_token: CancelToken = field(default_factory=CancelToken)  # handed to the engine
    # Taken when the job starts: a demo stays labelled as one even if the setting changes.
    label: str | None = None  # e.g. "DEMO: recorded, not measured"; None: real figures
    demo: bool = False  # `cudaLlm.demo`: the shipped recordings answer, not the GPU and model

    def say(self, text: str) -> str:
        """A 'cuda-llm: ...' message of this job, labelled ('cuda-llm [DEMO: ...]: ...')."""
        if self.label and text.startswith("cuda-llm: "):
            return f"cuda-llm [{self.label}]: " + text.removeprefix("cuda-llm: ")
        return text

    @property
    def cancelled(self) -> bool:
        return self.cancel_token.cancelled

    def cancel(self) -> None:
        self.cancel_token.cancel()


class JobProgress:
    """Work-done progress for one job, used on the server's event loop; silent when refused."""

    def __init__(self, server: JobHost, job: Job) -> None:
        self.server, self.job = server, job
        self.enabled = False
        self.ended = False

    async def create(self) -> None:
        window = self.server.client_capabilities.window
        if not (window and window.work_done_progress):
            return
        try:
            await asyncio.wait_for(
                self.server.work_done_progress.create_async(self.job.token), timeout=10
            )
            self.enabled = True
        except Exception as exc:  # refused or no answer: the job runs without progress
            log.info("progress creation refused for %s: %s", self.job.kernel, exc)

    def begin(self, title: str, message: str) -> None:
        # Recorded outcomes stand in for the GPU: the title, shown with every report, says so.
        label = self.job.label
        title = f"{title} [{label}]" if label else title
        if self.enabled:
            self.server.work_done_progress.begin(
                self.job.token,
                types.WorkDoneProgressBegin(
                    title=neutralize(title),
                    message=neutralize(message),
                    cancellable=True,
                    percentage=0,
                ),
            )

    def report(self, message: str, percentage: int | None = None) -> None:
        if self.enabled and not self.ended:
            value = types.WorkDoneProgressReport(message=neutralize(message), cancellable=True)
            if percentage is not None:
                value.percentage = max(0, min(100, percentage))
            self.server.work_done_progress.report(self.job.token, value)

    def end(self, message: str) -> None:
        if self.enabled and not self.ended:
            self.server.work_done_progress.end(
                self.job.token, types.WorkDoneProgressEnd(message=neutralize(message))
            )
        self.ended = True


Work = Callable[[Job, JobProgress], Awaitable[str]]  # returns the progress end message


class JobManager:
    """The running jobs, one per (uri, kernel); starting or ending one refreshes the lenses."""

    def __init__(self, server: JobHost) -> None:
        self.server = server
        self.jobs: dict[tuple[str, str], Job] = {}
        self.by_token: dict[str, Job] = {}

    def running(self, uri: str, kernel: str) -> Job | None:
        return self.jobs.get((uri, kernel))

    def start(self, uri: str, kernel: str, kind: str, title: str, work: Work) -> Job | None:
        """Start `work` for the kernel, unless a job already runs for it (then say so)."""
        current = self.jobs.get((uri, kernel))
        if current is not None:
            self.server.message(
                f"cuda-llm: {kernel} already has a {current.kind} running; cancel it first "
                f"(Cancel on its progress notification, or the code action "
                f"'Cancel {current.kind} of {kernel}')",
                types.MessageType.Warning,
            )
            return None
        job = Job(uri, kernel, kind, token=f"cuda-llm-{kind}-{uuid.uuid4().hex[:12]}")
        job.label = self.server.job_label()
        job.demo = self.server.demo_mode()
        self.jobs[(uri, kernel)] = job
        self.by_token[job.token] = job
        self.server.spawn(self._run(job, title, work), f"{kind} of {kernel}")
        self.server.refresh_code_lenses()
        return job

    async def _run(self, job: Job, title: str, work: Work) -> None:
        progress = JobProgress(self.server, job)
        end_message = "done"
        try:
            await progress.create()
            progress.begin(title, "starting")
            inner = asyncio.ensure_future(work(job, progress))
            cancelled = asyncio.ensure_future(job.cancel_token.wait())
            await asyncio.wait({inner, cancelled}, return_when=asyncio.FIRST_COMPLETED)
            cancelled.cancel()
            if inner.done():
                end_message = inner.result()
            else:
                end_message = "cancelled"
                inner.add_done_callback(_log_late_failure)
                inner.cancel()
        except JobError as exc:
            end_message = str(exc)
            self.server.message(job.say(f"cuda-llm: {exc}"), types.MessageType.Warning)
        except asyncio.CancelledError:
            end_message = "cancelled"
            raise
        except Exception as exc:
            log.exception("%s of %s failed", job.kind, job.kernel)
            end_message = f"failed: {exc}"
            self.server.message(
                job.say(f"cuda-llm: {job.kind} of {job.kernel} failed: {exc}"),
                types.MessageType.Error,
            )
        finally:
            progress.end(end_message)
            self.jobs.pop((job.uri, job.kernel), None)
            self.by_token.pop(job.token, None)
            self.server.refresh_code_lenses()

    def cancel(self, uri: str, kernel: str) -> bool:
        job = self.jobs.get((uri, kernel))
        if job is None:
            return False
        job.cancel()
        return True

    def cancel_token(self, token: str) -> bool:
        job = self.by_token.get(token)
        if job is None:
            return False
        job.cancel()
        return True

    def cancel_all(self) -> None:
        for job in list(self.jobs.values()):
            job.cancel()


def _log_late_failure(task: asyncio.Future[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.info("a cancelled job ended with: %s", task.exception())
