"""The `#include` directives a C preprocessor sees in a text, however they are spelled.

The server resolves `#include "..."` lines itself and checks what they read (`include_reads`);
a line it does not recognise stays in the unit, and NVRTC (or nvcc's host compiler) opens the
file it names unchecked. A preprocessor joins `\\`-newline splices first, reads comments as
spaces and `%:` (digraph) or `??=` (trigraph) as `#`, and takes `#include_next` and `#import`
too: `%:include "/home/u/.ssh/id_rsa"`, `#/**/include "..."` or `#inc\\<newline>lude "..."`
were read by NVRTC from outside an untrusted workspace. `include_directives` finds them all, as
the preprocessor reads them (translation phases 1 to 3, raw strings and literals skipped), with
the physical rows each spans, so a caller can leave out every one it did not resolve itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_KEYWORDS = frozenset({"include", "include_next", "import"})
#: What every spelling of an include directive other than `#include`/`#include_next`/`#import`
#: at the start of its own line holds: a digraph or trigraph `#`, a comment before the `#` or
#: after it, a splice before the keyword ends. A text without any is read by regexes alone
#: (`include_directives` reads char by char: about a second for 1 MB).
_SUSPECT = re.compile(
    r"%:|\?\?=|\*/[ \t]*#|#[ \t]*(?:/\*|include_next\b|import\b)|#[ \t]*\w*\\[ \t]*\r?\n"
)
#: Where a plain include directive starts, on its physical line.
_PLAIN = re.compile(r"^[ \t]*#[ \t]*(?:include|include_next|import)\b", re.M)
_RAW_PREFIX = re.compile(r"(?:u8|[uUL])?R$")


@dataclass(frozen=True)
class IncludeDirective:
    """An include-family directive: where it is in the text (from its `#` to the end of its
    line, splices followed), the physical rows that spans, and its keyword."""

    start: int
    end: int
    first_row: int
    last_row: int
    keyword: str


def suspect(text: str) -> bool:
    """Whether `text` may hold an include directive spelled otherwise than plainly (`_SUSPECT`)."""
    return _SUSPECT.search(text) is not None


def plain_rows(text: str) -> set[int]:
    """The rows of `text` where a plainly spelled include directive starts."""
    rows: set[int] = set()
    row, last = 0, 0
    for match in _PLAIN.finditer(text):
        row += text.count("\n", last, match.start())
        last = match.start()
        rows.add(row)
    return rows


def unresolved(text: str, resolved: set[int]) -> list[IncludeDirective]:
    """The include directives of `text` that start on no row of `resolved`: fast when there is
    no suspect spelling and every plain one is resolved."""
    if not suspect(text) and plain_rows(text) <= resolved:
        return []
    return [d for d in include_directives(text) if d.first_row not in resolved]


def _spliced(text: str) -> tuple[str, list[int], list[int]]:
    """`text` with each backslash-newline removed, the physical row of each kept char and its
    offset in `text`."""
    out: list[str] = []
    rows: list[int] = []
    offsets: list[int] = []
    row = 0
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "\\":
            j = i + 1
            while j < n and text[j] in " \t\r":  # GCC accepts spaces (and a CR) after it
                j += 1
            if j < n and text[j] == "\n":
                row += 1
                i = j + 1
                continue
        out.append(ch)
        rows.append(row)
        offsets.append(i)
        if ch == "\n":
            row += 1
        i += 1
    return "".join(out), rows, offsets


def include_directives(text: str) -> list[IncludeDirective]:
    """Every `#include`, `#include_next` and `#import` directive of `text` (module docstring)."""
    data, rows, offsets = _spliced(text)
    found: list[IncludeDirective] = []
    n = len(data)
    i = 0
    at_start = True  # only white space and comments since the last newline
    while i < n:
        ch = data[i]
        if ch == "\n":
            at_start = True
            i += 1
        elif ch in " \t\f\v\r":
            i += 1
        elif data.startswith("//", i):
            end = data.find("\n", i)
            i = n if end < 0 else end
        elif data.startswith("/*", i):
            end = data.find("*/", i + 2)
            i = n if end < 0 else end + 2  # a comment spanning lines: the `#` after it counts
        elif at_start and (ch == "#" or data.startswith("%:", i) or data.startswith("??=", i)):
            start = i
            i += 1 if ch == "#" else (2 if ch == "%" else 3)
            i = _skip_blanks(data, i)
            word_end = i
            while word_end < n and (data[word_end].isalnum() or data[word_end] == "_"):
                word_end += 1
            keyword = data[i:word_end]
            end = _directive_end(data, word_end)
            if keyword in _KEYWORDS:
                stop = offsets[end - 1] + 1 if end > start else offsets[start] + 1
                last = rows[end - 1] if end > start else rows[start]
                found.append(IncludeDirective(offsets[start], stop, rows[start], last, keyword))
            i = end
            at_start = False
        elif ch in "\"'":
            i = _literal_end(data, i, ch)
            at_start = False
        elif ch == "R" and i + 1 < n and data[i + 1] == '"' and _raw_start(data, i):
            i = _raw_end(data, i + 1)
            at_start = False
        else:
            i += 1
            at_start = False
    return found


def _skip_blanks(data: str, i: int) -> int:
    """Past spaces, tabs and comments on the same (logical) line."""
    n = len(data)
    while i < n:
        if data[i] in " \t\f\v\r":
            i += 1
        elif data.startswith("/*", i):
            end = data.find("*/", i + 2)
            i = n if end < 0 else end + 2
        else:
            break
    return i


def _directive_end(data: str, i: int) -> int:
    """Where the directive starting before `i` ends: its newline (a block comment may carry it
    on to a later line)."""
    n = len(data)
    while i < n and data[i] != "\n":
        if data.startswith("/*", i):
            end = data.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif data.startswith("//", i):
            end = data.find("\n", i)
            return n if end < 0 else end
        else:
            i += 1
    return i


def _literal_end(data: str, i: int, quote: str) -> int:
    """Past a string or character literal starting at `i` (it ends at its line at the latest)."""
    n = len(data)
    j = i + 1
    while j < n and data[j] != "\n":
        if data[j] == "\\":
            j += 2
            continue
        if data[j] == quote:
            return j + 1
        j += 1
    return j


def _raw_start(data: str, i: int) -> bool:
    """Whether the `R` at `i` starts a raw string literal (`R"`, `u8R"`...), not an identifier's
    end (`FOR"`)."""
    start = i
    while start > 0 and (data[start - 1].isalnum() or data[start - 1] == "_"):
        start -= 1
    return _RAW_PREFIX.fullmatch(data[start : i + 1]) is not None


def _raw_end(data: str, quote: int) -> int:
    """Past the raw string whose `"` is at `quote`: `R"delim( ... )delim"`."""
    paren = data.find("(", quote + 1, quote + 18)
    if paren < 0:
        return quote + 1
    closing = ")" + data[quote + 1 : paren] + '"'
    end = data.find(closing, paren + 1)
    return len(data) if end < 0 else end + len(closing)


def blank(text: str, directive: IncludeDirective) -> str:
    """`text` with `directive` made spaces (line breaks kept: rows and columns stay)."""
    part = text[directive.start : directive.end]
    spaces = "".join(c if c == "\n" else " " for c in part)
    return text[: directive.start] + spaces + text[directive.end :]


#: `__has_include("x")` / `(<x>)` / `(MACRO)`: the preprocessor opens what it names (a FIFO
#: blocked NVRTC to its time limit, and gcc under nvcc; a file outside an untrusted workspace
#: answered whether it exists).
_HAS_INCLUDE = re.compile(
    r"__has_include(?:_next)?[ \t]*\([ \t]*"
    r'(?:"(?P<quoted>[^"\n]*)"|<(?P<bracketed>[^>\n]*)>|(?P<computed>[^()\n]*))[ \t]*\)'
)
#: GCC's `#pragma GCC dependency "file"`: gcc opens the file (nvcc's host compiler).
_DEPENDENCY = re.compile(
    r'^[ \t]*#[ \t]*pragma[ \t]+GCC[ \t]+dependency[ \t]+(?:"(?P<quoted>[^"\n]*)"'
    r"|<(?P<bracketed>[^>\n]*)>)",
    re.M,
)
_ANY_DEPENDENCY = re.compile(r"GCC\s+dependency")


@dataclass(frozen=True)
class Probe:
    """A place where the preprocessor opens a file without including it: `__has_include` (or,
    for gcc, `#pragma GCC dependency`). `quoted`/`bracketed`: the name; both None when macros
    spell it (or the spelling is not one read here)."""

    start: int
    end: int
    quoted: str | None
    bracketed: str | None


def has_include_probes(text: str) -> list[Probe]:
    """Every `__has_include`/`__has_include_next` of `text` (the operand as written)."""
    if "__has_include" not in text:
        return []
    return [
        Probe(m.start(), m.end(), m.group("quoted"), m.group("bracketed"))
        for m in _HAS_INCLUDE.finditer(text)
    ]


def dependency_probes(text: str) -> list[Probe]:
    """Every `#pragma GCC dependency` of `text`; one spelled otherwise (`_Pragma`, a splice) has
    no name."""
    if "dependency" not in text:
        return []
    plain = {m.start("quoted") if m.group("quoted") is not None else m.start("bracketed"): m
             for m in _DEPENDENCY.finditer(text)}  # fmt: skip
    found = [
        Probe(m.start(), m.end(), m.group("quoted"), m.group("bracketed")) for m in plain.values()
    ]
    if len(_ANY_DEPENDENCY.findall(_spliced(text)[0])) > len(found):
        found.append(Probe(0, 0, None, None))
    return found


def blank_probe(text: str, probe: Probe) -> str:
    """`text` with `probe` (a `__has_include(...)`) read as `0`, columns kept."""
    width = probe.end - probe.start
    return text[: probe.start] + "0" + " " * (width - 1) + text[probe.end :]
