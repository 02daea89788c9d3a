"""What a candidate (model-written kernel text) may ask of the host, checked before NVRTC sees it.

A candidate's `#include "/proc/self/environ"` once made NVRTC quote the API key's tokens in a
compile error, which then reached the next prompt, the history and the compile cache. So:

- `check_candidate` lexes the candidate as the preprocessor does (line splices, comments,
  strings, header names, digit separators, `%:` digraphs) and allows only `#include` of headers
  the original file already includes or that resolve inside the CUDA toolkit / CCCL / our
  stand-in directories (first match in NVRTC's search order, symlinks resolved); a name with
  `..`, an absolute path, a macro operand, `#include_next`, `#import`, `#embed`, `#line`, an
  unknown directive or pragma, `__has_include` of another file, a non-literal `_Pragma`, token
  pasting, raw strings and trigraphs are refused. The refusal names the directive, never a file's
  content (a candidate's own text is fine to quote: the model wrote it).
- `candidate_diagnostics` keeps, of a candidate's compile messages, only those on the candidate's
  own lines and those inside toolkit headers (public text), before anything reaches a prompt,
  the history, a recording or the cache of outcomes.
- `strip_spec_comments` removes every `@cuda-llm` comment from a candidate first: model text never
  becomes the kernel's test spec. The removed blocks are returned: issue [launch] will parse a
  `/* @cuda-llm launch */` block from `StrippedCandidate.blocks` before it is dropped.

The lexer errs on the side of refusing: where its reading and the compiler's could differ
(raw strings, trigraphs, an unterminated literal or comment), the candidate is refused.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from cuda_llm_lsp.compile import headers as std_headers
from cuda_llm_lsp.compile.types import Diagnostic
from cuda_llm_lsp.source.context import outline

#: Directives a candidate may use (`include` only with an allowed header name).
ALLOWED_DIRECTIVES = std_headers.names(
    "define undef if ifdef ifndef elif elifdef elifndef else endif pragma error warning include"
)
#: `#pragma NAME` / `_Pragma("NAME ...")` a candidate may use; none reads a file.
ALLOWED_PRAGMAS = std_headers.names(
    """unroll nounroll once pack push_macro pop_macro message nv_diag_suppress nv_diag_warning
    nv_diag_error nv_diag_default nv_diag_once diag_suppress diag_warning diag_error diag_default
    nv_exec_check_disable hd_warning_disable nv_abi"""
)
#: `#pragma GCC X` / `#pragma clang X` with X among these.
ALLOWED_VENDOR_PRAGMAS = frozenset({"diagnostic", "unroll", "ivdep"})
_FORBIDDEN_IDENTIFIERS = {
    "__has_include_next": "__has_include_next",
    "__has_embed": "__has_embed",
    "__pragma": "__pragma",
}
#: The toolkit's only `#include MACRO` lines are thrust's (a test keeps this true): a candidate may
#: neither include thrust nor define the macros that name those files.
COMPUTED_INCLUDE_MACROS = re.compile(r"THRUST", re.IGNORECASE)
_HEADER_NAME = re.compile(r"[A-Za-z0-9_+\-][A-Za-z0-9_+\-./]*\Z")
_TRIGRAPH = re.compile(r"\?\?[=/'()!<>\-]")
_SPLICE = re.compile(r"\\[ \t]*\r?\n")
_SPEC_MARK = re.compile(r"@\s*cuda-llm", re.IGNORECASE)
_STRING_PREFIX = re.compile(r"(?:u8|u|U|L)?(R)?[\"']")
_NUMBER_BODY = re.compile(r"(?:[eEpP][+-]|'[A-Za-z0-9_]|[A-Za-z0-9_.])*")
_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")


@dataclass(frozen=True)
class Token:
    kind: str  # "ws", "nl", "comment", "string", "char", "header", "number", "ident", "punct"
    text: str
    line: int  # 1-based line of the candidate where the token starts
    start: int = 0  # offsets in the candidate as written (before line splicing)
    end: int = 0


class PolicyError(Exception):
    """The candidate breaks the policy; the message quotes only the candidate's own text."""


@dataclass(frozen=True)
class StrippedCandidate:
    """A candidate without its `@cuda-llm` comments, and the comments taken out (in order)."""

    code: str
    blocks: tuple[str, ...]


def strip_spec_comments(code: str) -> StrippedCandidate:
    """`code` with every `/* @cuda-llm ... */` and `// @cuda-llm ...` comment removed.

    Comments are found by the lexer (a `/*` inside a string is not one). Text the lexer cannot
    read safely is left as it is: `check_candidate` refuses it before it is compiled.
    """
    try:
        tokens = list(_lex(code))
    except PolicyError:
        return StrippedCandidate(code, ())
    out: list[str] = []
    blocks: list[str] = []
    pos = 0
    for token in tokens:
        if token.kind == "comment" and _SPEC_MARK.search(token.text):
            blocks.append(token.text)
            out.append(code[pos : token.start])
            out.append("" if token.text.startswith("//") else " ")  # a comment is a space
            pos = token.end
    out.append(code[pos:])
    return StrippedCandidate("".join(out), tuple(blocks))


def original_include_names(file_text: str) -> frozenset[str]:
    """The header names the original file's `#include` directives name (either form), read from
    its tree: an include in a comment, a string or an `#if 0` group allows nothing."""
    return frozenset(outline(file_text).header_names)


def check_candidate(
    code: str,
    *,
    allowed_names: Iterable[str] = (),
    file_dir: Path | None = None,
    include_paths: Sequence[str] = (),
) -> str | None:
    """None when `code` may go to NVRTC, else why not (a `compile_error` message).

    `allowed_names`: the headers the original file includes; `file_dir`: its directory and
    `include_paths`: the configured -I directories (searched before the toolkit's, so a toolkit
    name shadowed by a user file there is not a toolkit header).
    """
    try:
        _check(code, frozenset(allowed_names), file_dir, tuple(include_paths))
    except PolicyError as exc:
        return f"refused before compiling: {exc}"
    return None


def _check(
    code: str, allowed: frozenset[str], file_dir: Path | None, include_paths: tuple[str, ...]
) -> None:
    if _TRIGRAPH.search(code):
        raise PolicyError("trigraphs (`??=`, `??/`, ...) are not allowed in a candidate")
    # a comment spanning lines counts as a line break (some preprocessors read it so)
    tokens = [
        Token("nl", "\n", t.line) if t.kind == "comment" and "\n" in t.text else t
        for t in _lex(code)
        if t.kind != "ws" and not (t.kind == "comment" and "\n" not in t.text)
    ]
    if code.rstrip(" \t\r\n").endswith("\\"):
        raise PolicyError("a candidate may not end with a line continuation")
    defined: set[str] = set()
    at_line_start = True
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.kind == "nl":
            at_line_start = True
            i += 1
            continue
        if at_line_start and token.kind == "punct" and token.text in ("#", "%:"):
            i = _directive(tokens, i + 1, allowed, file_dir, include_paths, defined)
            continue
        at_line_start = False
        _token(tokens, i, allowed, file_dir, include_paths)
        i += 1
    clash = defined & (ALLOWED_PRAGMAS | {"GCC", "clang"})
    if clash:
        raise PolicyError(f"`#define {sorted(clash)[0]}` would change what a pragma means")


def _directive(
    tokens: list[Token],
    i: int,
    allowed: frozenset[str],
    file_dir: Path | None,
    include_paths: tuple[str, ...],
    defined: set[str],
) -> int:
    """Check the directive whose name is at `tokens[i]`; the index after its line."""
    end = i
    while end < len(tokens) and tokens[end].kind != "nl":
        end += 1
    if i == end:
        return end  # the null directive `#`
    name = tokens[i]
    line = name.line
    if name.kind != "ident" or name.text not in ALLOWED_DIRECTIVES:
        raise PolicyError(
            f"line {line}: `#{name.text}` is not allowed in a candidate (allowed: "
            "#include of the file's own headers or CUDA toolkit headers, #define, "
            "#undef, #if/#ifdef/#ifndef/#elif/#else/#endif, #pragma)"
        )
    rest = tokens[i + 1 : end]
    if name.text == "include":
        if len(rest) != 1 or rest[0].kind != "header":
            raise PolicyError(
                f'line {line}: #include must name a header as "name" or <name> '
                "(no macros, nothing after it)"
            )
        _header(rest[0], allowed, file_dir, include_paths)
        return end
    if name.text == "pragma":
        _pragma([t.text for t in rest if t.kind == "ident"][:2], rest, line)
    elif name.text in ("define", "undef") and rest and rest[0].kind == "ident":
        defined.add(rest[0].text)
        if COMPUTED_INCLUDE_MACROS.search(rest[0].text):
            raise PolicyError(
                f"line {line}: `#{name.text} {rest[0].text}` would change which file "
                "a toolkit header includes"
            )
    for k in range(i + 1, end):  # `#if __has_include(...)`, `#define P(a, b) a##b`
        _token(tokens, k, allowed, file_dir, include_paths)
    return end


def _pragma(words: list[str], rest: list[Token], line: int) -> None:
    first = rest[0].text if rest else ""
    if first in ALLOWED_PRAGMAS:
        return
    if first in ("GCC", "clang") and len(words) > 1 and words[1] in ALLOWED_VENDOR_PRAGMAS:
        return
    shown = " ".join(t.text for t in rest[:2])
    raise PolicyError(
        f"line {line}: `#pragma {shown}` is not allowed in a candidate (allowed: "
        f"{', '.join(sorted(ALLOWED_PRAGMAS))})"
    )


def _token(
    tokens: list[Token],
    i: int,
    allowed: frozenset[str],
    file_dir: Path | None,
    include_paths: tuple[str, ...],
) -> None:
    """Refuse what could form a file read or a pragma out of sight of the directive check."""
    token = tokens[i]
    if token.kind == "punct" and token.text in ("##", "%:%:"):
        raise PolicyError(
            f"line {token.line}: token pasting (`##`) is not allowed in a "
            "candidate (it can form `_Pragma` or `__has_include`)"
        )
    if token.kind != "ident":
        return
    if token.text in _FORBIDDEN_IDENTIFIERS:
        raise PolicyError(f"line {token.line}: `{token.text}` is not allowed in a candidate")
    if token.text == "__has_include":
        operand = tokens[i + 1 : i + 4]
        if (
            len(operand) < 3
            or operand[0].text != "("
            or operand[1].kind != "header"
            or operand[2].text != ")"
        ):
            raise PolicyError(f"line {token.line}: __has_include must name a header literally")
        name = operand[1].text[1:-1]
        if std_headers.is_host_only(name):
            # NVRTC (the judge) has no <vector>; the user's nvcc build has: the branch judged
            # would not be the branch built
            raise PolicyError(
                f"line {token.line}: __has_include({operand[1].text}) of a host-only header "
                "answers differently for the judge and for nvcc"
            )
        _header(operand[1], allowed, file_dir, include_paths)
    elif token.text == "_Pragma":
        operand = tokens[i + 1 : i + 4]
        if (
            len(operand) < 3
            or operand[0].text != "("
            or operand[1].kind != "string"
            or operand[2].text != ")"
            or not operand[1].text.startswith('"')
        ):
            raise PolicyError(f"line {token.line}: _Pragma must have a plain string literal")
        inner = operand[1].text[1:-1].replace('\\"', '"').replace("\\\\", "\\")
        pragma_tokens = [t for t in _lex(inner) if t.kind not in ("ws", "comment", "nl")]
        words = [t.text for t in pragma_tokens if t.kind == "ident"][:2]
        _pragma(words, pragma_tokens, token.line)


def _header(
    token: Token, allowed: frozenset[str], file_dir: Path | None, include_paths: tuple[str, ...]
) -> None:
    quoted = token.text.startswith('"')
    name = token.text[1:-1]
    shown = token.text if len(token.text) <= 80 else token.text[:77] + "..."
    if name in allowed:
        return  # the original file includes it: its author's choice, `..` and all
    if not _HEADER_NAME.match(name) or any(p in ("", ".", "..") for p in name.split("/")):
        raise PolicyError(
            f"line {token.line}: #include {shown}: only relative header names "
            "without `..` are allowed"
        )
    if "thrust" in name.split("/"):
        raise PolicyError(
            f"line {token.line}: #include {shown}: thrust is host-side (and its "
            "headers include files named by macros)"
        )
    if not quoted and std_headers.is_host_only(name) and "/" not in name:
        return  # a host-only header: the device unit leaves the line out
    missing_ok = name in std_headers.DEVICE_LIBRARIES  # replaced by a stand-in when missing
    if _resolves_in_toolkit(name, quoted, file_dir, include_paths, missing_ok=missing_ok):
        return
    raise PolicyError(
        f"line {token.line}: #include {shown} is neither a CUDA toolkit header nor "
        "one the original file includes"
    )


def _resolves_in_toolkit(
    name: str,
    quoted: bool,
    file_dir: Path | None,
    include_paths: tuple[str, ...],
    *,
    missing_ok: bool = False,
) -> bool:
    """Whether the first file NVRTC would open for `name` lies inside a toolkit directory."""
    trusted = [str(std_headers.STUB_DIR), *std_headers.toolkit_include_dirs()]
    search: list[str] = []
    if quoted:  # the including file's directory, and NVRTC's working directory
        search.extend(str(d) for d in (file_dir, Path.cwd()) if d is not None)
    search.append(str(std_headers.STUB_DIR))
    if file_dir is not None:
        search.append(str(file_dir))
    search.extend(include_paths)
    search.extend(std_headers.toolkit_include_dirs())
    for directory in search:
        candidate = Path(directory) / name
        try:
            if not candidate.is_file():
                continue
            real = candidate.resolve(strict=True)
        except OSError:
            continue
        if directory not in trusted:
            return False  # a user file shadows the name
        return real.is_relative_to(Path(directory).resolve())
    return missing_ok


def _lex(code: str) -> Iterator[Token]:
    """Preprocessing tokens of `code` after line splicing (with the candidate's line numbers).

    Raises PolicyError where a safe reading is impossible: raw strings (splices are undone
    inside them), unterminated comments and literals.

    Long because it is a lexer's one loop over the characters with a branch per token
    kind; split up, each part would pass the position and state back and forth.
    """
    # a lone CR may end a line for the compiler: read it as one (lines stay where they were)
    text, lines, origin = _spliced(re.sub(r"\r(?!\n)", "\n", code))
    n = len(text)

    def tok(kind: str, a: int, b: int) -> Token:
        return Token(kind, text[a:b], lines[a], origin[a], origin[b - 1] + 1)

    i = 0
    expect_header = 0  # 2: after `#`, 1: after `# include` or `__has_include (`
    line_start = True
    while i < n:
        c = text[i]
        line = lines[i]
        if c == "\n":
            yield tok("nl", i, i + 1)
            i += 1
            line_start = True
            expect_header = 0
            continue
        if c in " \t\r\f\v":
            j = i + 1
            while j < n and text[j] in " \t\r\f\v":
                j += 1
            yield tok("ws", i, j)
            i = j
            continue
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            yield tok("comment", i, j)
            i = j
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                raise PolicyError(f"line {line}: a comment is not closed")
            yield tok("comment", i, j + 2)
            line_start = line_start or "\n" in text[i : j + 2]
            i = j + 2
            continue
        if expect_header == 1 and c in '"<':
            close = '"' if c == '"' else ">"
            j = i + 1
            while j < n and text[j] not in (close, "\n"):
                j += 1
            if j >= n or text[j] != close:
                raise PolicyError(f"line {line}: a header name is not closed")
            yield tok("header", i, j + 1)
            i = j + 1
            expect_header = 0
            continue
        m = _STRING_PREFIX.match(text, i)
        if m:
            if m.group(1):
                raise PolicyError(
                    f"line {line}: raw string literals are not allowed in a candidate"
                )
            quote = text[m.end() - 1]
            j = m.end()
            while j < n and text[j] != quote:
                if text[j] == "\n":
                    raise PolicyError(f"line {line}: a string or character literal is not closed")
                j += 2 if text[j] == "\\" else 1
            if j >= n:
                raise PolicyError(f"line {line}: a string or character literal is not closed")
            yield tok("string" if quote == '"' else "char", i, j + 1)
            i = j + 1
            expect_header = 0
            line_start = False
            continue
        if c.isdigit() or (c == "." and i + 1 < n and text[i + 1].isdigit()):
            body = _NUMBER_BODY.match(text, i + 1)
            j = body.end() if body else i + 1
            yield tok("number", i, j)
            i = j
            expect_header = 0
            line_start = False
            continue
        ident = _IDENT.match(text, i)
        if ident:
            word = ident.group()
            yield tok("ident", i, ident.end())
            i = ident.end()
            if expect_header == 2 and word == "include":
                expect_header = 1
            elif expect_header == 2:
                expect_header = 0
            elif word == "__has_include":
                expect_header = 3  # a "(" comes first
            else:
                expect_header = 0
            line_start = False
            continue
        if ord(c) >= 0x80:  # a BOM or a zero-width space could hide a directive's `#`
            raise PolicyError(
                f"line {line}: non-ASCII characters outside comments and strings "
                "are not allowed in a candidate"
            )
        for punct in ("%:%:", "##", "%:", "#"):
            if text.startswith(punct, i):
                break
        else:
            punct = c
        yield tok("punct", i, i + len(punct))
        i += len(punct)
        if punct in ("#", "%:") and line_start:
            expect_header = 2
        elif punct == "(" and expect_header == 3:
            expect_header = 1
        else:
            expect_header = 0
        line_start = False


def _spliced(code: str) -> tuple[str, list[int], list[int]]:
    """`code` without backslash-newlines, and each character's 1-based line and offset in `code`."""
    out: list[str] = []
    lines: list[int] = []
    origin: list[int] = []
    line = 1
    pos = 0
    for m in [*_SPLICE.finditer(code), None]:
        stop = m.start() if m else len(code)
        for k in range(pos, stop):
            out.append(code[k])
            lines.append(line)
            origin.append(k)
            if code[k] == "\n":
                line += 1
        if m is None:
            break
        line += 1
        pos = m.end()
    return "".join(out), lines, origin


def candidate_diagnostics(
    diagnostics: Iterable[Diagnostic], first_line: int, line_count: int
) -> tuple[list[Diagnostic], int]:
    """The candidate's compile messages that may be shown anywhere, and how many were dropped.

    Kept: messages on the candidate's own lines (0-based rows `first_line` .. + `line_count` of
    the file, 1-based in `Diagnostic`) and messages inside toolkit or stand-in headers (shown by
    their include name, `<...>`: public text), and ptxas's own messages (about the generated
    code: an unresolved extern symbol, too many resources; they quote no source file).
    Dropped: everything else (the rest of the file, user headers, any other file).
    """
    kept: list[Diagnostic] = []
    dropped = 0
    for d in diagnostics:
        inside = d.file is None and first_line < d.line <= first_line + line_count
        in_header = d.message.startswith("in included file ")
        ptxas = d.file is None and d.code == "ptxas"
        if (inside and not in_header) or ptxas or d.message.startswith('in included file "<'):
            kept.append(d)
        else:
            dropped += 1
    return kept, dropped
