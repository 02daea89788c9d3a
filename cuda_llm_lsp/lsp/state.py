"""`CudaLlmServer`: the one owner of the language server's state, and the place features are wired.

Handlers stay thin and live one behaviour per module (`diagnostics`, `code_lens`, `hover`,
`symbols`, `settings`, `code_actions`, `commands`, `jobs`, `results`, `suggestions`); this module
only holds state (open documents' analyses, jobs, reports, suggestions, settings) and the
factories through which tests substitute the GPU evaluator and the analyzer.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls import uris
from pygls.lsp.server import LanguageServer
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import PositionCodec

from cuda_llm_lsp import __version__
from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.source.kernels import Kernel, find_kernels

if TYPE_CHECKING:
    from cuda_llm_lsp.evaluate.types import Evaluator
    from cuda_llm_lsp.fsr.llm import LlmClient
    from cuda_llm_lsp.fsr.types import OptimizeConfig
    from cuda_llm_lsp.lsp.jobs import JobManager
    from cuda_llm_lsp.lsp.results import KernelReport
    from cuda_llm_lsp.lsp.suggestions import Suggestion

log = logging.getLogger(__name__)

#: How long `shutdown` waits for the evaluator to close before answering anyway.
SHUTDOWN_WAIT_S = 3.0

Analyzer = Callable[[str, "Path | None", Settings], Any]  # analysis.analyze(text, path, settings)
EvaluatorFactory = Callable[[], "Evaluator"]
LlmFactory = Callable[["OptimizeConfig"], "LlmClient"]


def _find(uri: str, text: str) -> list[Kernel]:
    try:
        return find_kernels(text)
    except Exception:  # the source model must never take the server down
        log.exception("find_kernels failed for %s", uri)
        return []


def default_analyzer(text: str, path: Path | None, settings: Settings) -> Any:
    from cuda_llm_lsp.analysis import analyze

    return analyze(text, path, settings)


def default_evaluator_factory() -> Evaluator:
    from cuda_llm_lsp.evaluate.pool import GpuEvaluator

    return GpuEvaluator()


def default_llm_factory(config: OptimizeConfig) -> LlmClient:
    from cuda_llm_lsp.fsr.llm import make_llm

    return make_llm(config)


class JobEvaluator:
    """One job's view of the shared GPU evaluator: its cancels stop only its own GPU work.

    The evaluator has one worker per GPU and its `cancel` kills whatever runs on it; with
    several kernels optimizing at once, cancelling one job must not cost another its run.
    Calls pass one at a time through `gate`, so a cancel reaches the worker only while this
    job's call is the one running.

    `cancel` is the evaluator protocol's: the FSR loop uses it to interrupt the candidate on
    the GPU when a budget runs out, then goes on (re-validating its winner), so it stops only
    the call in flight. `cancel_job` is the job's cancel: every later call is refused too.
    """

    def __init__(self, inner: Evaluator, gate: threading.Lock) -> None:
        self.inner, self.gate = inner, gate
        self._cancelled = threading.Event()
        self._running = 0  # the id of the call on the GPU, 0 when none
        self._calls = 0
        self._state = threading.Lock()

    def _call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        from cuda_llm_lsp.evaluate.types import EvaluationCancelled

        while not self.gate.acquire(timeout=0.02):  # waiting for another job's GPU call
            if self._cancelled.is_set():
                raise EvaluationCancelled("cancelled")
        try:
            with self._state:
                if self._cancelled.is_set():
                    raise EvaluationCancelled("cancelled")
                self._calls += 1
                self._running = self._calls
            try:
                result = method(*args, **kwargs)
            finally:
                with self._state:
                    self._running = 0
        finally:
            self.gate.release()
        if self._cancelled.is_set():
            raise EvaluationCancelled("cancelled")
        return result

    def device_facts(self) -> Any:
        return self._call(self.inner.device_facts)

    def benchmark(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(self.inner.benchmark, *args, **kwargs)

    def evaluate(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(self.inner.evaluate, *args, **kwargs)

    def cancel(self) -> None:
        """Interrupt this job's call in flight, if any; later calls run as usual."""
        with self._state:
            call = self._running
        if call:
            self.inner.cancel()
            # The worker clears a cancel when a call begins: repeat it once the call is under
            # way, but only if that same call is still the one running.
            threading.Timer(0.05, self._cancel_again, (call,)).start()

    def cancel_job(self) -> None:
        """The job is cancelled: interrupt the call in flight and refuse every later one."""
        with self._state:
            self._cancelled.set()
        self.cancel()

    def _cancel_again(self, call: int) -> None:
        with self._state:
            running = self._running == call
        if running:
            self.inner.cancel()

    def close(self) -> None:
        """The shared evaluator outlives jobs: the server closes it at shutdown."""


@dataclass
class DocumentState:
    """What the server knows about one open document."""

    uri: str
    analysis: Any = None  # analysis.FileAnalysis of `version`'s text, the last one published
    version: int | None = None
    diagnostics: list[types.Diagnostic] = field(default_factory=list)  # compile + spec
    generation: int = 0  # bumped by every change; a debounced analysis runs only if still current
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class CudaLlmServer(LanguageServer):
    """The language server and its state; feature modules register their handlers on it."""

    def __init__(
        self,
        *,
        analyzer: Analyzer | None = None,
        evaluator_factory: EvaluatorFactory | None = None,
        llm_factory: LlmFactory | None = None,
    ) -> None:
        super().__init__(
            "cuda-llm-lsp",
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
        )
        from cuda_llm_lsp.lsp.jobs import JobManager

        self.settings = Settings()
        self.analyzer: Analyzer = analyzer or default_analyzer
        self.evaluator_factory: EvaluatorFactory = evaluator_factory or default_evaluator_factory
        self.llm_factory: LlmFactory = llm_factory or default_llm_factory
        self.documents: dict[str, DocumentState] = {}
        self.reports: dict[tuple[str, str], KernelReport] = {}
        self.suggestions: dict[tuple[str, str], Suggestion] = {}
        self.jobs: JobManager = JobManager(self)
        self.nvrtc_problem: str | None = None  # shown once when NVRTC cannot be loaded
        # Compiles run here, one at a time per document (a per-document lock); two threads so
        # two files can compile at once on the 2-core machines we target.
        self.compile_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="cuda-llm-compile")
        # uri -> (version, text, its parse): requests for one version share one parse.
        self._kernels: dict[str, tuple[int | None, str, asyncio.Future[list[Kernel]]]] = {}
        self._evaluator: Evaluator | None = None
        self._evaluator_lock = threading.Lock()
        self._gpu_gate = threading.Lock()  # one job's GPU call at a time on the one worker
        self._tasks: set[asyncio.Task[Any]] = set()

    # --- documents -------------------------------------------------------------------------

    def state(self, uri: str) -> DocumentState:
        if uri not in self.documents:
            self.documents[uri] = DocumentState(uri)
        return self.documents[uri]

    def document(self, uri: str) -> TextDocument | None:
        """The open document (None once closed or never opened)."""
        if uri not in self.documents:
            return None
        return self.workspace.get_text_document(uri)

    @property
    def codec(self) -> PositionCodec:
        return self.workspace.position_codec

    async def kernels(self, uri: str) -> tuple[str, list[Kernel]]:
        """The current text of `uri` and its kernels: the last analysis's when it is of this
        version, else one parse per version, in a thread, shared by concurrent requests."""
        doc = self.document(uri)
        if doc is None:
            return "", []
        text, version = doc.source, doc.version
        state = self.documents.get(uri)
        analysis = state.analysis if state is not None else None
        fresh = state is not None and state.version == version
        if analysis is not None and fresh and analysis.text == text:
            return text, [info.kernel for info in analysis.kernels]
        cached = self._kernels.get(uri)
        if cached is not None and cached[0] == version and cached[1] == text:
            parse = cached[2]
        else:
            parse = asyncio.get_running_loop().run_in_executor(None, _find, uri, text)
            # Stored before the parse ends so the next request waits on it; `forget` drops it.
            self._kernels[uri] = (version, text, parse)
        # Shielded: a cancelled request must not cancel the parse other requests wait on.
        return text, list(await asyncio.shield(parse))

    async def kernel(self, uri: str, name: str) -> tuple[str, Kernel | None]:
        text, found = await self.kernels(uri)
        return text, next((k for k in found if k.name == name), None)

    def forget(self, uri: str) -> None:
        self.documents.pop(uri, None)
        self._kernels.pop(uri, None)

    @staticmethod
    def path_of(uri: str) -> Path | None:
        path = uris.to_fs_path(uri)
        return Path(path) if path else None

    # --- engine ----------------------------------------------------------------------------

    def evaluator(self) -> Evaluator:
        """The GPU evaluator, created on first use (blocking: call from a thread)."""
        with self._evaluator_lock:
            if self._evaluator is None:
                self._evaluator = self.evaluator_factory()
            return self._evaluator

    def job_evaluator(self) -> JobEvaluator:
        """A job's own handle on the shared evaluator (blocking: call from a thread)."""
        return JobEvaluator(self.evaluator(), self._gpu_gate)

    def close_engine(self) -> None:
        with self._evaluator_lock:
            if self._evaluator is not None:
                try:
                    self._evaluator.close()
                except Exception:
                    log.exception("closing the evaluator failed")
                self._evaluator = None
        self.compile_pool.shutdown(wait=False, cancel_futures=True)

    # --- messages and tasks ----------------------------------------------------------------

    def message(self, text: str, kind: types.MessageType = types.MessageType.Info) -> None:
        self.window_show_message(types.ShowMessageParams(type=kind, message=text))

    def spawn(self, coro: Coroutine[Any, Any, Any], what: str) -> asyncio.Task[Any]:
        """Run `coro` in the background, keeping a reference and logging any failure."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)

        def done(t: asyncio.Task[Any]) -> None:
            self._tasks.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.error("%s failed", what, exc_info=t.exception())

        task.add_done_callback(done)
        return task


def create_server(
    *,
    analyzer: Analyzer | None = None,
    evaluator_factory: EvaluatorFactory | None = None,
    llm_factory: LlmFactory | None = None,
) -> CudaLlmServer:
    """A server with every feature registered."""
    from cuda_llm_lsp.lsp import (
        code_actions,
        code_lens,
        commands,
        diagnostics,
        hover,
        jobs,
        settings,
        symbols,
    )

    server = CudaLlmServer(
        analyzer=analyzer, evaluator_factory=evaluator_factory, llm_factory=llm_factory
    )
    for module in (settings, diagnostics, code_lens, hover, symbols, code_actions, commands, jobs):
        module.register(server)

    @server.feature(types.SHUTDOWN)
    async def on_shutdown(ls: CudaLlmServer, params: None) -> None:
        # Closing the evaluator waits for its worker (a busy one up to seconds): off the event
        # loop, and not past the client's patience, which then kills the server and, with it,
        # the worker (it exits when its parent does).
        ls.jobs.cancel_all()
        try:
            await asyncio.wait_for(asyncio.to_thread(ls.close_engine), SHUTDOWN_WAIT_S)
        except asyncio.TimeoutError:
            log.warning("the evaluator did not close within %.0f s of shutdown", SHUTDOWN_WAIT_S)

    return server


def serve_stdio(server: LanguageServer) -> None:
    """Serve on stdin/stdout, the protocol on a private copy of file descriptor 1.

    Anything else that writes to stdout (a stray `print`, a warning, a C library such as the
    CUDA driver) would corrupt a message and make the client drop the connection; it goes to
    stderr instead, which editors show as the server's log.
    """
    sys.stdout.flush()
    protocol_out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    server.start_io(stdin=sys.stdin.buffer, stdout=protocol_out)
