"""Positions and spans in a source file, shared by every layer.

Lines and columns are 0-based and columns count Unicode code points within the line
(the LSP layer converts to the client's position encoding). The CLI prints them 1-based.
"""

from __future__ import annotations

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
        lines = text.split("\n")
        start = _offset(lines, self.start)
        end = _offset(lines, self.end)
        return "\n".join(lines)[start:end]


def _offset(lines: list[str], point: Point) -> int:
    line = min(point.line, len(lines) - 1) if lines else 0
    return sum(len(text) + 1 for text in lines[:line]) + min(point.column, len(lines[line]))


def offset_of(text: str, point: Point) -> int:
    """Character offset of `point` in `text`."""
    return _offset(text.split("\n"), point)


def point_at(text: str, offset: int) -> Point:
    """The point of character `offset` in `text`."""
    before = text[:offset]
    line = before.count("\n")
    return Point(line, offset - (before.rfind("\n") + 1))


def replace_span(text: str, span: Span, replacement: str) -> str:
    """`text` with the characters of `span` replaced by `replacement`."""
    return text[: offset_of(text, span.start)] + replacement + text[offset_of(text, span.end) :]
