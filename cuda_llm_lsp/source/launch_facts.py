"""What the file itself says about a kernel's launch (issue 39, item 3): the grid, block and
shared memory of its first `<<<...>>>` launch site and the extents of the buffers it passes,
from `cudaMalloc(&p, n * sizeof(T))`, and the value passed for each scalar, all written over
the kernel's own integer parameters so that a draft spec can use them and `check` can compare a
spec with them.

Text-level and conservative: a launch expression is resolved through the enclosing function's
`int x = ...;` / `dim3 x(...);` definitions and the file's numeric `#define`s, a ceiling-division
macro (`CEIL_DIV`, `ceil_div`, `DIV_UP`, ...) becomes `cdiv`, and the launcher's names become the
kernel's parameter names through what the site passes for them (one call level up for buffers
and scalars: the launcher's callers' `cudaMalloc`s, and their arguments in their own locals'
terms). Whatever does not end as an expression over the kernel's
integer parameters (`source/expr.py` parses it) is left out: the draft keeps its guess.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field

from cuda_llm_lsp.source.brackets import close_index, split_top
from cuda_llm_lsp.source.c_types import (
    DTYPES,
    VECTOR_TYPES,
    c_type_dtype,
    normalize_c_type,
    resolve_alias,
    type_aliases,
)
from cuda_llm_lsp.source.expr import ExprError, evaluate, parse_expr
from cuda_llm_lsp.source.kernels import Kernel, Param
from cuda_llm_lsp.source.launch_sites import sites_in_context
from cuda_llm_lsp.source.spec.locate import Locator
from cuda_llm_lsp.source.spec.model import SpecError, TestSpec
from cuda_llm_lsp.source.templates import int_literal, split_template_args

_IDENT = re.compile(r"[A-Za-z_]\w*")
_CDIV_MACROS = ("CEIL_DIV", "ceil_div", "CEILDIV", "DIV_UP", "div_up", "DIVUP", "CDIV", "cdiv",
                "ceildiv", "DIV_ROUND_UP", "CUDA_CEIL_DIV")  # fmt: skip
_INT_TYPE = (
    r"(?:std::)?(?:(?:unsigned|signed)\s+)?"
    r"(?:long\s+long|long|short|int|size_t|unsigned|auto|u?int(?:32|64)_t|dim3)(?:\s+int)?"
)
# `int x = ...;`, `const int x(...)`, `int const x = 14;`, `static constexpr size_t x{...};`
_LOCAL = re.compile(
    rf"(?<![\w:])((?:(?:const|constexpr|static|inline)\s+)*){_INT_TYPE}"
    r"((?:\s+(?:const|constexpr))*)\s+([A-Za-z_]\w*)\s*(?:=\s*([^;{]+?)|\(([^;]*)\)|\{([^;]*)\})\s*;"
)
_DEFINE = re.compile(
    r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+\(?\s*(\d+)\s*\)?[ \t]*$", re.M
)
_MALLOC = re.compile(
    r"\bcudaMalloc(?:Managed|Async)?\s*\(\s*(?:\(\s*void\s*\*\s*\*\s*\)\s*)?&\s*([A-Za-z_]\w*)\s*,"
)
_KEYWORDS = frozenset({"const", "constexpr", "static", "inline", "return", "int", "long", "auto"})
_SIZEOF = re.compile(r"sizeof\s*\(\s*([^()]*?)\s*\)")
_ITEMSIZE = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int8": 1, "uint8": 1,
             "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8}  # fmt: skip


@dataclass(frozen=True)
class StaticLaunch:
    """Expressions over the kernel's integer parameters, each None where the file did not say."""

    line: int  # 0-based line of the launch site
    grid: tuple[str, ...] | None = None
    block: tuple[str, ...] | None = None
    smem: str | None = None
    counts: dict[str, str] = field(default_factory=dict)  # pointer parameter -> element count
    # a pointer parameter with no element type of its own (`void*`) -> the allocation's dtype
    dtypes: dict[str, str] = field(default_factory=dict)
    written: dict[str, str] = field(default_factory=dict)  # its count as the file writes it
    # a scalar parameter -> what the file passes for it, over the other integer parameters or
    # a number (through the launcher to its callers, one level)
    scalars: dict[str, str] = field(default_factory=dict)
    # a scalar parameter -> the text the file passes for it (where a caller's, that one)
    passed: dict[str, str] = field(default_factory=dict)


def _balanced(text: str, start: int) -> str:
    """The text from `start` up to the first `,` or `)` at depth 0."""
    end = close_index(text, start, comma=True)
    return text[start:end] if end >= 0 else text[start:]


def _until_close(text: str, start: int) -> str:
    """The text from `start` up to the `)` closing the parenthesis just before it."""
    end = close_index(text, start)
    return text[start:end] if end >= 0 else text[start:]


def _split_top(text: str) -> list[str]:
    """The arguments of an argument list's text (a trailing comma adds no empty one)."""
    parts = split_top(text)
    return parts[:-1] if parts and not parts[-1] else parts


def _definition(m: re.Match[str]) -> list[str]:
    value = m.group(4) if m.group(4) is not None else (m.group(5) or m.group(6) or "")
    return _split_top(value)


def _locals(before: str) -> dict[str, list[str]]:
    """name -> its definition's expression(s) (a dim3's components); the last definition wins."""
    found: dict[str, list[str]] = {}
    ends: dict[str, int] = {}
    for m in _LOCAL.finditer(before):
        parts = _definition(m)
        if parts and m.group(3) not in _KEYWORDS:
            found[m.group(3)] = parts
            ends[m.group(3)] = m.end()
    # a variable assigned again after its definition (`n = 0; ... n = a * b;`): value unknown
    for name, end in ends.items():
        n = re.escape(name)
        assigned = rf"(?<![\w.>]){n}\s*(?:(?:[-+*/%|&^]|<<|>>)?=(?!=)|\+\+|--)|(?:\+\+|--)\s*{n}\b"
        if re.search(assigned, before[end:]):
            del found[name]
    return found


def _file_constants(source: str) -> dict[str, str]:
    """name -> value of the integer constants defined at file (or namespace) scope: `const` or
    `constexpr` ones only (a plain global may change before the launch); a name defined twice
    with different values is left out."""
    blank = _without_comments(source)
    scope = _file_scope(blank)
    found: dict[str, str | None] = {}
    for m in _LOCAL.finditer(blank):
        quals = (m.group(1) + m.group(2)).split()
        if not scope(m.start()) or not {"const", "constexpr"} & set(quals):
            continue
        parts = _definition(m)
        if len(parts) != 1 or m.group(3) in _KEYWORDS:
            continue
        value = " ".join(parts[0].split())
        name = m.group(3)
        found[name] = value if found.get(name, value) == value else None
    return {k: v for k, v in found.items() if v is not None}


def _without_comments(source: str) -> str:
    """`source` with comments blanked to spaces (offsets kept)."""
    return re.sub(
        r"//[^\n]*|/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), source, flags=re.S
    )


def _bodies(source: str) -> list[tuple[int, int]]:
    """The outermost braces that are no `namespace`'s or `extern "C"`'s (function bodies,
    classes, initializers), in order: disjoint spans of offsets."""
    spans: list[tuple[int, int]] = []
    stack: list[bool] = []  # each open brace: a namespace's?
    start = 0
    for m in re.finditer(r"[{}]", source):
        inner = not all(stack)  # inside a function, class or initializer already
        if m.group(0) == "{":
            head = source[max(0, m.start() - 200) : m.start()]
            scope = re.search(r'(?:\bnamespace\b[\w:\s]*|\bextern\s*"C\+*"\s*)$', head)
            stack.append(bool(scope) and not inner)
            if not inner and not stack[-1]:
                start = m.start()
        elif stack:
            stack.pop()
            if inner and all(stack):
                spans.append((start, m.end()))
    return spans


def _file_scope(source: str) -> Callable[[int], bool]:
    """Whether an offset lies outside every brace but a `namespace`'s or `extern "C"`'s."""
    spans = _bodies(source)
    starts = [s for s, _ in spans]

    def at_file_scope(offset: int) -> bool:
        i = bisect_right(starts, offset) - 1
        return i < 0 or not spans[i][0] < offset < spans[i][1]

    return at_file_scope


def _defines(source: str) -> dict[str, str]:
    return {m.group(1): m.group(2) for m in _DEFINE.finditer(source)}


def _cast_free(text: str) -> str:
    text = re.sub(r"\(\s*(?:unsigned\s+)?(?:int|long|size_t|unsigned)\s*\)", "", text)
    text = re.sub(r"static_cast\s*<[^<>]*>", "", text)
    return re.sub(r"\b(\d+)[uUlL]+\b", r"\1", text)  # 64u, 1024UL


def _substitute(text: str, table: dict[str, str]) -> str:
    return _IDENT.sub(lambda m: table.get(m.group(0), m.group(0)), text)


class _Resolver:
    """Resolves a scope's expressions (the launcher's at the site, or a caller's at its call of
    the launcher) into the terms of the parameters `passed` names: what each argument's text
    expands to there -> the parameter it is passed for (the first one, where two get the same)."""

    def __init__(
        self,
        source: str,
        before: str,
        scope_params: tuple[str, ...],
        passed: list[tuple[str, str]],
        ints: set[str],
    ) -> None:
        self.locals = _locals(before)
        self.defines = _defines(source)
        # a file-scope constant, unless the scope's own parameter or local shadows it
        shadowed = set(scope_params) | set(self.locals)
        self.constants = {k: v for k, v in _file_constants(source).items() if k not in shadowed}
        self.aliases = type_aliases(source)
        self.passed = [
            (_strip_parens(" ".join(self.expand(arg).split())), name) for name, arg in passed
        ]
        self.ints = ints

    def expand(self, text: str, depth: int = 0) -> str:
        """`text` with locals, numeric `#define`s, `sizeof` of element types and
        ceiling-division macros replaced."""
        text = _cast_free(text)
        text = _SIZEOF.sub(self._sizeof, text)
        text = _MEMBER.sub(self._member, text)
        for macro in _CDIV_MACROS:
            text = re.sub(rf"\b{macro}\s*\(", "cdiv(", text)
        if depth > 6:
            return text

        def one(m: re.Match[str]) -> str:
            name = m.group(0)
            if name in self.locals and len(self.locals[name]) == 1:
                value = self.expand(self.locals[name][0], depth + 1).strip()
                return value if re.fullmatch(r"\w+", value) else f"({value})"
            if name in self.constants:
                value = self.expand(self.constants[name], depth + 1).strip()
                return value if re.fullmatch(r"\w+", value) else f"({value})"
            return self.defines.get(name, name)

        return _IDENT.sub(one, text)

    def _member(self, m: re.Match[str]) -> str:
        """`block.x` of a local `dim3 block(16, 16)`: its component (`16`; an unset one is 1)."""
        parts = self.locals.get(m.group(1))
        if parts is None:
            return m.group(0)
        index = "xyz".index(m.group(2))
        return f"({parts[index]})" if index < len(parts) else "1"

    def _sizeof(self, m: re.Match[str]) -> str:
        base = resolve_alias(normalize_c_type(m.group(1)), self.aliases)
        dtype = c_type_dtype(base)
        size = _ITEMSIZE.get(dtype or "")
        return str(size) if size else m.group(0)

    def kernel_terms(self, text: str, exclude: str = "") -> str | None:
        """`text` over the integer parameters (but `exclude`: a scalar's value is not itself),
        else None."""
        expanded = " ".join(self.expand(text).split())
        table: dict[str, str] = {}
        for passed, name in self.passed:
            if name != exclude:
                table.setdefault(passed, name)
        for passed, name in sorted(table.items(), key=lambda kv: -len(kv[0])):
            if passed and not _IDENT.fullmatch(passed):
                expanded = expanded.replace(f"({passed})", name)
                expanded = re.sub(
                    rf"(?<![/%\w]\s)(?<![/%\w]){re.escape(passed)}(?!\w)", name, expanded
                )
        idents = {p: n for p, n in table.items() if _IDENT.fullmatch(p)}
        expanded = _substitute(expanded, idents)
        return _checked(expanded, self.ints - {exclude})

    def dims(self, text: str) -> tuple[str, ...] | None:
        name = text.strip()
        if len(self.locals.get(name, [])) > 1:  # dim3 name(x, y[, z])
            parts = [self.kernel_terms(p) for p in self.locals[name]]
            return tuple(p for p in parts if p is not None) if all(parts) else None
        m = re.fullmatch(r"dim3\s*\((.*)\)", name, re.S)
        if m:
            parts = [self.kernel_terms(p) for p in _split_top(m.group(1))]
            return tuple(p for p in parts if p is not None) if all(parts) else None
        one = self.kernel_terms(text)
        return (one,) if one is not None else None


_MEMBER = re.compile(r"\b([A-Za-z_]\w*)\s*\.\s*([xyz])\b")


def _strip_parens(text: str) -> str:
    text = text.strip()
    while text.startswith("(") and text.endswith(")") and _balanced(text, 1) == text[1:-1]:
        text = text[1:-1].strip()
    return text


def _checked(text: str, allowed: set[str]) -> str | None:
    text = _strip_parens(text)
    try:
        expr = parse_expr(text)
    except ExprError:
        return None
    if not expr.names() <= allowed:
        return None
    return text


def _malloc_counts(source: str) -> dict[str, str]:
    """variable -> its cudaMalloc's element count (the byte size without its `sizeof`)."""
    counts: dict[str, str] = {}
    for m in _MALLOC.finditer(source):
        size = _balanced(source, m.end()).strip()
        found = list(_SIZEOF.finditer(size))
        if len(found) != 1:
            continue
        s = found[0]
        rest = (size[: s.start()] + "1" + size[s.end() :]).strip()
        rest = re.sub(r"\*\s*1\b(?!\d)|\b1\s*\*", "", rest).strip() or "1"
        counts[m.group(1)] = rest
    return counts


_WRAPPERS = re.compile(
    r"(?:(?:thrust::)?raw_pointer_cast|(?:static|reinterpret|const)_cast\s*<[^<>]*>)\s*\(\s*(.*)\)"
    r"|\(\s*[\w:\s]+\*\s*\)\s*(.*)",
    re.S,
)
_ACCESSOR = re.compile(
    r"([A-Za-z_]\w*)\s*(?:\.|->)\s*(?:data|device_data|data_ptr|get|device_ptr)\s*"
    r"(?:<[^<>()]*>)?\s*\(\s*\)"
    r"|&\s*([A-Za-z_]\w*)\s*\[\s*0\s*\]"
)
_TYPE = r"(?:[A-Za-z_]\w*::)*[A-Za-z_]\w*\s*(?:<(?:[^<>;{}]|<(?:[^<>;{}]|<[^<>;{}]*>)*>)*>)?"
_NOT_TYPES = frozenset({
    "return", "new", "delete", "throw", "case", "goto", "else", "do", "typename", "sizeof",
    "void", "float", "double", "int", "char", "bool", "unsigned", "long", "short", "auto",
    "const", "constexpr", "static", "using", "typedef", "struct", "class", "operator",
})  # fmt: skip
_VECTOR_LIKE = re.compile(r"(?:vector|buffer|allocation)", re.I)  # `T x(n)`: n elements


@dataclass(frozen=True)
class _Container:
    """A buffer an object owns: `HostTensor<float, L> x({m, n})`, `device_vector<float> x(n)`."""

    count: str  # element count, in the declaring scope's terms
    c_type: str  # the element type: the container's first template argument ("" if none)


def _buffer_name(arg: str) -> tuple[str, bool] | None:
    """The variable a pointer argument names: (`x`, False) for `x`, (`x`, True) for an accessor
    of an object (`x.data()`, `x.device_data()`, `raw_pointer_cast(x.data())`, `&x[0]`, ...)."""
    text = _strip_parens(arg)
    for _ in range(4):
        m = _WRAPPERS.fullmatch(text)
        if m is None:
            break
        text = _strip_parens(m.group(1) if m.group(1) is not None else m.group(2))
    if _IDENT.fullmatch(text):
        return text, False
    m = _ACCESSOR.fullmatch(text)
    if m is None:
        return None
    return m.group(1) or m.group(2), True


def _containers(source: str) -> dict[str, _Container]:
    """variable -> what its declaration says it holds, where it is constructed with a shape:
    `T x({a, b})` / `T x{{a, b}}` / `auto x = f({a, b}, ...)` hold a * b elements; a vector-like
    `T x(n)` / `T x(n, value)` holds n. The last declaration of a name wins."""
    found: dict[str, _Container] = {}
    blank = _without_comments(source)
    pattern = rf"(?<![\w:.>])({_TYPE})\s+([A-Za-z_]\w*)\s*(?:([({{])|=\s*({_TYPE})\s*\()"
    for m in re.finditer(pattern, blank):
        type_text, name = m.group(1), m.group(2)
        factory = m.group(4)
        head = type_text.split("<")[0].strip()
        if (head in _NOT_TYPES and not (factory and head == "auto")) or name in _NOT_TYPES:
            continue
        args = _split_top(_until_close(blank, m.end()))
        kind = factory if factory is not None else type_text
        vector_like = bool(_VECTOR_LIKE.search(kind.split("<")[0].split("::")[-1]))
        shape = None
        if m.group(3) == "{" and len(args) == 1 and args[0].startswith("{"):
            shape = args[0]  # T x{{a, b}}
        elif m.group(3) != "{" and args and args[0].startswith("{"):
            shape = args[0]  # T x({a, b}, ...) or auto x = f({a, b}, ...)
        count = None
        if shape is not None and not vector_like:  # a vector's braces are its values
            dims = _split_top(shape[1:-1]) if shape.endswith("}") else []
            count = " * ".join(d if _IDENT.fullmatch(d) else f"({d})" for d in dims) or None
        elif m.group(3) == "(" and vector_like and args and 1 <= len(args) <= 2:
            count = args[0]
        if count is None:
            continue
        template = re.search(r"<(.*)>", type_text if factory is None else factory, re.S)
        c_type = split_template_args(template.group(1))[0] if template else ""
        found[name] = _Container(count, c_type)
    return found


def _is_zero(text: str) -> bool:
    try:
        return evaluate(text, {}) == 0
    except (ExprError, ValueError, TypeError, ZeroDivisionError):
        return False


def _itemsize(base: str) -> int | None:
    """Bytes of one element of a C type (a CUDA vector type's too), else None."""
    if base in VECTOR_TYPES:
        dtype, lanes = VECTOR_TYPES[base]
        return _ITEMSIZE[dtype] * lanes
    return _ITEMSIZE.get(c_type_dtype(base) or "")


@dataclass(frozen=True)
class _Call:
    """A call of the launcher: its parameter -> the argument's text, and the calling function's
    parameter names and text up to the call (where the arguments' locals are defined)."""

    args: dict[str, str]
    params: tuple[str, ...]
    before: str


def _callers(source: str, function: str, params: tuple[str, ...]) -> list[_Call]:
    """Each call of `function` in the file."""
    calls = []
    blank = _without_comments(source)
    bodies = _bodies(blank)
    starts = [s for s, _ in bodies]
    for m in re.finditer(rf"(?<![\w.>:]){re.escape(function)}\s*\(", source):
        # a definition or declaration has a type before the name: skip those
        head = source[max(0, m.start() - 40) : m.start()].rstrip()
        if re.search(r"(?:void|int|float|static|inline|\*|>)\s*$", head):
            continue
        inside = _until_close(blank, m.end())
        after = blank[m.end() + len(inside) + 1 :].lstrip()
        if re.match(r"(?:(?:const|noexcept|override)\b\s*)*\{", after):
            continue  # a definition, not a call
        args = _split_top(_until_close(source, m.end()))
        if len(args) != len(params):
            continue
        i = bisect_right(starts, m.start()) - 1
        scope: tuple[str, ...] = ()
        before = ""
        if i >= 0 and bodies[i][0] < m.start() < bodies[i][1]:
            before = source[bodies[i][0] : m.start()]
            # the calling function's parameters: the last parenthesis before its body
            header = re.search(
                r"\(([^()]*)\)[\s\w]*$", blank[max(0, bodies[i][0] - 2000) : bodies[i][0]]
            )
            if header is not None:
                scope = tuple(
                    ids[-1]
                    for part in _split_top(header.group(1))
                    if (ids := _IDENT.findall(part.split("=")[0]))
                )
        calls.append(_Call(dict(zip(params, args, strict=True)), scope, before))
    return calls


def static_launch(kernel: Kernel, source: str) -> StaticLaunch | None:
    """The file's own launch of `kernel`, in the kernel's terms (None: no usable site)."""
    try:
        contexts = sites_in_context(source, kernel.name)
    except Exception:  # a file tree-sitter reads oddly: no facts, never a failure
        return None
    ctx = next((c for c in contexts if len(c.site.args) == len(kernel.params)), None)
    if ctx is None:
        return None
    ints = {p.name for p in kernel.params if not p.is_pointer}
    site_args = list(zip(kernel.params, ctx.site.args, strict=True))
    pairs = [(p.name, arg) for p, arg in site_args if p.name in ints]
    resolver = _Resolver(source, ctx.before, ctx.params, pairs, ints)
    config = ctx.site.config
    grid = resolver.dims(config[0]) if config else None
    block = resolver.dims(config[1]) if len(config) > 1 else None
    smem = resolver.kernel_terms(config[2]) if len(config) > 2 else "0"
    counts: dict[str, str] = {}
    dtypes: dict[str, str] = {}
    written: dict[str, str] = {}
    mallocs = _malloc_counts(source)
    containers = _containers(source)
    aliases = resolver.aliases
    callers = _callers(source, ctx.function, ctx.params) if ctx.function else []

    def allocation(arg: str) -> tuple[str, str] | None:
        """(element count, element C type or "") of what `arg` points to, in its scope."""
        named = _buffer_name(arg)
        if named is None:
            return None
        name, accessor = named
        if accessor and name in containers:
            return containers[name].count, containers[name].c_type
        if name in mallocs:
            return mallocs[name], ""
        return None

    for p, arg in zip(kernel.params, ctx.site.args, strict=True):
        if not p.is_pointer:
            continue
        found = allocation(arg)
        text = found[0] if found else None
        if text is not None and resolver.kernel_terms(text) is None:
            found = text = None  # e.g. the caller's allocation of a launcher parameter's name
        if found is None and (named := _buffer_name(arg)) and named[0] in ctx.params:
            # a launcher parameter: its callers' allocations, in the launcher's names
            for called in callers:
                call = called.args
                outer = allocation(call[named[0]])
                if outer is None:
                    continue
                back = {v.strip(): k for k, v in call.items() if _IDENT.fullmatch(v.strip())}
                text = _substitute(outer[0], back)
                for k, v in call.items():
                    plain = _strip_parens(" ".join(v.split()))
                    if not _IDENT.fullmatch(plain) and plain in " ".join(text.split()):
                        text = " ".join(text.split()).replace(plain, k)
                if resolver.kernel_terms(text) is not None:
                    found = outer
                    break
        if found is None or text is None:
            continue
        count = resolver.kernel_terms(text)
        if count is None or _is_zero(count):  # an empty allocation sizes nothing
            continue
        held = resolve_alias(normalize_c_type(found[1]), aliases) if found[1] else ""
        base = resolve_alias(normalize_c_type(p.c_type), aliases)
        held_size, base_size = _itemsize(held), _itemsize(base)
        if held_size and base_size and held_size != base_size:  # `(float4*)v.data()`
            if held_size % base_size == 0:
                count = f"({count}) * {held_size // base_size}"
            elif base_size % held_size == 0:
                count = f"({count}) / {base_size // held_size}"
            else:
                continue
        elif held and base_size is None and (c_type_dtype(held) or "") in DTYPES:
            dtypes[p.name] = c_type_dtype(held) or ""  # a `void*` parameter: the object's type
        counts[p.name] = _strip_parens(count)
        written[p.name] = " ".join(text.split())
    scalars, passed = _scalars(resolver, site_args, ctx.params, callers, source)
    return StaticLaunch(ctx.site.line, grid, block, smem, counts, dtypes, written, scalars, passed)


def _scalars(
    resolver: _Resolver,
    site_args: list[tuple[Param, str]],
    launcher_params: tuple[str, ...],
    callers: list[_Call],
    source: str,
) -> tuple[dict[str, str], dict[str, str]]:
    """What the file passes for each scalar parameter, over the kernel's other integer
    parameters where it resolves (a launcher's parameter through its callers' arguments, in
    their scope), and the text it passes, its locals expanded (the first caller's, where it
    went up)."""
    values: dict[str, str] = {}
    texts: dict[str, str] = {}
    outers: dict[int, _Resolver] = {}  # each call's scope, made when a scalar first needs it
    for p, arg in site_args:
        if p.is_pointer:
            continue
        value = resolver.kernel_terms(arg, exclude=p.name)
        plain = _strip_parens(" ".join(resolver.expand(arg).split()))
        texts[p.name] = plain
        if value is None and plain in launcher_params:
            for i, call in enumerate(callers):
                if i not in outers:
                    outers[i] = _Resolver(
                        source, call.before, call.params, list(call.args.items()), set(call.args)
                    )
                outer = outers[i]
                if i == 0:
                    texts[p.name] = _strip_parens(" ".join(outer.expand(call.args[plain]).split()))
                terms = outer.kernel_terms(call.args[plain], exclude=plain)
                if terms is not None:
                    value = resolver.kernel_terms(terms, exclude=p.name)
                if value is not None:
                    break
        if value is not None:
            values[p.name] = _strip_parens(value)
    return values, texts


def launch_disagreements(kernel: Kernel, spec: TestSpec, source: str) -> list[SpecError]:
    """Warnings where `spec`'s launch is not the one the file makes: its timed case's grid,
    block or smem against the file's own launch site (evaluated with the case's scalar
    arguments), and any case's block against `__launch_bounds__` (that launch would fail)."""
    if kernel.spec is None:
        return []
    try:
        cases = spec.cases()
    except ValueError:
        return []
    found: list[tuple[str, str]] = []
    if kernel.launch_bounds:
        bound = int_literal(split_template_args(kernel.launch_bounds)[0])
        over = [c for c in cases if bound and math.prod(c.block) > bound]
        if bound and over:
            c = over[0]
            found.append((
                "block",
                f"case {c.index} launches {math.prod(c.block)} threads per block but the kernel "
                f"is declared __launch_bounds__({kernel.launch_bounds}): that launch fails",
            ))  # fmt: skip
    facts = static_launch(kernel, source)
    if facts is not None:
        timed = cases[-1]
        env = {k: v for k, v in timed.scalars.items() if isinstance(v, int)}
        for key, exprs, got in (
            ("grid", facts.grid, timed.grid),
            ("block", facts.block, timed.block),
            ("smem", (facts.smem,) if facts.smem is not None else None, (timed.smem,)),
        ):
            if exprs is None:
                continue
            try:
                values = tuple(int(evaluate(e, env)) for e in exprs)
            except (ExprError, ValueError, TypeError, ZeroDivisionError):
                continue
            if key != "smem":
                values = (*values, *(1,) * (3 - len(values)))
            if values != tuple(got):
                shown = ", ".join(exprs)
                found.append((
                    key,
                    f"{key} {_show(got)} in the timed case ({timed.describe()}), but the file "
                    f"launches {kernel.name} with {key} {_show(values)} at line {facts.line + 1} "
                    f"({shown}): the spec does not test the launch the program makes",
                ))  # fmt: skip
    if not found:
        return []
    locator = Locator(kernel.spec)
    written = spec_keys(kernel)
    return [
        SpecError(locator.key((key,)) if key in written else locator.marker(), message, "warning")
        for key, message in found
    ]


def spec_keys(kernel: Kernel) -> set[str]:
    """The top-level keys written in the kernel's spec block (a missing smem has no line)."""
    if kernel.spec is None:
        return set()
    return {m.group(1) for m in re.finditer(r"^\s*([A-Za-z_]\w*)\s*=", kernel.spec.toml, re.M)}


def _show(values: tuple[int, ...]) -> str:
    return str(values[0]) if len(values) == 1 else "(" + ", ".join(str(v) for v in values) + ")"
