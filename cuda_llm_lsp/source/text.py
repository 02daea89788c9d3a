"""Positions and spans in a source file, shared by every layer.

Lines and columns are 0-based and columns count Unicode code points within the line
(the LSP layer converts to the client's position encoding). The CLI prints them 1-based.
Lines end where LSP says they do: at `\n`, `\r\n` or a lone `\r`. Parsers and NVRTC only
know `\n`, so they are given `normalized(text)`, which keeps every offset, line and column.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

#: The line breaks LSP counts (`\r\n` first: it is one break, not two).
LINE_BREAK = re.compile(r"\r\n|\r|\n")
_LONE_CR = re.compile(r"\r(?!\n)")
BOM = "\ufeff"


def normalized(text: str) -> str:
    """`text` with each lone `\r` made `\n` and a leading byte-order mark made a space.

    Same length, so offsets, lines and columns are those of `text` as LSP counts them: for
    tree-sitter and NVRTC, which take a lone CR for an ordinary character (a `//` comment on
    the first line would then swallow a CR-only file) and a BOM for an unknown token.
    """
    if text.startswith(BOM):
        text = " " + text[1:]
    return _LONE_CR.sub("\n", text) if "\r" in text else text


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
def _lines(text: str) -> tuple[tuple[int, int], ...]:
    """(start, end) offsets of each line's content, its break excluded (cached: many spans
    are sliced from one big text)."""
    lines: list[tuple[int, int]] = []
    start = 0
    for found in LINE_BREAK.finditer(text):
        lines.append((start, found.start()))
        start = found.end()
    lines.append((start, len(text)))
    return tuple(lines)


def offset_of(text: str, point: Point) -> int:
    """Character offset of `point` in `text` (line and column clamped to the text)."""
    lines = _lines(text)
    start, end = lines[min(max(point.line, 0), len(lines) - 1)]
    return start + min(max(point.column, 0), end - start)


def replace_span(text: str, span: Span, replacement: str) -> str:
    """`text` with the characters of `span` replaced by `replacement`."""
    return text[: offset_of(text, span.start)] + replacement + text[offset_of(text, span.end) :]
