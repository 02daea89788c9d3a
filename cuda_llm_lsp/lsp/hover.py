"""textDocument/hover on a kernel's name: its resources and a summary of its test spec.

Answers from the last analysis and never waits for a compile in flight, so it stays instant
while NVRTC works on newer text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from cuda_llm_lsp.lsp.code_lens import resources_line
from cuda_llm_lsp.lsp.positions import split_lines, to_point

if TYPE_CHECKING:
    from cuda_llm_lsp.lsp.server import CudaLlmServer

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
                kind=types.MarkupKind.Markdown, value=describe(ls, uri, info)
            )
        )


def _word_at(line: str, column: int) -> str | None:
    for match in _WORD.finditer(line):
        if match.start() <= column <= match.end():
            return match.group(0)
    return None


@dataclass(frozen=True)
class _Facts:
    """What hover and the resources lens say about a kernel, before either renders it."""

    signature: str
    resources: str
    launch_bounds: str | None
    spec: str  # Markdown: *emphasis* and paragraphs
    last_result: str | None


def _facts(server: CudaLlmServer, uri: str, info: Any) -> _Facts:
    kernel = info.kernel
    params = ", ".join(f"{p.c_type} {p.name}" for p in kernel.params)
    report = server.reports.get((uri, kernel.name))
    bounds = kernel.launch_bounds
    return _Facts(
        signature=f"__global__ void {kernel.name}({params})",
        resources=resources_line(kernel.name, info.resources, info.symbol_note),
        launch_bounds=f"__launch_bounds__({bounds})" if bounds else None,
        spec=spec_summary(info),
        last_result=report.info if report is not None else None,
    )


def describe(server: CudaLlmServer, uri: str, info: Any) -> str:
    """The hover, in Markdown."""
    facts = _facts(server, uri, info)
    parts = [f"```cuda\n{facts.signature}\n```", facts.resources]
    if facts.launch_bounds:
        parts.append(f"`{facts.launch_bounds}`")
    parts.append(facts.spec)
    if facts.last_result:
        parts.append(facts.last_result)
    return "\n\n".join(parts)


def plain_summary(server: CudaLlmServer, uri: str, info: Any) -> str:
    """The hover's facts as one plain-text message (what the resources lens shows on a click)."""
    facts = _facts(server, uri, info)
    parts = [facts.resources]
    if facts.launch_bounds:
        parts.append(facts.launch_bounds)
    parts.append(facts.spec.replace("*", "").replace("\n\n", " · "))
    if facts.last_result:
        parts.append(f"last result: {facts.last_result}")
    return "cuda-llm: " + "; ".join(parts)


def spec_summary(info: Any) -> str:
    spec = info.spec
    if spec is None:
        if info.kernel.spec is not None:
            return "Test spec: has errors (see diagnostics)"
        return "No test spec: use the code action *Add test spec* to draft one"
    sizes = ", ".join(f"{name}={values[-1]}" for name, values in spec.sizes.items())
    grid = ", ".join(spec.grid)
    block = ", ".join(spec.block)
    args = ", ".join(
        f"{a.name}: {a.role} {a.dtype}[{a.count}]" if a.is_pointer else f"{a.name}={a.value}"
        for a in spec.args
    )
    return (
        f"Test spec: {spec.case_count} cases, timed case {sizes or '-'}; "
        f"grid ({grid}) block ({block})\n\n{args}"
    )
