"""textDocument/documentSymbol: the file's kernels, found by tree-sitter in the current text."""

from __future__ import annotations

from lsprotocol import types

from cuda_llm_lsp.lsp.positions import split_lines, to_range
from cuda_llm_lsp.lsp.state import CudaLlmServer


def register(server: CudaLlmServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    async def document_symbols(
        ls: CudaLlmServer, params: types.DocumentSymbolParams
    ) -> list[types.DocumentSymbol]:
        text, kernels = await ls.kernels(params.text_document.uri)
        lines = split_lines(text)
        return [
            types.DocumentSymbol(
                name=k.name,
                kind=types.SymbolKind.Function,
                range=to_range(lines, k.span, ls.codec),
                selection_range=to_range(lines, k.name_span, ls.codec),
                detail="__global__ (" + ", ".join(p.c_type for p in k.params) + ")",
            )
            for k in kernels
        ]
