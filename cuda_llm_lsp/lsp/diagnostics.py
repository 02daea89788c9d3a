"""textDocument/didOpen, didChange, didSave, didClose -> textDocument/publishDiagnostics.

Opening or saving a document analyses it at once, a change after the debounce
(`cudaLlm.debounceMs`), closing clears its diagnostics. The state runs the analysis and publishes
only results that match the document's current version (`CudaLlmServer.schedule_analysis`).
"""

from __future__ import annotations

from lsprotocol import types

from cuda_llm_lsp.lsp.state import CudaLlmServer


def register(server: CudaLlmServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: CudaLlmServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.schedule_analysis(params.text_document.uri, delay_s=0.0)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: CudaLlmServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.schedule_analysis(params.text_document.uri, delay_s=ls.settings.debounce_ms / 1000)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: CudaLlmServer, params: types.DidSaveTextDocumentParams) -> None:
        ls.schedule_analysis(params.text_document.uri, delay_s=0.0)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: CudaLlmServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.close_document(params.text_document.uri)
