"""textDocument/hover on a kernel's name: its resources and a summary of its test spec (and
its last profile's summary); on a line Profile K flagged: that finding's figures.

Answers from the last analysis and never waits for a compile in flight, so it stays instant
while NVRTC works on newer text. The facts themselves are `kernel_facts`'s, shared with the
resources lens.
"""

from __future__ import annotations

import re

from lsprotocol import types

from cuda_llm_lsp.engine.analysis import FileAnalysis
from cuda_llm_lsp.lsp import profile_results
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
        info = next((i for i in state.analysis.kernels if i.kernel.name == word), None)
        if info is None:
            figures = _profile_figures(ls, uri, state.analysis, point.line)
            return _markdown(figures) if figures else None
        value = describe(info, ls.reports.get((uri, info.kernel.name)))
        profile = _current_profile(ls, uri, state.analysis, info.kernel.name)
        if profile is not None:
            value += "\n\n" + profile_results.summary_hover(profile)
        return _markdown(value)


def _markdown(value: str) -> types.Hover:
    return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=value))


def _current_profile(
    ls: CudaLlmServer, uri: str, analysis: FileAnalysis, kernel: str
) -> profile_results.ProfileReport | None:
    """The kernel's profile while its text is still the one profiled."""
    report = ls.profiles.get((uri, kernel))
    info = next((i for i in analysis.kernels if i.kernel.name == kernel), None)
    if (
        report is None
        or info is None
        or info.kernel.span.slice(analysis.text) != report.kernel_text
    ):
        return None
    return report


def _profile_figures(ls: CudaLlmServer, uri: str, analysis: FileAnalysis, row: int) -> str | None:
    """The profile figures of the findings shown on line `row` (Profile K), or None."""
    for info in analysis.kernels:
        report = _current_profile(ls, uri, analysis, info.kernel.name)
        text = profile_results.hover(report, row) if report is not None else None
        if text:
            return text
    return None


def _word_at(line: str, column: int) -> str | None:
    for match in _WORD.finditer(line):
        if match.start() <= column <= match.end():
            return match.group(0)
    return None
