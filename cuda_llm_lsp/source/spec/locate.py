"""Where a problem in a spec block is: TOML key paths mapped to spans in file coordinates.

The parser and the case evaluation report problems by key path (`Problem`: `("args", "n")`, a
needle inside the value, a column inside the needle); the `Locator` scans the block's lines once
and places them, so diagnostics land on the offending key or token. A light line scanner, not a
TOML parser: tomllib has already accepted the block when a problem is located.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from cuda_llm_lsp.source.kernels import SpecBlock
from cuda_llm_lsp.source.text import Point, Span


@dataclass(frozen=True)
class Problem:
    """A problem located by key path (the parser turns it into a `SpecError` with the `Locator`)."""

    path: tuple[str, ...]
    message: str
    needle: str | None = None
    column: int | None = None
    severity: Literal["error", "warning"] = "error"


@dataclass(frozen=True)
class _Entry:
    line: int  # TOML-relative line
    key_start: int
    key_end: int
    value_start: int
    value_end: int  # on `line`, comment excluded
    last_line: int  # last line of the value (multi-line arrays)


_BARE_KEY = r"[A-Za-z0-9_-]+"
_QUOTED_KEY = r"\"(?:[^\"\\]|\\.)*\"|'[^']*'"
_KEY_PART = rf"(?:{_BARE_KEY}|{_QUOTED_KEY})"
_DOTTED_KEY = re.compile(rf"\s*({_KEY_PART}(?:\s*\.\s*{_KEY_PART})*)\s*=")
_HEADER = re.compile(rf"\s*\[\[?\s*({_KEY_PART}(?:\s*\.\s*{_KEY_PART})*)\s*\]\]?")


def _key_parts(key: str) -> tuple[str, ...]:
    parts = re.findall(_KEY_PART, key)
    return tuple(p[1:-1] if p[:1] in "\"'" else p for p in parts)


def _comment_start(line: str, start: int) -> int:
    """Index of a `#` comment outside strings (or len(line))."""
    quote = ""
    i = start
    while i < len(line):
        ch = line[i]
        if quote:
            if ch == "\\" and quote == '"':
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            return i
        i += 1
    return len(line)


class Locator:
    """Maps TOML keys of a spec block to spans in file coordinates."""

    def __init__(self, block: SpecBlock) -> None:
        self.block = block
        self.lines = block.toml.split("\n")
        self.entries: dict[tuple[str, ...], list[_Entry]] = {}
        self._scan()

    def _scan(self) -> None:
        table: tuple[str, ...] = ()
        last: tuple[tuple[str, ...], _Entry] | None = None
        in_multiline = ""
        for number, line in enumerate(self.lines):
            if in_multiline:
                if line.count(in_multiline) % 2 == 1:
                    in_multiline = ""
                continue
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):
                continue
            header = _HEADER.match(line) if stripped.startswith("[") else None
            key = None if header else _DOTTED_KEY.match(line)
            if header is None and key is None:
                if last is not None:  # continuation of a multi-line value
                    path, entry = last
                    self.entries[path][-1] = _Entry(
                        entry.line,
                        entry.key_start,
                        entry.key_end,
                        entry.value_start,
                        entry.value_end,
                        number,
                    )
                continue
            if header is not None:
                table = _key_parts(header.group(1))
                end = _comment_start(line, 0)
                entry = _Entry(
                    number, header.start(1), header.end(1), 0, len(line[:end].rstrip()), number
                )
                self.entries.setdefault(table, []).append(entry)
                last = None
                continue
            assert key is not None
            path = table + _key_parts(key.group(1))
            value_start = key.end()
            while value_start < len(line) and line[value_start].isspace():
                value_start += 1
            value_end = len(line[: _comment_start(line, value_start)].rstrip())
            entry = _Entry(number, key.start(1), key.end(1), value_start, value_end, number)
            self.entries.setdefault(path, []).append(entry)
            last = (path, entry)
            for marker in ('"""', "'''"):
                if line[value_start:].count(marker) % 2 == 1:
                    in_multiline = marker

    # coordinates ------------------------------------------------------------------------------

    def point(self, line: int, column: int) -> Point:
        offset = self.block.toml_first_column if line == 0 else 0
        return Point(self.block.toml_first_line + line, column + offset)

    def span(self, line: int, start: int, end: int) -> Span:
        return Span(self.point(line, start), self.point(line, max(end, start + 1)))

    def marker(self) -> Span:
        """The `/* @cuda-llm` opening: where block-wide problems are reported."""
        start = self.block.span.start
        first = self.point(0, 0)
        if first.line == start.line and first.column > start.column:
            return Span(start, first)
        return Span(start, Point(start.line, start.column + 2))

    def line_span(self, line: int) -> Span:
        text = self.lines[line] if 0 <= line < len(self.lines) else ""
        content = text[: _comment_start(text, 0)].rstrip() or text.rstrip()
        start = len(content) - len(content.lstrip())
        if not content.strip():
            return self.marker()
        return self.span(line, start, len(content))

    # lookups ----------------------------------------------------------------------------------

    def entry(self, path: tuple[str, ...], occurrence: int = 0) -> _Entry | None:
        for length in range(len(path), 0, -1):
            found = self.entries.get(path[:length])
            if found:
                return found[min(occurrence, len(found) - 1)]
        inside = [e[0] for p, e in self.entries.items() if p[: len(path)] == path]
        return min(inside, key=lambda e: e.line) if path and inside else None

    def key(self, path: tuple[str, ...]) -> Span:
        """The whole `key = value` of `path` (or of its nearest enclosing key/table)."""
        entry = self.entry(path)
        if entry is None:
            return self.marker()
        return self.span(entry.line, entry.key_start, max(entry.value_end, entry.key_end))

    def value(
        self, path: tuple[str, ...], needle: str | None = None, column: int | None = None
    ) -> Span:
        """The value of `path`; with `needle`, where that text occurs in the value; with
        `column`, the token at that column of the needle."""
        entry = self.entry(path)
        if entry is None:
            return self.marker()
        if path not in self.entries:  # only an enclosing key was found
            return self.key(path)
        if needle:
            for number in range(entry.line, entry.last_line + 1):
                text = self.lines[number]
                start = entry.value_start if number == entry.line else 0
                at = text.find(needle, start)
                if at < 0:
                    continue
                if column is None:
                    return self.span(number, at, at + len(needle))
                col = at + min(max(column, 0), len(needle))
                end = col + 1
                while (
                    end < at + len(needle)
                    and (text[end].isalnum() or text[end] == "_")
                    and (text[col].isalnum() or text[col] == "_")
                ):
                    end += 1
                return self.span(number, col, end)
        if entry.value_end <= entry.value_start:
            return self.key(path)
        return self.span(entry.line, entry.value_start, entry.value_end)
