"""textDocument/hover on a kernel's name: its resources and a summary of its test spec.

Answers from the last analysis and never waits for a compile in flight, so it stays instant
while NVRTC works on newer text. The facts themselves are `kernel_facts`'s, shared with the
resources lens.
"""

from __future__ import annotations

import re

from lsprotocol import types

from cuda_llm_lsp.lsp.kernel_facts import describe
from cuda_llm_lsp.lsp.positions import split_lines, to_point
from cuda_llm_lsp.lsp.state import CudaLlmServer

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def register(server: CudaLlmServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def hover(ls: CudaLlmServer, params: types.HoverParams) -> types.Hover | None:
        uri = params.text_document.uri
        state = ls.documents.get(uri)
        doc = ls.document(uri)
        if state is None or doc is None or state.analysis is None:
            return None
        lines = split_lines(doc.source)
        point = to_point(lines, params.position, ls.codec)
        word = _word_at(lines[point.line] if point.line < len(lines) else "", point.column)
        if word is None:
            return None
        info = next((i for i in state.analysis.kernels if i.kernel.name == word), None)
        if info is None:
            return None
        return types.Hover(
            contents=types.MarkupContent(
                kind=types.MarkupKind.Markdown,
                value=describe(info, ls.reports.get((uri, info.kernel.name))),
            )
        )


def _word_at(line: str, column: int) -> str | None:
    for match in _WORD.finditer(line):
        if match.start() <= column <= match.end():
            return match.group(0)
    return None
