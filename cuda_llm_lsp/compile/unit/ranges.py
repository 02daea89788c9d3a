"""Character-range arithmetic on blanked text: byte ranges as character ranges, merged and
applied as spaces (lines and columns stay), and constants' ranges moved between texts."""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Constant:
    """An unannotated namespace-scope constant declaration: its names, its character range."""

    names: tuple[str, ...]
    start: int
    end: int


def apply_blanks(text: str, data: bytes, ranges: list[tuple[int, int]]) -> str:
    """Replace every character in the byte `ranges` except newlines by a space."""
    if not ranges:
        return text
    pieces: list[str] = []
    cursor = 0
    for s, e in _char_ranges(text, data, _merge(ranges)):
        s = max(s, cursor)
        if e <= s:
            continue
        pieces.append(text[cursor:s])
        pieces.append(spaces(text[s:e]))
        cursor = e
    pieces.append(text[cursor:])
    return "".join(pieces)


def _char_ranges(text: str, data: bytes, ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted byte ranges of `data` (UTF-8 of `text`) as character ranges of `text`."""
    if len(data) == len(text):
        return ranges
    out: list[tuple[int, int]] = []
    byte_pos = char_pos = 0
    for start, end in ranges:  # sorted: decode only the gaps once
        char_pos += len(data[byte_pos:start].decode("utf-8", errors="surrogatepass"))
        s = char_pos
        char_pos += len(data[start:end].decode("utf-8", errors="surrogatepass"))
        out.append((s, char_pos))
        byte_pos = end
    return out


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def spaces(chunk: str) -> str:
    return "\n".join(" " * len(line) for line in chunk.split("\n"))


def constant_ranges(
    constants: list[tuple[str, int, int]], text: str, data: bytes
) -> list[Constant]:
    """The walker's constants (name, byte range) as declarations with character ranges."""
    by_decl: dict[tuple[int, int], list[str]] = {}
    for name, start, end in constants:
        by_decl.setdefault((start, end), []).append(name)
    decls = sorted(by_decl)
    return [
        Constant(tuple(by_decl[decl]), s, e)
        for (s, e), decl in zip(_char_ranges(text, data, decls), decls, strict=True)
    ]


def rebased(constants: list[Constant], read: str, now: str) -> list[Constant]:
    """`constants`' ranges in `read` as ranges in `now`: the same lines and columns (blanking
    keeps both; only `#include` lines, which hold no constant, were respelled)."""
    if read == now or len(read) == len(now) or not constants:
        return constants
    read_starts = _line_starts(read)
    now_starts = _line_starts(now)

    def moved(offset: int) -> int:
        row = bisect.bisect_right(read_starts, offset) - 1
        return now_starts[row] + offset - read_starts[row]

    return [Constant(c.names, moved(c.start), moved(c.end)) for c in constants]


def _line_starts(text: str) -> list[int]:
    starts = [0]
    starts.extend(m.end() for m in re.finditer("\n", text))
    return starts


def blank_chars(text: str, ranges: list[tuple[int, int]]) -> str:
    """`text` with the sorted character `ranges` made spaces (newlines stay)."""
    pieces: list[str] = []
    cursor = 0
    for s, e in ranges:
        if s < cursor:
            continue
        pieces.append(text[cursor:s])
        pieces.append(spaces(text[s:e]))
        cursor = e
    pieces.append(text[cursor:])
    return "".join(pieces)
