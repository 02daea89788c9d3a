"""What tree-sitter is given: same-length rewrites of a file's text (macros it cannot read
spelled as what they stand for, split heads reduced to one branch), and the parse of it.

Offsets stay those of the real text, so the walker's ranges apply to it unchanged. Also the
one same-length rewrite made for NVRTC (`#line` directives blanked)."""

from __future__ import annotations

import functools
import re

import tree_sitter

from cuda_llm_lsp.compile.unit.common import (
    ATTRIBUTE,
    ATTRIBUTE_CALL,
    ATTRIBUTE_KINDS,
    ATTRIBUTE_WRAPPER,
    WORD,
)
from cuda_llm_lsp.compile.unit.known import NAMESPACE_MACROS
from cuda_llm_lsp.compile.unit.ranges import spaces
from cuda_llm_lsp.source.kernels import parse_tree

# `#line 12 "f.cu"` and its GNU form `# 12 "f.cu"` (one line; a continuation is rare enough)
_LINE_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*(?:line\b|[0-9])[^\n]*", re.MULTILINE)
# `#if` / `#else` / `#endif` around the end of a parameter list (DeepSpeed's cublas_wrappers.h:
# `float* C,` then `#if ...HIP...` `rocblas_gemm_algo algo = ...);` `#else` `cublasGemmAlgo_t
# algo = ...);` `#endif`): the `#if` line(s), its branch, and the `#else` branch to `#endif`
_SPLIT_PARAMETERS = re.compile(
    rb"^([ \t]*#[ \t]*if(?:n?def)?\b(?:[^\n]*\\\n)*[^\n]*\n)"
    rb"((?:[^\n#{};]*\n)*?[^\n#{};]*\)[^\n#{}]*\n)"
    rb"([ \t]*#[ \t]*else\b[^\n]*\n(?:[^\n#{}]*\n)*?[^\n#{}]*\)[^\n#{}]*\n"
    rb"[ \t]*#[ \t]*endif\b[^\n]*\n)",
    re.MULTILINE,
)
# the same around a whole function head over several lines, both branches complete (DeepSpeed's
# cublas_wrappers.cu: `#if ...HIP...` `int cublas_gemm_ex(rocblas_handle handle, ...)` `#else`
# `int cublas_gemm_ex(cublasHandle_t handle, ...)` `#endif` `{`)
_SPLIT_HEAD = re.compile(
    r"^([ \t]*#[ \t]*if(?:n?def)?\b(?:[^\n]*\\\n)*[^\n]*\n)"
    r"((?:[^\n#{};]*\n)*?[^\n#{};]*\)[^\n#{};]*\n)"
    r"([ \t]*#[ \t]*else\b[^\n]*\n(?:[^\n#{};]*\n)*?[^\n#{};]*\)[^\n#{};]*\n"
    r"[ \t]*#[ \t]*endif\b[^\n]*\n)"
    r"(?=[ \t]*\{)",
    re.MULTILINE,
)
# `#if X` / one declarator line / `#else` / another / `#endif`, then the function's `{`
_SPLIT_DECLARATOR = re.compile(
    r"^([ \t]*#[ \t]*if(?:n?def)?\b[^\n]*\n)"
    r"([^\n#;{}]*\([^\n#;{}]*\)[^\n#;{}]*\n)"
    r"([ \t]*#[ \t]*else\b[^\n]*\n[^\n#;{}]*\n[ \t]*#[ \t]*endif\b[^\n]*\n)"
    r"(?=[ \t]*\{)",
    re.MULTILINE,
)


def blank_line_directives(text: str) -> str:
    """`text` with its `#line` directives made spaces (lines and columns stay)."""
    if "#" not in text:
        return text
    return _LINE_DIRECTIVE.sub(lambda m: " " * len(m.group(0)), text)


def for_tree_sitter(text: str, macros: dict[str, str] | None = None) -> str:
    """`text` as tree-sitter reads it (same length): the masks below applied; `macros`: see
    `_mask_device_macros`."""
    masked = mask_split_declarators(
        mask_attribute_macros(_mask_device_macros(text, macros or {}), macros or {})
    )
    return _mask_split_parameters(_mask_namespace_macros(masked))


def parse_masked(text: str, macros: dict[str, str] | None = None) -> tuple[tree_sitter.Tree, bytes]:
    """The tree of `text` (normalized) and its bytes; `macros`: see `_mask_device_macros`."""
    # NVRTC reads a C string: a NUL would end the file (same length, so offsets hold)
    text = text.replace("\0", " ")
    masked = for_tree_sitter(text, macros)
    if masked == text:
        return parse_tree(text)
    tree, _masked_data = parse_tree(masked)
    return tree, text.encode("utf-8", errors="surrogatepass")


@functools.lru_cache(maxsize=8)
def split_parameter_tails(data: bytes) -> tuple[tuple[int, int, int], ...]:
    """Each `_SPLIT_PARAMETERS` match that continues a parameter list (the code before its `#if`
    ends in `,` or `(`): (its start, the end of its `#if` branch, its end), in bytes. Cached:
    `parse_masked` masks them and the walker of the same text extends blanks over them."""
    if b"#else" not in data:
        return ()
    found: list[tuple[int, int, int]] = []
    for match in _SPLIT_PARAMETERS.finditer(data):
        before = data[max(0, match.start() - 2000) : match.start()]
        code = [
            line.split(b"//", 1)[0].rstrip()
            for line in before.split(b"\n")
            if line.split(b"//", 1)[0].strip()
        ]
        if code and code[-1].endswith((b",", b"(")):
            found.append((match.start(), match.end(2), match.end()))
    return tuple(found)


def _mask_split_parameters(text: str) -> str:
    """`text` with the `#if` lines and the `#else` branch of each `split_parameter_tails` made
    spaces, for tree-sitter only: one parameter list, ending in the first branch (the walker
    blanks the rest with the function, `Walker.blank`)."""
    data = text.encode("utf-8", errors="surrogatepass")
    tails = split_parameter_tails(data)
    if not tails:
        return text
    out = bytearray(data)
    for start, branch_end, end in tails:
        if_end = data.index(b"\n", start) + 1
        while data[if_end - 2 : if_end - 1] == b"\\":  # `#if ... \` continued
            if_end = data.index(b"\n", if_end) + 1
        for lo, hi in ((start, if_end), (branch_end, end)):
            out[lo:hi] = bytes(b if b == 10 else 32 for b in data[lo:hi])
    return out.decode("utf-8", errors="surrogatepass")


def _mask_namespace_macros(text: str) -> str:
    """`text` with THRUST_NAMESPACE_BEGIN / _END spelled as the namespace they open and close
    (same length), for tree-sitter only: unexpanded, they made it misread the item after them
    (CuPy's complex.h, whose `thrust::complex` must then be known as user code's)."""
    if "THRUST_NAMESPACE_BEGIN" not in text:
        return text
    for name, spelled in NAMESPACE_MACROS.items():
        same_length = spelled.ljust(len(name))
        text = re.sub(rf"^([ \t]*){name}\b", rf"\g<1>{same_length}", text, flags=re.MULTILINE)
    return text


def mask_split_declarators(text: str) -> str:
    """`text` with `#if` / `#else <declarator>` / `#endif` around a function's declarator
    made spaces, for tree-sitter only: the first declarator stands alone before the body.

    CUTLASS's cluster_launch.hpp spells `init(void const* kernel_function)` and, under
    `#else`, `init(void const*)`: tree-sitter then reads no function, the host member was kept
    whole and the rest of the class misread; NVRTC rejected each `__host__` member.
    """
    if "#" not in text:
        return text
    first = _SPLIT_DECLARATOR.sub(
        lambda m: spaces(m.group(1)) + m.group(2) + spaces(m.group(3)), text
    )
    if "#else" not in first:
        return first
    return _SPLIT_HEAD.sub(lambda m: spaces(m.group(1)) + m.group(2) + spaces(m.group(3)), first)


# The words a declaration-attribute macro's body may hold besides attributes (GGML_API):
# storage and linkage.
_ATTRIBUTE_WORDS = ("extern", "static", "inline", "_Noreturn", "__inline__", "__extension__")


def attribute_kind(node_type: str, body: str, parameters: list[str]) -> str | None:
    """The kind of a macro that stands for declaration attributes only, or None.

    tree-sitter knows none of them: `GGML_NORETURN GGML_ATTRIBUTE_FORMAT(3, 4) GGML_API void
    ggml_abort(...);` parsed as fragments, so the host prototype was blanked from `void` on and
    `extern` stayed for NVRTC (ggml's headers: every ggml-cuda file had false errors). They are
    masked for tree-sitter (`_mask_device_macros`), never for NVRTC.
    """
    body = body.strip()
    if not body or not any(w in body for w in ("extern", "attribute", "[[", "declspec", "oreturn")):
        return None
    if node_type == "preproc_def":
        return ATTRIBUTE if _only_attributes(body) else None
    if _only_attributes(body):
        return ATTRIBUTE_CALL
    first = parameters[0] if parameters else ""
    if re.fullmatch(r"[A-Za-z_]\w*", first):
        for wrapped in (rf"^{first}\b(.*)$", rf"^(.*?)\b{first}$"):
            match = re.match(wrapped, body, re.S)
            if match and _only_attributes(match.group(1)):
                return ATTRIBUTE_WRAPPER
    return None


def _only_attributes(body: str) -> bool:
    """Whether `body` holds only storage words and attributes: `__attribute__((...))` (nested
    parentheses too), `[[...]]`, `__declspec(...)`."""
    at = 0
    while at < len(body):
        if body[at].isspace() or body.startswith("\\\n", at):
            at += 1
            continue
        word = WORD.match(body, at)
        if word is not None and word.group(0) in _ATTRIBUTE_WORDS:
            at = word.end()
        elif word is not None and word.group(0) in ("__attribute__", "__declspec"):
            at = word.end()
            while at < len(body) and body[at].isspace():
                at += 1
            if at >= len(body) or body[at] != "(":
                return False
            end, _first = _call_end(body, at)
            if end < 0:
                return False
            at = end
        elif body.startswith("[[", at):
            end = body.find("]]", at)
            if end < 0:
                return False
            at = end + 2
        else:
            return False
    return True


def mask_attribute_macros(text: str, macros: dict[str, str]) -> str:
    """`text` with each use of a declaration-attribute macro (`attribute_kind`) made spaces,
    arguments and all (a wrapper keeps its first argument, the declaration), for tree-sitter."""
    names = {n: k for n, k in macros.items() if k in ATTRIBUTE_KINDS and n in text}
    if not names:
        return text
    pattern = re.compile(rf"\b(?:{'|'.join(map(re.escape, names))})\b")
    out: list[str] = []
    cursor = 0
    for match in pattern.finditer(text):
        if match.start() < cursor:
            continue
        line = text[text.rfind("\n", 0, match.start()) + 1 : match.start()]
        if line.lstrip().startswith("#"):
            continue
        kind = names[match.group(0)]
        end = match.end()
        first_end: int | None = None
        if kind != ATTRIBUTE:
            at = end
            while at < len(text) and text[at] in " \t":
                at += 1
            if at >= len(text) or text[at] != "(":
                continue  # the name without a call: not this macro's use
            end, first_end = _call_end(text, at)
            if end < 0:
                continue
        out.append(text[cursor : match.start()])
        if kind == ATTRIBUTE_WRAPPER and first_end is not None:
            open_paren = text.index("(", match.end())
            out.append(spaces(text[match.start() : open_paren + 1]))
            out.append(text[open_paren + 1 : first_end])
            out.append(spaces(text[first_end:end]))
        else:
            out.append(spaces(text[match.start() : end]))
        cursor = end
    out.append(text[cursor:])
    return "".join(out)


def _call_end(text: str, open_paren: int) -> tuple[int, int]:
    """The end of the call whose `(` is at `open_paren` and the end of its first argument;
    (-1, -1) when it does not close."""
    depth = 0
    first_end = -1
    for at in range(open_paren, min(len(text), open_paren + 20000)):
        char = text[at]
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                return at + 1, first_end if first_end >= 0 else at
        elif char == "," and depth == 1 and first_end < 0:
            first_end = at
    return -1, -1


def _mask_device_macros(text: str, macros: dict[str, str]) -> str:
    """`text` with each known device macro (`CUTLASS_HOST_DEVICE`) spelled `__device__`,
    padded to its length, for tree-sitter only (the walker reads the real bytes).

    tree-sitter takes an unknown word before a constructor for its return type:
    `CUTLASS_HOST_DEVICE S(S const& o) : a(o.a), b(o.b) {` then reads as a member with a
    bit-field and a brace initializer, the whole class body breaks (CUTLASS's CudaHostAdapter)
    and the loop in it was blanked as a host prototype `for (int32_t i = 0;`. Names shorter
    than `__device__`, function-like uses and `#` lines are left as they are.
    """
    names = [n for n, kind in macros.items() if kind == "device" and len(n) >= 10 and n in text]
    if not names:
        return text
    pattern = re.compile(rf"\b(?:{'|'.join(map(re.escape, names))})\b(?!\s*\()")

    def spelled(match: re.Match[str]) -> str:
        line = text[text.rfind("\n", 0, match.start()) + 1 : match.start()]
        if line.lstrip().startswith("#"):
            return match.group(0)
        return "__device__".ljust(len(match.group(0)))

    return pattern.sub(spelled, text)
