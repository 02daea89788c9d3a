"""Text that came from a model: what may not hide in candidate code, and how any other model text
is made harmless before a person sees it (docs/design.md, "What an accepted winner may write").

Candidate code is rejected, not repaired, when it holds a character that makes it read other than
it compiles: Unicode bidirectional controls (Trojan Source, CVE-2021-42574), zero-width and other
invisible format characters (category Cf), line / paragraph separators, or control characters
other than tab, CR and LF; outside comments and literals it must be ASCII (no look-alike
identifiers). Text only shown (explanations, plans, compile logs, a worker's captured output with
device `printf`) is `neutralize`d instead: terminal escape sequences and those characters become
visible `<U+XXXX>` marks, so nothing reaches a terminal, an LSP message or the history that can
move the cursor, retitle a window, or reorder what is shown.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any, TextIO

from cuda_llm_lsp.redact import redact

_ALLOWED_CONTROLS = frozenset("\t\r\n")
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")
# ESC sequences: CSI (`ESC [ ... final`), OSC / DCS / PM / APC / SOS strings (up to BEL or ST),
# and two-byte escapes; the 8-bit C1 forms too.
_ESCAPES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f]).*?(?:\x07|\x1b\\|\x9c|\Z)"
    r"|\x1b[ -/]*[0-~]?",
    re.DOTALL,
)
_ASCII_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_CODE_ONLY = re.compile(
    r"//[^\n]*|/\*.*?(?:\*/|\Z)|(?:u8|u|U|L)?R\"(?P<delim>[^()\\\s]{0,16})\(.*?\)(?P=delim)\""
    r"|(?:u8|u|U|L)?\"(?:\\.|[^\"\\\n])*\"?|(?:u8|u|U|L)?'(?:\\.|[^'\\\n])*'?",
    re.DOTALL,
)


@dataclass(frozen=True)
class Hidden:
    """A character that must not be in candidate code: where it is and what it is."""

    line: int  # 1-based
    column: int  # 1-based, in characters
    char: str
    why: str  # "a bidirectional control", ...

    def describe(self) -> str:
        return f"line {self.line} holds {_mark(self.char)}, {self.why}"


def is_hidden(char: str) -> str | None:
    """Why `char` may not appear in candidate code, or None when it may."""
    if char in _ALLOWED_CONTROLS:
        return None
    if char in _BIDI:
        return "a bidirectional control (Trojan Source)"
    category = unicodedata.category(char)
    if category == "Cc":
        return "a control character"
    if category == "Cf":
        return "an invisible format character"
    if category in ("Zl", "Zp"):
        return "a line separator that editors and compilers read differently"
    return None


def hidden_characters(code: str, *, ascii_code: bool = True) -> list[Hidden]:
    """Every character of `code` (code, comments and strings alike) that could hide what it does,
    then (`ascii_code`) every non-ASCII character outside comments and literals (identifiers are
    ASCII)."""
    found: list[Hidden] = []
    for offset, char in enumerate(code):
        if char.isascii() and (char >= " " or char in _ALLOWED_CONTROLS) and char != "\x7f":
            continue
        why = is_hidden(char)
        if why is not None:
            found.append(_at(code, offset, char, why))
    if found or not ascii_code:
        return found
    bare = code_only(code)
    for offset, char in enumerate(bare):
        if not char.isascii():
            found.append(
                _at(
                    code,
                    offset,
                    char,
                    "a non-ASCII character in code (identifiers and code are ASCII)",
                )
            )
    return found


def code_only(code: str) -> str:
    """`code` with comments and string / character literals blanked (line breaks and offsets
    kept): what the compiler reads as code."""
    return _CODE_ONLY.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), code)


def neutralize(text: str, *, keep_cr: bool = False) -> str:
    """`text` safe to show on a terminal or in an editor: escape sequences and hidden or control
    characters (tab and line breaks kept, a CR as a line break unless `keep_cr`) replaced by
    visible `<U+XXXX>` marks."""
    if text.isascii() and not _ASCII_CONTROL.search(text):
        return text if keep_cr else text.replace("\r\n", "\n").replace("\r", "\n")
    text = _ESCAPES.sub(lambda m: _mark(m.group(0)[0]), text)
    if not keep_cr:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return "".join(_mark(c) if is_hidden(c) is not None else c for c in text)


class NeutralStream:
    """A text stream (`sys.stdout`, `sys.stderr`) that neutralizes what is written to it and
    redacts secrets (`redact`: the API key, credential-looking environment values): the CLI's
    last line of defence, whatever a message was built from (a kernel's name, a file name, a
    model's reply, a traceback)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(neutralize(redact(text), keep_cr=True))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def _mark(char: str) -> str:
    return f"<U+{ord(char):04X}>"


def _at(text: str, offset: int, char: str, why: str) -> Hidden:
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return Hidden(line, column, char, why)
