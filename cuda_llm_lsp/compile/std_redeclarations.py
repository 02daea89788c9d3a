"""NVRTC-only code of library headers made to read what the toolkit's CCCL declares.

Libraries written for an older NVRTC declare standard class templates themselves under
`#if defined(__CUDACC_RTC__)` (CuTe: `namespace std { template <class... _Tp> struct
tuple_size; }`), since that NVRTC had none. The toolkit's CCCL now declares them in `std` for
NVRTC too, with another parameter list (`template <class _Tp> struct tuple_size;`), and NVRTC
stops at the mismatch. nvcc never reads such a branch (it does not define `__CUDACC_RTC__`),
so the error is not one nvcc reports: the fast tier must accept what nvcc accepts. Such a
declaration is rewritten into the form CCCL declares; only inside an NVRTC-only branch, only
in `namespace std`, and only for a template CCCL itself declares there whatever the build
(never host-library-only ones), so a mismatch that nvcc would see stays an error.

Likewise `using cuda::std::abs;` in such a branch (CUTLASS's relatively_equal.h) named a
function an older libcu++ brought with the headers CUTLASS includes; CCCL declares it only in
`<cuda/std/cmath>`. For a name the prelude gives `std` (its math functions) it reads as
`using std::abs;`, the line of nvcc's branch; any other name is left as written.
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
# `using cuda::std::abs;` (CUTLASS's relatively_equal.h)
_USING_CUDA_STD = re.compile(r"\busing\s+(?:::)?cuda::std::(?P<name>\w+)\s*;")
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
    if "__CUDACC_RTC__" not in text:
        return text
    known = cccl_std_templates()
    pieces: list[str] = []
    done = 0
    for start, end in _nvrtc_only_branches(text):
        branch = text[start:end]
        rewritten = branch
        if known and _enclosing_namespace(text[:start]) == "std":
            rewritten = _FORWARD.sub(lambda m: _in_cccl_form(m, known), branch)
        rewritten = _USING_CUDA_STD.sub(_as_prelude_std, rewritten)
        if rewritten != branch:
            pieces.extend((text[done:start], rewritten))
            done = end
    if not pieces:
        return text
    pieces.append(text[done:])
    return "".join(pieces)


def _as_prelude_std(match: re.Match[str]) -> str:
    """`using cuda::std::abs;` as `using       std::abs;` for a math function the prelude gives
    `std`: what nvcc's branch (`using std::abs;`) reads. CCCL declares `cuda::std::abs` only in
    `<cuda/std/cmath>`, which such a header relied on reaching through an older libcu++."""
    if match.group("name") not in prelude_std_names():
        return match.group(0)
    return match.group(0).replace("cuda::std::", "      std::", 1)


@functools.lru_cache(maxsize=1)
def prelude_std_names() -> frozenset[str]:
    """The names the pre-included prelude declares in `std` (`using ::abs;` ...)."""
    text = (std_headers.STUB_DIR / std_headers.PRELUDE).read_text(encoding="utf-8")
    return frozenset(re.findall(r"\busing\s+::(\w+)\s*;", text))


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
