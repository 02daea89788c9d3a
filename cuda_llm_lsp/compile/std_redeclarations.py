"""Forward declarations in `namespace std` that only NVRTC reads, made to agree with CCCL's.

Libraries written for an older NVRTC declare standard class templates themselves under
`#if defined(__CUDACC_RTC__)` (CuTe: `namespace std { template <class... _Tp> struct
tuple_size; }`), since that NVRTC had none. The toolkit's CCCL now declares them in `std` for
NVRTC too, with another parameter list (`template <class _Tp> struct tuple_size;`), and NVRTC
stops at the mismatch. nvcc never reads such a branch (it does not define `__CUDACC_RTC__`),
so the error is not one nvcc reports: the fast tier must accept what nvcc accepts. Such a
declaration is rewritten into the form CCCL declares; only inside an NVRTC-only branch, only
in `namespace std`, and only for a template CCCL itself declares there whatever the build
(never host-library-only ones), so a mismatch that nvcc would see stays an error.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from cuda_llm_lsp.compile import headers as std_headers

# `template <...> struct|class name;`: a forward declaration (no base, no body)
_FORWARD = re.compile(
    r"template\s*<(?P<head>[^<>{};]*)>\s*(?:struct|class)\s+(?P<name>\w+)\s*;", re.MULTILINE
)
_NVRTC_ONLY = re.compile(
    r"^[ \t]*#[ \t]*(?:if[ \t]+defined[ \t]*\(?[ \t]*__CUDACC_RTC__\b[ \t]*\)?"
    r"[ \t]*(?://.*|/\*.*)?$|ifdef[ \t]+__CUDACC_RTC__\b.*$)",
    re.MULTILINE,
)
_CONDITIONAL = re.compile(
    r"^[ \t]*#[ \t]*(?P<word>if|ifdef|ifndef|else|elif|endif)\b", re.MULTILINE
)
_NAMESPACE = re.compile(r"\bnamespace\s+(?P<name>[\w:]+)\s*\{")
_CCCL_STD_BEGIN = "_CCCL_BEGIN_NAMESPACE_STD"
_CCCL_STD_END = "_CCCL_END_NAMESPACE_STD"


@functools.lru_cache(maxsize=1)
def cccl_std_templates() -> dict[str, str]:
    """Class template name -> the forward declaration CCCL gives it in `namespace std` outside
    any condition (so NVRTC sees it too): `tuple_size` -> `template <class _Tp> struct ...;`.

    Read from the toolkit's CCCL headers themselves, so a CCCL that declares more (or fewer)
    is followed. Declarations under an `#if` (host standard library only, hosted only) are not
    NVRTC's and are left out."""
    found: dict[str, str] = {}
    for directory in std_headers.toolkit_include_dirs():
        root = Path(directory) / "cuda" / "std"
        if not root.is_dir():
            continue
        for path in sorted(root.rglob("*")):
            try:
                if not path.is_file():
                    continue
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if _CCCL_STD_BEGIN in text:
                for name, declaration in _unconditional_std_declarations(text):
                    found.setdefault(name, declaration)
    return found


def _unconditional_std_declarations(text: str) -> list[tuple[str, str]]:
    """The forward declarations of `text`'s std blocks at the include guard's depth."""
    out: list[tuple[str, str]] = []
    depth = 0
    inside = False
    block_depth = 0
    lines: list[str] = []
    for line in text.split("\n"):
        word = _CONDITIONAL.match(line)
        if word is not None:
            kind = word.group("word")
            if kind.startswith("if"):
                depth += 1
            elif kind == "endif":
                depth -= 1
            continue
        stripped = line.strip()
        if stripped == _CCCL_STD_BEGIN:
            inside, block_depth, lines = True, depth, []
            continue
        if stripped == _CCCL_STD_END:
            inside = False
            if block_depth == 1:  # only the include guard around it
                for match in _FORWARD.finditer("\n".join(lines)):
                    declaration = " ".join(match.group(0).split())
                    out.append((match.group("name"), declaration))
            continue
        if inside and depth == block_depth:
            lines.append(line)
    return out


def agree_with_cccl(text: str) -> str:
    """`text` with its NVRTC-only forward declarations of CCCL's std class templates in
    CCCL's form (every line keeps its number); `text` itself when it has none."""
    if "__CUDACC_RTC__" not in text or "namespace std" not in text:
        return text
    known = cccl_std_templates()
    if not known:
        return text
    pieces: list[str] = []
    done = 0
    for start, end in _nvrtc_only_branches(text):
        if _enclosing_namespace(text[:start]) != "std":
            continue
        branch = text[start:end]
        rewritten = _FORWARD.sub(lambda m: _in_cccl_form(m, known), branch)
        if rewritten != branch:
            pieces.extend((text[done:start], rewritten))
            done = end
    if not pieces:
        return text
    pieces.append(text[done:])
    return "".join(pieces)


def _in_cccl_form(match: re.Match[str], known: dict[str, str]) -> str:
    declaration = known.get(match.group("name"))
    if declaration is None:
        return match.group(0)
    return declaration + "\n" * match.group(0).count("\n")


def _nvrtc_only_branches(text: str) -> list[tuple[int, int]]:
    """(start, end) of the text under each `#if defined(__CUDACC_RTC__)` up to its `#else`,
    `#elif` or `#endif`."""
    branches: list[tuple[int, int]] = []
    for opening in _NVRTC_ONLY.finditer(text):
        depth = 0
        for word in _CONDITIONAL.finditer(text, opening.end()):
            kind = word.group("word")
            if kind.startswith("if"):
                depth += 1
            elif depth == 0:
                branches.append((opening.end(), word.start()))
                break
            elif kind == "endif":
                depth -= 1
    return branches


def _enclosing_namespace(before: str) -> str | None:
    """The namespace the text after `before` is in, by brace depth (comments and strings
    are not told apart: a guess that errs towards "not std", leaving the text alone)."""
    stack: list[str | None] = []
    pos = 0
    for match in re.finditer(r"[{}]", before):
        if match.group(0) == "{":
            opened = _NAMESPACE.search(before, pos, match.end())
            named = opened.group("name") if opened and opened.end() == match.end() else None
            stack.append(named)
        elif stack:
            stack.pop()
        pos = match.end()
    return stack[-1] if stack else None
