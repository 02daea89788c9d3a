"""textDocument/didOpen, didChange, didSave, didClose -> textDocument/publishDiagnostics.

Opening a document analyses it after `OPEN_DELAY_S` (a burst of opens and closes, as search
previews and "Replace in files" send, costs no compile for a document closed that soon), saving
at once, a change after the debounce (`cudaLlm.debounceMs`) when it follows another change
closer than that, else at once (a lone edit after a pause, the commonest wait for a squiggle,
does not wait for keystrokes that are not coming), closing clears its diagnostics and drops its
queued work. The state runs the analysis and publishes only results that match the
document's current version (`CudaLlmServer.schedule_analysis`). Saves (and quiet spells, with
`cudaLlm.nvccCheck` `pause`) also start the nvcc tier (`lsp.nvcc_check`). A change or save of a
document that is not open is logged and ignored: the server never reads the file itself.
"""

from __future__ import annotations

import logging
import time

from lsprotocol import types

from cuda_llm_lsp.lsp.state import CudaLlmServer

log = logging.getLogger(__name__)

#: How long an opened document waits before its first analysis.
OPEN_DELAY_S = 0.05


def register(server: CudaLlmServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: CudaLlmServer, params: types.DidOpenTextDocumentParams) -> None:
        if ls.open_document(params.text_document.uri) is not None:
            ls.schedule_analysis(params.text_document.uri, delay_s=OPEN_DELAY_S)
            ls.nvcc.opened(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: CudaLlmServer, params: types.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        if _is_open(ls, uri, "change"):
            state = ls.state(uri)
            debounce_s, now = ls.settings.debounce_ms / 1000, time.monotonic()
            typing = now - state.last_change < debounce_s  # else the first keystroke of a burst
            state.last_change = now
            ls.schedule_analysis(uri, delay_s=debounce_s if typing else 0.0)
            ls.nvcc.changed(uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: CudaLlmServer, params: types.DidSaveTextDocumentParams) -> None:
        if _is_open(ls, params.text_document.uri, "save"):
            ls.schedule_analysis(params.text_document.uri, delay_s=0.0)
            ls.nvcc.saved(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: CudaLlmServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.close_document(params.text_document.uri)


def _is_open(ls: CudaLlmServer, uri: str, what: str) -> bool:
    if ls.open_document(uri) is None or uri not in ls.documents:
        log.warning("ignoring the %s of %.200s: it is not open", what, uri)
        return False
    return True
