"""A reference model of LSP's text synchronisation, written from the specification alone.

What an editor holds after each change: lines end at `\n`, `\r\n` or `\r` and nowhere else;
`character` counts UTF-8 bytes, UTF-16 code units or code points as negotiated; a `character`
past a line's end means the line's end; a `line` past the last line means the end of the text.
Deliberately naive (one character at a time) so it shares no code with the server's.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

ENCODINGS = ("utf-8", "utf-16", "utf-32")
#: Characters Python's `str.splitlines` breaks at but LSP does not, and the ones both do.
ODD_BREAKS = "\f\v\x1c\x1d\x1e\x85\u2028\u2029"
ALPHABET = "ab x;" + ODD_BREAKS + "\n\r\té€😀"


@dataclass(frozen=True)
class Pos:
    line: int
    character: int

    def json(self) -> dict[str, int]:
        return {"line": self.line, "character": self.character}


def units(char: str, encoding: str) -> int:
    if encoding == "utf-8":
        return len(char.encode("utf-8", "surrogatepass"))
    if encoding == "utf-16":
        return len(char.encode("utf-16-le", "surrogatepass")) // 2
    return 1


def line_starts(text: str) -> list[int]:
    starts = [0]
    i = 0
    while i < len(text):
        if text[i] == "\r" and i + 1 < len(text) and text[i + 1] == "\n":
            i += 2
            starts.append(i)
        elif text[i] in "\r\n":
            i += 1
            starts.append(i)
        else:
            i += 1
    return starts


def _content_end(text: str, starts: list[int], line: int) -> int:
    end = starts[line + 1] if line + 1 < len(starts) else len(text)
    while end > starts[line] and text[end - 1] in "\r\n":
        end -= 1
    return end


def offset(text: str, pos: Pos, encoding: str) -> int:
    starts = line_starts(text)
    if pos.line >= len(starts):
        return len(text)
    at, end, counted = starts[pos.line], _content_end(text, starts, pos.line), 0
    while at < end and counted < pos.character:
        counted += units(text[at], encoding)
        at += 1
    return at


def position(text: str, at: int, encoding: str) -> Pos:
    starts = line_starts(text)
    line = max(i for i, s in enumerate(starts) if s <= at)
    return Pos(line, sum(units(c, encoding) for c in text[starts[line] : at]))


def apply(text: str, start: Pos, end: Pos, new: str, encoding: str) -> str:
    a, b = offset(text, start, encoding), offset(text, end, encoding)
    return text[:a] + new + text[b:]


def random_text(rng: random.Random, size: int) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(size))


def random_position(rng: random.Random, text: str, encoding: str) -> Pos:
    """A position the client may send: mostly inside the text, sometimes past a line's end or
    past the last line."""
    starts = line_starts(text)
    line = rng.randrange(len(starts) + (1 if rng.random() < 0.05 else 0))
    if line >= len(starts):
        return Pos(line, rng.randrange(4))
    content = text[starts[line] : _content_end(text, starts, line)]
    boundaries = [0]
    for char in content:
        boundaries.append(boundaries[-1] + units(char, encoding))
    if rng.random() < 0.15:
        return Pos(line, boundaries[-1] + rng.randrange(1, 50))  # past the line's end
    return Pos(line, rng.choice(boundaries))


def random_edit(rng: random.Random, text: str, encoding: str) -> tuple[Pos, Pos, str]:
    """A random replacement (start <= end in the text) with text from `ALPHABET`."""
    first, second = random_position(rng, text, encoding), random_position(rng, text, encoding)
    if offset(text, second, encoding) < offset(text, first, encoding):
        first, second = second, first
    return first, second, random_text(rng, rng.choice((0, 0, 1, 2, 5)))
