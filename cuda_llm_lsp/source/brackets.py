"""Bracket-aware scans of C/C++ text: a split at the commas outside brackets, the bracket that
closes an open one, the first character outside template arguments.

Text-level (no parse): the launch facts read launch arguments and declarations with them,
`templates.py` a template argument list, `capture_manifest.py` and `spec/from_capture.py` a
demangled signature and a struct's body. Each caller names the brackets it counts: `<` and `>`
are brackets in a template argument list or a demangled name, comparisons in an expression.
"""

from __future__ import annotations

PARENS = ("([{", ")]}")  # an expression's or an argument list's brackets
ANGLES = ("<([{", ">)]}")  # a template argument list's


def split_top(text: str, opens: str = PARENS[0], closes: str = PARENS[1]) -> list[str]:
    """`text` split at the commas outside brackets, each part stripped: [] for blank text, and
    the empty part after a last comma kept (`"a,"` -> `["a", ""]`)."""
    parts: list[str] = []
    depth = 0
    current = ""
    for ch in text:
        if ch in opens:
            depth += 1
        elif ch in closes:
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    if current.strip() or parts:
        parts.append(current.strip())
    return parts


def close_index(
    text: str,
    start: int,
    opens: str = PARENS[0],
    closes: str = PARENS[1],
    *,
    comma: bool = False,
    limit: int | None = None,
) -> int:
    """The index of the first closing bracket at depth 0 from `start` (the one closing a bracket
    opened just before `start`), or with `comma` of a comma at depth 0 if one comes first;
    -1 when there is none (within `limit` characters)."""
    end = len(text) if limit is None else min(len(text), start + limit)
    depth = 0
    for i in range(start, end):
        ch = text[i]
        if ch in opens:
            depth += 1
        elif ch in closes:
            if depth == 0:
                return i
            depth -= 1
        elif comma and ch == "," and depth == 0:
            return i
    return -1


def outside_angles(text: str, char: str) -> int:
    """The index of the first `char` outside `<...>` (a demangled signature's parameter list
    opens at the first `(` outside its template arguments), -1 when there is none."""
    depth = 0
    for i, ch in enumerate(text):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == char and depth == 0:
            return i
    return -1
