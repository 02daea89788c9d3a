"""Positions and spans in a source file, shared by every layer.

Lines and columns are 0-based and columns count Unicode code points within the line
(the LSP layer converts to the client's position encoding). The CLI prints them 1-based.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Point:
    line: int
    column: int


@dataclass(frozen=True)
class Span:
    """A half-open range [start, end) in a source file."""

    start: Point
    end: Point

    @classmethod
    def of(cls, start_line: int, start_column: int, end_line: int, end_column: int) -> Span:
        return cls(Point(start_line, start_column), Point(end_line, end_column))

    def contains(self, point: Point) -> bool:
        return self.start <= point <= self.end

    def slice(self, text: str) -> str:
        """The text this span covers in `text`."""
        return text[offset_of(text, self.start) : offset_of(text, self.end)]


@functools.lru_cache(maxsize=16)
def _line_starts(text: str) -> tuple[int, ...]:
    """Offsets where each line starts (cached: many spans are sliced from one big text)."""
    starts = [0]
    found = text.find("\n")
    while found != -1:
        starts.append(found + 1)
        found = text.find("\n", found + 1)
    return tuple(starts)


def offset_of(text: str, point: Point) -> int:
    """Character offset of `point` in `text` (line and column clamped to the text)."""
    starts = _line_starts(text)
    line = min(point.line, len(starts) - 1)
    start = starts[line]
    end = starts[line + 1] - 1 if line + 1 < len(starts) else len(text)
    return start + min(point.column, end - start)


def replace_span(text: str, span: Span, replacement: str) -> str:
    """`text` with the characters of `span` replaced by `replacement`."""
    return text[: offset_of(text, span.start)] + replacement + text[offset_of(text, span.end) :]
