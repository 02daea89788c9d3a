"""`CudaLlmServer`: the language server's one owner of state, and the effects features share.

It holds the open documents and their analyses, the job reports and suggestions per kernel, the
running jobs, the settings and the evaluator; features (one LSP behaviour per module, wired in
`app`) read it and ask it for the effects that cross features: analyse a document, re-analyse
all, publish diagnostics, set or clear a report, refresh code lenses, send a suggestion. So no
feature imports another.

Diagnostics are version-checked: each change bumps the document's generation; after the
debounce, the analysis (tree-sitter, the device unit, NVRTC's front end alone) runs in a worker
thread, one at a time per document, and is published only if the document still has the
version analysed, always carrying that version: an older result is dropped, never published
over newer text. Code generation (resources, ptxas's problems) follows in the background, per
kernel and only for kernels whose dependencies changed (`analysis.add_resources`); it stops
between kernels when a newer change comes, and publishes the same version again with its
figures; lenses say "updating" meanwhile. NVRTC itself runs in compile processes
(`compile.isolated`): a document that crashes or hangs it costs one compile, not the server.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls import uris
from pygls.lsp.server import LanguageServer
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import PositionCodec

from cuda_llm_lsp import __version__
from cuda_llm_lsp.compile.types import Diagnostic, NvrtcUnavailable
from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.engine import (
    GpuService,
    LlmFactory,
    demo_evaluator,
    demo_for,
    evaluator_for,
    job_label,
    make_llm,
    make_profiler,
)
from cuda_llm_lsp.engine.analysis import (
    FileAnalysis,
    Trust,
    add_codegen,
    analyse_first,
    close_analysis,
    complete_fast,
    open_analysis,
    with_completion,
)
from cuda_llm_lsp.engine.build import Profiler
from cuda_llm_lsp.engine.capture import CaptureRunner, run_capture
from cuda_llm_lsp.evaluate.types import Evaluator
from cuda_llm_lsp.lsp import compile_diagnostics, profile_results, results
from cuda_llm_lsp.lsp.document import LspWorkspace
from cuda_llm_lsp.lsp.jobs import Job, JobError, JobManager
from cuda_llm_lsp.lsp.nvcc_check import NvccChecker
from cuda_llm_lsp.lsp.positions import split_lines, to_range
from cuda_llm_lsp.lsp.protocol import CudaLlmProtocol
from cuda_llm_lsp.lsp.results import KernelReport, Suggestion
from cuda_llm_lsp.source.kernels import Kernel, find_kernels
from cuda_llm_lsp.source.untrusted import neutralize

log = logging.getLogger(__name__)

#: How long `window/showDocument` may go unanswered before the path is named in a message.
SHOW_DOCUMENT_WAIT_S = 5.0
Analyzer = Callable[[str, "Path | None", Settings], FileAnalysis]  # `analyse_first`
Completer = Callable[[FileAnalysis], tuple[Diagnostic, ...]]  # `complete_fast`
# a first answer is completed once typing has paused this long: a completion started while the
# user types would hold the compile process with the headers' PCH that the next edit's first
# answer needs (benchmarks/lsp_heavy_headers.py, RESULTS.md)
COMPLETE_AFTER_S = 0.5
Codegen = Callable[[FileAnalysis, Callable[[], bool]], FileAnalysis]  # `add_codegen`
#: the evaluator for the settings (`engine.evaluator_for`: `cudaLlm.gpus`, `cudaLlm.cluster`)
EvaluatorFactory = Callable[[Settings], Evaluator]


def _find(uri: str, text: str) -> list[Kernel]:
    try:
        return find_kernels(text)
    except Exception:  # the source model must never take the server down
        log.exception("find_kernels failed for %s", uri)
        return []


@dataclass
class DocumentState:
    """What the server knows about one open document."""

    uri: str
    analysis: FileAnalysis | None = None  # of `version`'s text, the last one published
    fast: FileAnalysis | None = None  # the fast tier's own (`analysis` is it with nvcc's merged)
    # the first answer `fast` grew from (code generation's figures and the complete check's
    # diagnostics are merged into it, in whichever order they come), and the complete check's
    # diagnostics once known
    first: FileAnalysis | None = None
    completion: tuple[Diagnostic, ...] | None = None
    version: int | None = None
    diagnostics: list[types.Diagnostic] = field(default_factory=list)  # compile + spec
    generation: int = 0  # bumped by every change; a debounced analysis runs only if still current
    last_change: float = -math.inf  # time.monotonic() of the last didChange (the debounce's)
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
            protocol_cls=CudaLlmProtocol,
        )
        self.settings = Settings()
        # what the client says of the workspace (lsp.settings): trusted unless told otherwise
        self.trust = Trust()
        self.analyzer: Analyzer = analyzer or analyse_first
        # The later stages; an injected analyzer (tests) does the whole analysis itself.
        self.completer: Completer | None = complete_fast if analyzer is None else None
        self.codegen: Codegen | None = add_codegen if analyzer is None else None
        self.evaluator_factory: EvaluatorFactory = evaluator_factory or evaluator_for
        self.llm_factory: LlmFactory = llm_factory or make_llm
        self.documents: dict[str, DocumentState] = {}
        self.reports: results.Reports = {}
        self.profiles: profile_results.Profiles = {}  # Profile K's findings, per kernel
        # called with `cudaLlm.gpus`: Profile runs on the first GPU it selects
        self.profiler_factory: Callable[[str | None], Profiler] = make_profiler
        # runs the user's program with capture (`engine.capture.run_capture`; tests: a fake)
        self.capture_runner: CaptureRunner = run_capture
        self.suggestions: dict[tuple[str, str], Suggestion] = {}
        self.jobs = JobManager(self)
        self.nvrtc_problem: str | None = None  # shown once when NVRTC cannot be loaded
        # Compiles run here, one at a time per document (a per-document lock); two threads so
        # two files can compile at once on the 2-core machines we target.
        self.compiles_stopped = False  # set at shutdown: work that fails then is dropped quietly
        self.compile_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="cuda-llm-compile")
        # Background code generation, one document at a time: it must not take the threads
        # the next edit's diagnostics need.
        self.codegen_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cuda-llm-codegen")
        self._processes_started = False
        # uri -> (version, text, its parse): requests for one version share one parse.
        self._kernels: dict[str, tuple[int | None, str, asyncio.Future[list[Kernel]]]] = {}
        # The GPUs of the current `cudaLlm.gpus` / `cudaLlm.cluster`: every job leases them.
        self.gpus = GpuService(lambda: self.evaluator_factory(self.settings))
        self._tasks: set[asyncio.Task[Any]] = set()
        # the nvcc tier: whole-file nvcc checks after saves, merged over the fast tier's view
        self.nvcc = NvccChecker(self)

    # --- documents -------------------------------------------------------------------------

    def state(self, uri: str) -> DocumentState:
        if uri not in self.documents:
            self.documents[uri] = DocumentState(uri)
        return self.documents[uri]

    def document(self, uri: str) -> TextDocument | None:
        """The open document (None once closed or never opened); never read from disk."""
        if uri not in self.documents:
            return None
        return self.open_document(uri)

    def open_document(self, uri: str) -> TextDocument | None:
        """The workspace's copy of `uri` while the client has it open, else None."""
        workspace = self.protocol._workspace  # None before initialize
        return workspace.open_document(uri) if isinstance(workspace, LspWorkspace) else None

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
        self.nvcc.forget(uri)
        self.documents.pop(uri, None)
        self._kernels.pop(uri, None)

    @staticmethod
    def path_of(uri: str) -> Path | None:
        """The file of a `file:` URI (None for other schemes and for a path no file can have,
        such as one with a NUL byte from `%00`)."""
        try:
            path = uris.to_fs_path(uri)
        except Exception:  # a malformed URI: no file
            return None
        return Path(path) if path and "\0" not in path else None

    # --- analyses and diagnostics ----------------------------------------------------------

    def schedule_analysis(self, uri: str, *, delay_s: float) -> None:
        """Analyse `uri` after `delay_s`, unless another change comes first."""
        state = self.state(uri)
        state.generation += 1
        self.start_compile_processes()
        self.spawn(self._analyze_later(uri, state.generation, delay_s), f"analysis of {uri}")

    def start_compile_processes(self) -> None:
        """Start the compile processes (they load NVRTC) once: at `initialized`, so that the
        first document's check does not wait for them, or at the first analysis."""
        if self.codegen is not None and not self._processes_started:
            self._processes_started = True
            try:  # the compile processes load NVRTC during the debounce of the first change
                open_analysis(editor=True, persistent_pch=self.keeps_pch())
            except OSError as exc:
                log.warning("could not start the compile processes: %s", exc)

    @property
    def compile_processes_started(self) -> bool:
        return self._processes_started

    def keeps_pch(self) -> bool:
        """`cudaLlm.persistentPch`, and the workspace trusted (`lsp.settings.restrict` also
        refuses it otherwise): the processes reading the user's files run without
        address-space randomization to keep their PCHs across sessions."""
        return self.settings.persistent_pch and self.trust.trusted

    def reanalyze_all(self) -> None:
        """After a settings change: every open document again, at once."""
        self.nvcc.forget_all(list(self.documents))
        for uri in list(self.documents):
            self.schedule_analysis(uri, delay_s=0.0)

    async def _analyze_later(self, uri: str, generation: int, delay_s: float) -> None:
        if delay_s > 0:
            await asyncio.sleep(delay_s)
        state = self.documents.get(uri)
        if state is None or state.generation != generation:
            return  # closed, or a newer change will analyse
        async with state.lock:
            if self.documents.get(uri) is not state or state.generation != generation:
                return
            doc = self.document(uri)
            if doc is None:
                return
            version, text = doc.version, doc.source
            path, settings = self.path_of(uri), self.settings

            def analyse() -> FileAnalysis | None:  # None: queued for a closed or changed document
                if self.documents.get(uri) is not state or state.generation != generation:
                    return None
                return self.analyzer(text, path, settings)

            loop = asyncio.get_running_loop()
            try:
                analysis = await loop.run_in_executor(self.compile_pool, analyse)
            except NvrtcUnavailable as exc:
                self._nvrtc_missing(str(exc))
                return
            except Exception as exc:
                if self.compiles_stopped:  # shutting down: the pools refuse or drop the work
                    log.debug("analysis of %s dropped at shutdown: %s", uri, exc)
                    return
                log.exception("analysis of %s failed", uri)
                self.message(f"cuda-llm: could not analyse {uri}: {exc}", types.MessageType.Error)
                return
        doc = self.document(uri)
        if analysis is None or doc is None or self.documents.get(uri) is not state:
            return
        if state.generation != generation:
            return  # settings changed (or an edit came) during the compile: a newer analysis runs
        if doc.version != version or doc.source != text:
            log.debug("dropping the analysis of %s version %s: now %s", uri, version, doc.version)
            return
        state.fast, state.first, state.completion, state.version = analysis, analysis, None, version
        results.forget_changed(self.reports, uri, analysis)
        profile_results.forget_changed(self.profiles, uri, analysis)
        self.show_analysis(uri)
        if self.codegen is not None and analysis.resources_pending:
            self.spawn(
                self._generate_code(uri, state, generation, analysis), f"code generation of {uri}"
            )
        if self.completer is not None and not analysis.front_end_complete:
            self.spawn(
                self._complete_later(uri, state, generation, analysis), f"complete check of {uri}"
            )

    async def _complete_later(
        self, uri: str, state: DocumentState, generation: int, first: FileAnalysis
    ) -> None:
        """The rest of the front end's answer (what only the end of the unit reports), once
        typing has paused `COMPLETE_AFTER_S`, merged into what is shown (with or without code
        generation's figures). Dropped when an edit or a settings change comes first."""
        assert self.completer is not None

        def superseded() -> bool:
            return (
                state.generation != generation
                or self.documents.get(uri) is not state
                or state.first is not first
            )

        await asyncio.sleep(COMPLETE_AFTER_S)
        if superseded():
            return
        loop = asyncio.get_running_loop()
        try:
            extras = await loop.run_in_executor(self.compile_pool, self.completer, first)
        except NvrtcUnavailable as exc:
            self._nvrtc_missing(str(exc))
            return
        except Exception as exc:
            if self.compiles_stopped:
                log.debug("complete check of %s dropped at shutdown: %s", uri, exc)
                return
            log.exception("complete check of %s failed", uri)
            return
        if superseded() or state.fast is None:
            return
        state.completion = extras
        state.fast = with_completion(state.fast, extras)
        self.show_analysis(uri)

    async def _generate_code(
        self, uri: str, state: DocumentState, generation: int, front: FileAnalysis
    ) -> None:
        """The background stage: resources and ptxas's problems for the analysed version."""
        assert self.codegen is not None

        def superseded() -> bool:  # asked from the worker thread between kernels
            return state.generation != generation or self.documents.get(uri) is not state

        if superseded():
            return
        loop = asyncio.get_running_loop()
        try:
            analysis = await loop.run_in_executor(
                self.codegen_pool, self.codegen, front, superseded
            )
        except NvrtcUnavailable as exc:
            self._nvrtc_missing(str(exc))
            return
        except Exception as exc:
            if self.compiles_stopped:  # shutting down: the pools refuse or drop the work
                log.debug("code generation for %s dropped at shutdown: %s", uri, exc)
                return
            log.exception("code generation for %s failed", uri)
            return
        if superseded() or analysis is front or state.first is not front:
            return  # a newer edit or settings change: its own analysis follows
        if state.completion is not None:  # the complete check came first
            analysis = with_completion(analysis, state.completion)
        state.fast = analysis
        self.show_analysis(uri)

    def show_analysis(self, uri: str) -> None:
        """Show the fast tier's last analysis of `uri`, with nvcc's verdict on the same text
        merged in when there is one: diagnostics, lenses."""
        state = self.documents.get(uri)
        if state is None or state.fast is None:
            return
        analysis = self.nvcc.merged(uri, state.fast)
        state.analysis = analysis
        state.diagnostics = compile_diagnostics.convert(
            analysis.text, analysis.diagnostics, self.codec
        )
        self.publish_diagnostics(uri)
        self.refresh_code_lenses()  # lenses sit on the analysis: the first one makes them appear

    def _nvrtc_missing(self, detail: str) -> None:
        if self.nvrtc_problem is None:
            self.nvrtc_problem = detail
            self.message(
                "cuda-llm: NVRTC could not be loaded, so CUDA files get no compile diagnostics or "
                f"resource figures ({detail}). Install the toolkit wheels "
                "(pip install 'cuda-toolkit[nvrtc,cudart,crt,cccl]==13.*') and restart the server.",
                types.MessageType.Error,
            )

    def close_document(self, uri: str) -> None:
        """Forget a closed document and clear its diagnostics in the client."""
        self.forget(uri)
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=[])
        )

    def publish_diagnostics(self, uri: str) -> None:
        """Send the analysis diagnostics and the job reports for the analysed version of `uri`."""
        state = self.documents.get(uri)
        doc = self.document(uri)
        if state is None or doc is None or state.analysis is None or state.version != doc.version:
            return  # the analysis of the newer text publishes when it is done
        items = (
            state.diagnostics
            + results.diagnostics(self.reports, uri, state.analysis, self.codec)
            + profile_results.diagnostics(self.profiles, uri, state.analysis, self.codec)
        )
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=items, version=state.version)
        )

    def set_report(self, uri: str, report: KernelReport) -> None:
        self.reports[(uri, report.kernel)] = report
        self.publish_diagnostics(uri)

    def set_profile(self, uri: str, report: profile_results.ProfileReport) -> None:
        self.profiles[(uri, report.kernel)] = report
        self.publish_diagnostics(uri)

    def clear_report(self, uri: str, kernel: str) -> None:
        if self.reports.pop((uri, kernel), None) is not None:
            self.publish_diagnostics(uri)

    def refresh_code_lenses(self) -> None:
        """Ask the client to fetch the lenses again (a new analysis, a job started or ended),
        where it supports `workspace/codeLens/refresh`; others ask on their own, e.g. after an
        edit."""
        workspace = self.client_capabilities.workspace
        lens = workspace.code_lens if workspace else None
        if lens and lens.refresh_support:
            self.spawn(self._ask_refresh(), "code lens refresh")

    async def _ask_refresh(self) -> None:
        try:
            await asyncio.wait_for(self.workspace_code_lens_refresh_async(None), 5)
        except Exception as exc:
            log.debug("code lens refresh failed: %s", exc)

    async def show_document(self, uri: str) -> bool:
        """Ask the client to open `uri` (`window/showDocument`, focused); whether it said it
        did. A client that does not answer within `SHOW_DOCUMENT_WAIT_S` counts as not shown,
        so the caller's message naming the path still comes and its request is answered."""
        params = types.ShowDocumentParams(uri=uri, take_focus=True)
        try:
            answer = await asyncio.wait_for(
                self.window_show_document_async(params), SHOW_DOCUMENT_WAIT_S
            )
        except asyncio.TimeoutError:
            log.info("showDocument: no answer within %.0f s", SHOW_DOCUMENT_WAIT_S)
            return False
        except Exception as exc:  # an error answer: the caller names the path instead
            log.info("showDocument failed: %s", exc)
            return False
        return bool(answer and answer.success)

    # --- suggestions -----------------------------------------------------------------------

    def wants_suggestion_notification(self) -> bool:
        """True when the client renders `cudaLlm/suggestion` itself (the VS Code extension)."""
        return results.wants_suggestion_notification(self.client_capabilities)

    async def notify_suggestion(self, suggestion: Suggestion) -> None:
        """Send `cudaLlm/suggestion`, with the kernel's range while its text is the original."""
        text, current = await self.kernel(suggestion.uri, suggestion.kernel)
        where = None
        span = results.suggestion_span(suggestion, text, current) if current is not None else None
        if span is not None:
            where = to_range(split_lines(text), span, self.codec)
        payload = results.suggestion_payload(suggestion, where)
        self.protocol.notify(results.SUGGESTION_NOTIFICATION, payload)

    # --- engine and jobs -------------------------------------------------------------------

    def retire_evaluator(self) -> None:
        """The GPU settings changed: the next job gets a new evaluator; the old one is closed
        when the last job using it ends (`GpuService.retire`)."""
        self.gpus.retire()

    def gpus_for(self, job: Job) -> GpuService:
        """The GPUs the job leases: the server's (`cudaLlm.gpus`, `cudaLlm.cluster`), or for a
        demo job (`cudaLlm.demo`) the shipped recording's answers for its kernel."""
        if not job.demo:
            return self.gpus
        try:
            demo = demo_for(job.kernel)
        except ValueError as exc:  # no recording for this kernel, or a broken install
            raise JobError(f"cannot {job.kind} {job.kernel}: {exc}") from exc
        return GpuService(lambda: demo_evaluator(demo))

    async def job_kernel(self, job: Job) -> tuple[str, str]:
        """The document's current text and the job's kernel's text in it."""
        text, kernel = await self.kernel(job.uri, job.kernel)
        if kernel is None:
            raise JobError(f"no kernel named {job.kernel} in the document")
        return text, kernel.span.slice(text)

    def close_engine(self) -> None:
        self.gpus.close()
        self.stop_compiles()

    def stop_compiles(self) -> None:
        """Kill the compile processes (a waiting compile returns at once) and drop queued work."""
        self.compiles_stopped = True
        self.nvcc.stop()
        self.compile_pool.shutdown(wait=False, cancel_futures=True)
        self.codegen_pool.shutdown(wait=False, cancel_futures=True)
        close_analysis()

    # --- messages and tasks ----------------------------------------------------------------

    def demo_mode(self) -> bool:
        """Whether a job started now answers from the shipped recording (`cudaLlm.demo`)."""
        return self.settings.demo

    def job_label(self) -> str | None:
        """What a job started now says it is: a demo (`cudaLlm.demo`), recorded outcomes
        (`CUDA_LLM_EVALUATOR`), or None."""
        return job_label(self.settings)

    def message(self, text: str, kind: types.MessageType = types.MessageType.Info) -> None:
        # messages quote model text (outcomes, plans, logs): nothing raw reaches the editor
        self.window_show_message(types.ShowMessageParams(type=kind, message=neutralize(text)))

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
