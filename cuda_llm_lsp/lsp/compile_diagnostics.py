"""The analysis's diagnostics (NVRTC's and the test spec's, 1-based) as LSP diagnostics.

Pure conversion for `textDocument/publishDiagnostics`: problems of our own (spec, input) carry the
source `cuda-llm` and no code, the compiler's carry the source `nvrtc` and its code.
"""

from __future__ import annotations

from collections.abc import Iterable

from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

from cuda_llm_lsp.compile.types import Diagnostic
from cuda_llm_lsp.lsp.positions import split_lines, to_range
from cuda_llm_lsp.source.text import Span

_SEVERITY = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "information": types.DiagnosticSeverity.Information,
}
SPEC_SOURCE = "cuda-llm"
COMPILE_SOURCE = "nvrtc"
_OWN_CODES = ("spec", "input")  # analysis codes of problems that are ours, not the compiler's


def convert(text: str, found: Iterable[Diagnostic], codec: PositionCodec) -> list[types.Diagnostic]:
    lines = split_lines(text)
    return [_convert_one(lines, d, codec) for d in found]


def _convert_one(lines: list[str], d: Diagnostic, codec: PositionCodec) -> types.Diagnostic:
    start_line, start_col = max(d.line - 1, 0), max(d.column - 1, 0)
    end_line, end_col = max(d.end_line - 1, start_line), max(d.end_column - 1, 0)
    if (end_line, end_col) <= (start_line, start_col):
        line_text = lines[start_line] if start_line < len(lines) else ""
        end_line, end_col = start_line, max(len(line_text.rstrip()), start_col + 1)
    return types.Diagnostic(
        range=to_range(lines, Span.of(start_line, start_col, end_line, end_col), codec),
        message=d.message,
        severity=_SEVERITY.get(d.severity, types.DiagnosticSeverity.Error),
        code=None if d.code in _OWN_CODES else d.code,
        source=SPEC_SOURCE if d.code in _OWN_CODES else COMPILE_SOURCE,
    )
