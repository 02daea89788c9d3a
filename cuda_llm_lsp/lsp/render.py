"""The language server's one renderer of the engine's event stream and refusals.

`JobRenderer` turns the events of any action (benchmark steps, tune configurations, the FSR
loop's rounds and candidates) into the job's work-done progress and the kernel's report (the
diagnostic and hover on its name). Events come on the engine's thread; the renderer hands each
to the server's loop and drops it once the job is cancelled, so a late event of a run winding
down never overwrites the "cancelled" report, nor a newer run's. `job_error` says a `Refusal`
in the editor's words.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from functools import partial
from typing import Any, TypeVar

from cuda_llm_lsp.engine import (
    CandidateEvaluated,
    CandidateStage,
    ConfigurationMeasured,
    Event,
    Refusal,
    RoundStarted,
    RunStarted,
    Step,
    TuneStarted,
    detached,
)
from cuda_llm_lsp.evaluate.types import EvalResult, no_gpu_message
from cuda_llm_lsp.fsr.types import CandidateOutcome, OptimizeResult
from cuda_llm_lsp.lsp import results
from cuda_llm_lsp.lsp.jobs import Job, JobError, JobProgress
from cuda_llm_lsp.lsp.state import CudaLlmServer
from cuda_llm_lsp.source.spec.tunables import describe
from cuda_llm_lsp.tune.types import Measured

log = logging.getLogger(__name__)
T = TypeVar("T")


async def run_action(
    server: CudaLlmServer,
    job: Job,
    render: JobRenderer,
    action: Callable[..., Coroutine[Any, Any, T]],
    text: str,
    *extra: Any,
    **options: Any,
) -> T:
    """`action` (an engine action) on the job's kernel of `text`, with the server's settings and
    GPUs, the job's cancel token and `render` as its events' renderer, on a loop and thread of
    its own (`detached`): the server's loop never waits on it."""
    work = partial(
        action,
        text,
        server.path_of(job.uri),
        job.kernel,
        server.settings,
        *extra,
        cancel=job.cancel_token,
        on_event=render.post,
        **options,
    )
    return await detached(work, f"cuda-llm-{job.kind}-{job.kernel}")


def job_error(refusal: Refusal, verb: str, *, key_missing: bool = False) -> JobError:
    """The refusal as the job's error message, pointing at what the editor offers; with
    `key_missing` (an optimize with no key for OpenAI's endpoint) it names the key too."""
    kernel = refusal.kernel
    if refusal.kind == "spec_errors":
        said = f"the test spec of {kernel} has errors (see the diagnostics); fix them first"
    elif refusal.kind == "no_spec" and verb == "tune":
        said = f"{kernel} has no test spec to tune: add one with tune.NAME = [values]"
    elif refusal.kind == "no_spec":
        said = (
            f"{kernel} has no test spec: use the code action 'Add test spec for {kernel}' "
            "and review the draft"
        )
    elif refusal.kind == "no_gpu" and key_missing:
        said = (
            f"cannot {verb} {kernel}: this machine lacks (1) a CUDA GPU: "
            f"{no_gpu_message(refusal.message)}; and (2) an API key for the model: run "
            "'CUDA-LLM: Set API Key' (VS Code) or set OPENAI_API_KEY, or cudaLlm.baseUrl for a "
            "local server that needs none"
        )
    elif refusal.kind == "no_gpu":
        said = f"cannot {verb} {kernel}: {no_gpu_message(refusal.message)}"
    elif refusal.kind == "does_not_build":
        said = f"{kernel} does not build: {refusal.message}"
    elif refusal.kind in ("no_kernel", "no_tunables"):
        said = refusal.message
    else:
        said = f"cannot {verb} {kernel}: {refusal.message}"
    return JobError(said)


def _cases(result: EvalResult | None) -> tuple[int, int]:
    return (result.cases_passed, len(result.cases)) if result is not None else (0, 0)


def _role_step(event: CandidateStage, strategy: str) -> str | None:
    """The step a request starts, by its role: "round 2: planning", "coding plan 3",
    "repairing 1.3 (attempt 2)"; None for an FSR coder (the round's report says it)."""
    if event.role == "planner":
        return f"round {event.round}: planning"
    if event.role == "debugger":
        return f"repairing {event.round}.{event.index} (attempt {event.attempt})"
    return f"coding plan {event.index}" if strategy == "plan" else None


def configuration_line(m: Measured) -> str:
    """'BLOCK=256: 0.5 ms (2.00×)', or the configuration's status and first line of why."""
    if m.status != "ok":
        first = m.message.splitlines()[0] if m.message else ""
        said = f"{describe(m.config)}: {results.status_text(m.status)}"
        return said + (f": {first}" if first else "")
    return f"{describe(m.config)}: {results.format_ms(m.ms)} ({m.speedup or 0:.2f}×)"


class JobRenderer:
    """One job's events as its progress and its kernel's report (see the module)."""

    def __init__(
        self,
        server: CudaLlmServer,
        job: Job,
        progress: JobProgress,
        original: str,
        total: int = 1,
        strategy: str = "fsr",
    ) -> None:
        self.server, self.job, self.progress, self.original = server, job, progress, original
        self.total = max(total, 1)
        self.strategy = strategy
        self.outcomes: list[CandidateOutcome] = []
        self.measured: list[Measured] = []  # tune: the configurations heard of so far
        self.default: dict[str, int] = {}  # tune: the default configuration
        self.baseline: EvalResult | None = None  # the original's benchmark, once the run has one
        self.best: CandidateOutcome | None = None
        self.rounds = 0
        self._loop = asyncio.get_running_loop()

    def post(self, event: Event) -> None:
        """The engine's `on_event`, from its thread: rendered on the server's loop."""
        if not self.job.cancelled:  # checked again when the event is rendered
            self._loop.call_soon_threadsafe(self, event)

    def __call__(self, event: Event) -> None:
        if self.job.cancelled:
            return
        try:
            self._render(event)
        except Exception:
            log.exception("progress event handling failed")

    def _render(self, event: Event) -> None:
        if isinstance(event, Step):
            self.progress.report(event.text, event.percentage)
        elif isinstance(event, TuneStarted):
            self.default = dict(event.default)
            self.progress.report(f"{event.space_size} configurations before restrictions", 0)
        elif isinstance(event, ConfigurationMeasured):
            self.measured.append(event.latest)
            said = f"{event.done}/{event.planned} · {configuration_line(event.latest)}"
            self.progress.report(said, event.done * 100 // max(event.planned, 1))
        elif isinstance(event, RunStarted):
            self.baseline = event.baseline
            self.rounds = event.rounds
            self.total = max(event.rounds * event.candidates, 1)
            launch = f"; {event.launch}" if event.launch_fixed else ""
            baseline = results.format_ms(self._baseline_ms())
            self.progress.report(f"baseline {baseline}{launch}", 0)
            self._publish("running")
        elif isinstance(event, RoundStarted):
            self.rounds = event.rounds
            self.progress.report(f"round {event.round}/{event.rounds}")
            self._publish(f"round {event.round}/{event.rounds}")
        elif isinstance(event, CandidateStage):
            self._stage(event)
        elif isinstance(event, CandidateEvaluated):
            self._evaluated(event)

    def _stage(self, event: CandidateStage) -> None:
        where = f"{event.round}.{event.index}"
        if event.stage == "tuning" and event.done == 0:
            self.progress.report(
                f"tuning candidate {where} ({event.configurations} configurations)"
            )
        elif event.stage == "tuning":
            self.progress.report(f"tuning candidate {where}: {event.done}/{event.configurations}")
        elif event.stage == "requested":
            said = _role_step(event, self.strategy)
            if said:
                self.progress.report(said)

    def _evaluated(self, event: CandidateEvaluated) -> None:
        self.outcomes.append(event.outcome)
        self.best = event.best
        o = event.outcome
        said = f"candidate {o.round}.{o.index}: {results.status_text(o.status)}"
        if o.ms is not None:
            said += f" {results.format_ms(o.ms)}"
        if o.gpu:  # several GPUs: which one judged it
            said += f" on {o.gpu.split(' ')[0]}"
        if self.best is not None and self.best.speedup:
            said += f" · best {self.best.speedup:.2f}×"
        self.progress.report(said, len(self.outcomes) * 100 // self.total)
        self._publish(f"round {o.round}/{self.rounds or '?'}")

    # --- the FSR loop's report --------------------------------------------------------------

    def _baseline_ms(self) -> float | None:
        timing = self.baseline.timing if self.baseline is not None else None
        return timing.median_ms if timing is not None else None

    def _publish(self, state: str) -> None:
        passed, total = _cases(self.baseline)
        best = self.best
        info = results.optimize_summary(
            self.job.kernel,
            baseline_ms=self._baseline_ms(),
            best_ms=best.ms if best else None,
            speedup=best.speedup if best else None,
            cases_passed=total if best else passed,
            cases_total=total,
            fraction_of_peak=self.baseline.fraction_of_peak if self.baseline else None,
            state=state,
        )
        hint = results.failure_hint(self.outcomes, won=best is not None and best.status == "ok")
        report = results.KernelReport(
            self.job.kernel, self.original, info, hint, label=self.job.label
        )
        self.server.set_report(self.job.uri, report)

    def cancelled(self) -> None:
        if self.baseline is not None:
            self._publish("cancelled")

    def finish(self, result: OptimizeResult) -> None:
        """The run's final report: its figures, or the baseline's when nothing was better."""
        if result.error and result.baseline_ms is None:
            return
        best = result.best_result
        baseline_passed = _cases(self.baseline)[0]
        fraction = getattr(best, "fraction_of_peak", None) if best is not None else None
        if fraction is None and self.baseline is not None:
            fraction = self.baseline.fraction_of_peak
        done = "done" if result.accepted else "done, no gain"
        info = results.optimize_summary(
            self.job.kernel,
            baseline_ms=result.baseline_ms,
            best_ms=result.best_ms,
            speedup=result.speedup,
            # No better kernel: the figures are the baseline's, so are its cases.
            cases_passed=result.cases_passed if result.best_ms is not None else baseline_passed,
            cases_total=result.cases_total or _cases(self.baseline)[1],
            fraction_of_peak=fraction,
            state="cancelled" if result.cancelled else done,
        )
        hint = results.failure_hint(
            result.candidates or tuple(self.outcomes), won=result.best_ms is not None
        )
        report = results.KernelReport(
            self.job.kernel, self.original, info, hint, label=self.job.label
        )
        self.server.set_report(self.job.uri, report)


async def offer(server: CudaLlmServer, suggestion: results.Suggestion, said: str, job: Job) -> str:
    """Keep `suggestion` for the kernel and tell the user: the client's own diff where it shows
    one (sent before the progress ends), else `said` and the code actions to use."""
    kernel = suggestion.kernel
    server.suggestions[(suggestion.uri, kernel)] = suggestion
    if server.wants_suggestion_notification():
        await server.notify_suggestion(suggestion)
    else:
        accept, purpose = (
            ("tuned", "make it the default")
            if suggestion.kind == "tune"
            else ("optimized", "apply it")
        )
        server.message(
            job.say(
                f"cuda-llm: {kernel}: {said}. Use the code action 'Accept {accept} {kernel}' to "
                f"{purpose}, 'Show suggested {kernel}' to review it, or 'Reject suggestion for "
                f"{kernel}'."
            )
        )
    return f"{suggestion.measured}: suggestion ready"  # the progress title carries the label
