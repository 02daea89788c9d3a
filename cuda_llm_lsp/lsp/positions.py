"""Conversions between our 0-based code-point `Span`s and LSP positions in the client's encoding.

The engine counts columns in Unicode code points; LSP clients count UTF-16 code units unless
they negotiated another `positionEncoding`. pygls's `PositionCodec` knows the negotiated one.
Lines are split at `\n`, `\r\n` and a lone `\r`, as LSP counts them (not `str.splitlines`,
which also breaks at form feeds and Unicode separators).
"""

from __future__ import annotations

from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

from cuda_llm_lsp.source.text import LINE_BREAK, Point, Span


def split_lines(text: str) -> list[str]:
    """The lines of `text` without their breaks."""
    return LINE_BREAK.split(text) if "\r" in text else text.split("\n")


def to_position(lines: list[str], point: Point, codec: PositionCodec) -> types.Position:
    if not lines:
        return types.Position(line=0, character=0)
    line = min(max(point.line, 0), len(lines) - 1)
    column = point.column if point.line == line else len(lines[line])
    return types.Position(line=line, character=codec.client_num_units(lines[line][:column]))


def to_range(lines: list[str], span: Span, codec: PositionCodec) -> types.Range:
    return types.Range(
        start=to_position(lines, span.start, codec), end=to_position(lines, span.end, codec)
    )


def to_point(lines: list[str], position: types.Position, codec: PositionCodec) -> Point:
    """The code-point `Point` of a client position (clamped to the text)."""
    if not lines:
        return Point(0, 0)
    if position.line >= len(lines):
        return Point(len(lines) - 1, len(lines[-1]))
    row = max(position.line, 0)
    line = lines[row]
    units = 0
    for index, char in enumerate(line):
        if units >= position.character:
            return Point(row, index)
        units += codec.client_num_units(char)
    return Point(row, len(line))


def point_at(text: str, offset: int) -> Point:
    """The `Point` of character `offset` in `text` (lines broken as LSP breaks them)."""
    line, start = 0, 0
    for found in LINE_BREAK.finditer(text, 0, offset):
        line, start = line + 1, found.end()
    return Point(line, offset - start)
