"""textDocument/didOpen, didChange, didSave, didClose -> textDocument/publishDiagnostics.

Each change bumps the document's generation; after the debounce, the analysis (tree-sitter, the
device unit, NVRTC) runs in a worker thread, one at a time per document. A result is published
only if the document still has the version that was analysed, and always carries that version:
an older result is dropped, never published over newer text.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from cuda_llm_lsp.compile.types import Diagnostic, NvrtcUnavailable
from cuda_llm_lsp.lsp import code_lens, results
from cuda_llm_lsp.lsp.positions import split_lines, to_range
from cuda_llm_lsp.source.text import Span

if TYPE_CHECKING:
    from cuda_llm_lsp.lsp.server import CudaLlmServer

log = logging.getLogger(__name__)

_SEVERITY = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "information": types.DiagnosticSeverity.Information,
}
SPEC_SOURCE = "cuda-llm"
COMPILE_SOURCE = "nvrtc"
_OWN_CODES = ("spec", "input")  # analysis codes of problems that are ours, not the compiler's


def register(server: CudaLlmServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: CudaLlmServer, params: types.DidOpenTextDocumentParams) -> None:
        schedule(ls, params.text_document.uri, delay_s=0.0)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: CudaLlmServer, params: types.DidChangeTextDocumentParams) -> None:
        schedule(ls, params.text_document.uri, delay_s=ls.settings.debounce_ms / 1000)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: CudaLlmServer, params: types.DidSaveTextDocumentParams) -> None:
        schedule(ls, params.text_document.uri, delay_s=0.0)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: CudaLlmServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.forget(uri)
        ls.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=[])
        )


def schedule(server: CudaLlmServer, uri: str, *, delay_s: float) -> None:
    """Analyse `uri` after `delay_s`, unless another change comes first."""
    state = server.state(uri)
    state.generation += 1
    server.spawn(_analyze_later(server, uri, state.generation, delay_s), f"analysis of {uri}")


def reanalyze_all(server: CudaLlmServer) -> None:
    """After a settings change: every open document again, at once."""
    for uri in list(server.documents):
        schedule(server, uri, delay_s=0.0)


async def _analyze_later(server: CudaLlmServer, uri: str, generation: int, delay_s: float) -> None:
    if delay_s > 0:
        await asyncio.sleep(delay_s)
    state = server.documents.get(uri)
    if state is None or state.generation != generation:
        return  # closed, or a newer change will analyse
    async with state.lock:
        if server.documents.get(uri) is not state or state.generation != generation:
            return
        doc = server.document(uri)
        if doc is None:
            return
        version, text = doc.version, doc.source
        loop = asyncio.get_running_loop()
        try:
            analysis = await loop.run_in_executor(
                server.compile_pool, server.analyzer, text, server.path_of(uri), server.settings
            )
        except NvrtcUnavailable as exc:
            _nvrtc_missing(server, str(exc))
            return
        except Exception as exc:
            log.exception("analysis of %s failed", uri)
            server.message(f"cuda-llm: could not analyse {uri}: {exc}", types.MessageType.Error)
            return
    doc = server.document(uri)
    if doc is None or server.documents.get(uri) is not state:
        return
    if state.generation != generation:
        return  # settings changed (or an edit came) during the compile: a newer analysis runs
    if doc.version != version or doc.source != text:
        log.debug("dropping the analysis of %s version %s: now %s", uri, version, doc.version)
        return
    state.analysis, state.version = analysis, version
    state.diagnostics = convert(server, text, analysis.diagnostics)
    results.forget_changed(server, uri, analysis)
    publish(server, uri)
    code_lens.refresh(server)  # lenses sit on the analysis: the first one makes them appear


def _nvrtc_missing(server: CudaLlmServer, detail: str) -> None:
    if server.nvrtc_problem is None:
        server.nvrtc_problem = detail
        server.message(
            "cuda-llm: NVRTC could not be loaded, so CUDA files get no compile diagnostics or "
            f"resource figures ({detail}). Install the toolkit wheels "
            "(pip install 'cuda-toolkit[nvrtc,cudart,crt,cccl]==13.*') and restart the server.",
            types.MessageType.Error,
        )


def publish(server: CudaLlmServer, uri: str) -> None:
    """Send the analysis diagnostics and the job reports for the analysed version of `uri`."""
    state = server.documents.get(uri)
    doc = server.document(uri)
    if state is None or doc is None or state.analysis is None or state.version != doc.version:
        return  # the analysis of the newer text publishes when it is done
    items = state.diagnostics + results.diagnostics(server, uri, state.analysis)
    server.text_document_publish_diagnostics(
        types.PublishDiagnosticsParams(uri=uri, diagnostics=items, version=state.version)
    )


def convert(server: CudaLlmServer, text: str, found: Any) -> list[types.Diagnostic]:
    lines = split_lines(text)
    return [_convert_one(server, lines, d) for d in found]


def _convert_one(server: CudaLlmServer, lines: list[str], d: Diagnostic) -> types.Diagnostic:
    start_line, start_col = max(d.line - 1, 0), max(d.column - 1, 0)
    end_line, end_col = max(d.end_line - 1, start_line), max(d.end_column - 1, 0)
    if (end_line, end_col) <= (start_line, start_col):
        line_text = lines[start_line] if start_line < len(lines) else ""
        end_line, end_col = start_line, max(len(line_text.rstrip()), start_col + 1)
    return types.Diagnostic(
        range=to_range(lines, Span.of(start_line, start_col, end_line, end_col), server.codec),
        message=d.message,
        severity=_SEVERITY.get(d.severity, types.DiagnosticSeverity.Error),
        code=None if d.code in _OWN_CODES else d.code,
        source=SPEC_SOURCE if d.code in _OWN_CODES else COMPILE_SOURCE,
    )
