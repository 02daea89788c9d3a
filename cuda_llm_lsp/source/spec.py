"""Test specs: the `/* @cuda-llm */` TOML block above a kernel (format: DESIGN.md, a contract).

Parsing never raises on user input: every problem becomes a `SpecError` at the offending line
inside the block, in file coordinates. Expressions are parsed by `source.expr` (never `eval`).
All cases are evaluated while parsing, so a spec returned without errors has valid cases.

Decisions beyond the contract (kept here so the evaluator and the docs agree):
- Unprefixed non-const pointers are `out` only if the body never reads them (`p[i] = ...` and
  `*p = ...` are the only non-reading uses); compound assignment, atomics, passing the pointer on
  or aliasing it count as reads, so the role is `inout`.
- Integer-valued template arguments of `instance` are names usable in expressions
  (`block = "BLOCK"` with `instance = "k<float, 256>"`); size names take precedence.
- Unknown top-level keys and a spec dtype that disagrees with the signature are warnings
  (`SpecError.severity == "warning"`); the spec stays usable. Everything else is an error and
  makes the spec unusable (`parse_spec` returns None).
- `flops = "<expression>"` (optional): floating-point operations of one launch, over the size
  names (e.g. `"2 * M * N * K"`); evaluated per case into `Case.flops` (the suite's floor is
  max(bytes / copy bandwidth, flops / peak rate)). Must be non-negative.
- Default tolerances: the loosest over the compared outputs (float16/bfloat16: 1e-2/1e-2,
  float32/float64: 1e-4/1e-5, integers: exact). Pointers always get an `init` (the default
  when none is written); `randint(lo, hi)` includes both ends, as the evaluator draws it.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, cast

from cuda_llm_lsp.source.expr import FUNCTIONS, Expr, ExprError, Number, parse_expr
from cuda_llm_lsp.source.kernels import Kernel, Param, SpecBlock, parse_tree
from cuda_llm_lsp.source.text import Point, Span

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

Role = Literal["in", "out", "inout"]
DType = Literal[
    "float32", "float64", "float16", "bfloat16", "int8", "uint8", "int32", "uint32", "int64"
]
DTYPES: tuple[str, ...] = (
    "float32", "float64", "float16", "bfloat16", "int8", "uint8", "int32", "uint32", "int64",
)  # fmt: skip
ROLES: tuple[str, ...] = ("in", "out", "inout")
FLOAT_DTYPES = frozenset({"float32", "float64", "float16", "bfloat16"})
INIT_KINDS: dict[str, int] = {
    "uniform": 2, "normal": 2, "randint": 2, "arange": 0, "zeros": 0, "ones": 0,
}  # fmt: skip
TOP_LEVEL_KEYS: tuple[str, ...] = (
    "sizes", "grid", "block", "args", "smem", "instance", "init", "outputs", "rtol", "atol",
    "inputs", "flops",
)  # fmt: skip
MAX_THREADS_PER_BLOCK = 1024
_BLOCK_LIMITS = (1024, 1024, 64)
_GRID_LIMITS = (2**31 - 1, 65535, 65535)
_INT_RANGES: dict[str, tuple[int, int]] = {
    "int8": (-(2**7), 2**7 - 1),
    "uint8": (0, 2**8 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint64": (0, 2**64 - 1),
    "bool": (0, 1),
}
_C_TYPES: dict[str, str] = {
    "float": "float32", "double": "float64",
    "half": "float16", "__half": "float16",
    "__nv_bfloat16": "bfloat16", "nv_bfloat16": "bfloat16", "__bfloat16": "bfloat16",
    "bfloat16": "bfloat16",
    "int": "int32", "signed": "int32", "signed int": "int32", "int32_t": "int32",
    "unsigned": "uint32", "unsigned int": "uint32", "uint32_t": "uint32", "uint": "uint32",
    "long": "int64", "long int": "int64", "long long": "int64", "long long int": "int64",
    "signed long": "int64", "signed long long": "int64", "int64_t": "int64",
    "ptrdiff_t": "int64", "ssize_t": "int64", "intptr_t": "int64",
    "unsigned long": "uint64", "unsigned long int": "uint64", "unsigned long long": "uint64",
    "unsigned long long int": "uint64", "uint64_t": "uint64", "size_t": "uint64",
    "uintptr_t": "uint64",
    "short": "int16", "short int": "int16", "signed short": "int16", "int16_t": "int16",
    "unsigned short": "uint16", "unsigned short int": "uint16", "uint16_t": "uint16",
    "char": "int8", "signed char": "int8", "int8_t": "int8",
    "unsigned char": "uint8", "uint8_t": "uint8",
    "bool": "bool",
}  # fmt: skip
# CUDA vector types: (element type, lanes); a `float4*` buffer of n vectors is float32[n * 4].
VECTOR_TYPES: dict[str, tuple[str, int]] = {
    "float2": ("float32", 2), "float4": ("float32", 4), "double2": ("float64", 2),
    "int2": ("int32", 2), "int4": ("int32", 4), "uint2": ("uint32", 2), "uint4": ("uint32", 4),
    "half2": ("float16", 2), "__half2": ("float16", 2), "__nv_bfloat162": ("bfloat16", 2),
    "char4": ("int8", 4), "uchar4": ("uint8", 4), "longlong2": ("int64", 2),
}  # fmt: skip
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True)
class SpecError:
    span: Span  # file coordinates (0-based), inside the spec block
    message: str
    severity: Literal["error", "warning"] = "error"  # a warning leaves the spec usable


@dataclass(frozen=True)
class InitSpec:
    kind: Literal["uniform", "normal", "randint", "arange", "zeros", "ones"]
    a: float = 0.0
    b: float = 0.0


@dataclass(frozen=True)
class ArgSpec:
    name: str
    index: int  # position in the kernel's signature
    c_type: str  # from the signature
    is_pointer: bool
    role: Role | None = None  # pointers only
    dtype: str | None = None  # pointers: element type; scalars: numpy-style type of the C type
    count: str | None = None  # pointers: element count expression (source text)
    value: str | None = None  # scalars: literal or expression (source text)
    init: InitSpec | None = None


@dataclass(frozen=True)
class Case:
    """One concrete test case: every expression evaluated for size index `index`."""

    index: int
    sizes: dict[str, int]
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem: int
    counts: dict[str, int]  # pointer arg -> element count
    scalars: dict[str, int | float]  # scalar arg -> value
    flops: int | float | None = None  # the spec's `flops` for this case, if given

    def describe(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.sizes.items()) or f"case {self.index}"


@dataclass(frozen=True)
class TestSpec:
    kernel: str
    sizes: dict[str, list[int]]
    grid: tuple[str, ...]  # expressions, 1..3
    block: tuple[str, ...]
    args: tuple[ArgSpec, ...]  # in signature order
    smem: str = "0"
    outputs: tuple[str, ...] = ()  # pointers compared after a run
    rtol: float = 1e-4
    atol: float = 1e-5
    instance: str | None = None
    inputs: str | None = None  # "path/to/file.py:function", relative to the .cu file
    flops: str | None = None  # optional FLOP count expression (suite floor)
    extra: dict[str, object] = field(default_factory=dict)
    # template parameter -> argument text of `instance` (integer ones are names in expressions)
    template_args: dict[str, str] = field(default_factory=dict)

    __test__ = False  # not a pytest class

    @property
    def case_count(self) -> int:
        return len(next(iter(self.sizes.values()), [0]))

    def cases(self) -> list[Case]:
        """All cases; the last is the timed one."""
        cases, problems = _evaluate_cases(self)
        if problems:
            raise ValueError(problems[0].message)
        return cases

    def arg(self, name: str) -> ArgSpec | None:
        return next((a for a in self.args if a.name == name), None)


# ---------------------------------------------------------------------------------------------
# C types


def normalize_c_type(c_type: str) -> str:
    """`const float* __restrict__` -> `float`: the base type without qualifiers or `*`/`&`."""
    text = re.sub(r"[*&]", " ", c_type)
    words = [
        w
        for w in text.split()
        if w not in ("const", "volatile", "__restrict__", "__restrict", "restrict", "struct")
    ]
    base = " ".join(words)
    return base.removeprefix("std::").removeprefix("::")


def c_type_dtype(c_type: str) -> str | None:
    """The numpy-style type of a C scalar/element type, or None if it has none."""
    return _C_TYPES.get(normalize_c_type(c_type))


def resolved_base(param: Param, template_args: Mapping[str, str]) -> str:
    base = normalize_c_type(param.base_type)
    return normalize_c_type(template_args.get(base, base))


# ---------------------------------------------------------------------------------------------
# Pointer roles from the kernel body


def read_pointers(body: str, names: set[str]) -> set[str]:
    """Which of `names` the function body `body` ('{...}') reads (conservatively).

    A use is a pure write only as `p[...] = ...` or `*p = ...` (plain `=`); anything else,
    including `+=`, `atomicAdd(&p[i], v)`, `f(p)` and `T* q = p`, counts as a read.
    """
    if not names:
        return set()
    tree, data = parse_tree("void __cuda_llm_body() " + body)  # a per-thread parser
    reads: set[str] = set()
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        if node.type != "identifier":
            continue
        name = data[node.start_byte : node.end_byte].decode("utf-8", "replace")
        if name in names and name not in reads and not _is_pure_write(node):
            reads.add(name)
    return reads


def _is_pure_write(identifier: Any) -> bool:
    parent = identifier.parent
    if parent is None:
        return False
    if parent.type == "subscript_expression":
        target = parent
    elif parent.type == "pointer_expression":
        operator = parent.child_by_field_name("operator")
        if operator is None or operator.type != "*":
            return False
        target = parent
    else:
        return False
    argument = target.child_by_field_name("argument")
    if argument is None or argument.id != identifier.id:
        return False
    assignment = target.parent
    if assignment is None or assignment.type != "assignment_expression":
        return False
    left = assignment.child_by_field_name("left")
    operator = assignment.child_by_field_name("operator")
    return (
        left is not None and left.id == target.id and operator is not None and operator.type == "="
    )


def infer_roles(kernel: Kernel, source: str) -> dict[str, Role]:
    """The default role of every pointer parameter: const -> in; else out unless read."""
    pointers = [p for p in kernel.params if p.is_pointer]
    candidates = {p.name for p in pointers if not p.is_const}
    try:
        body = kernel.body_span.slice(source)
        reads = read_pointers(body, candidates)
    except Exception:  # a broken body: be conservative
        reads = set(candidates)
    roles: dict[str, Role] = {}
    for p in pointers:
        roles[p.name] = "in" if p.is_const else ("inout" if p.name in reads else "out")
    return roles


# ---------------------------------------------------------------------------------------------
# Template instances


def split_template_args(text: str) -> list[str]:
    """Top-level comma split of a template argument list (nested <>, (), [] kept)."""
    parts: list[str] = []
    depth = 0
    current = ""
    for ch in text:
        if ch in "<([{":
            depth += 1
        elif ch in ">)]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    if current.strip() or parts:
        parts.append(current.strip())
    return parts


def int_literal(text: str) -> int | None:
    m = re.fullmatch(r"\s*(-?)\s*(0[xX][0-9a-fA-F]+|\d+)[uUlL]*\s*", text)
    if not m:
        return None
    value = int(m.group(2), 0) if m.group(2).lower().startswith("0x") else int(m.group(2))
    return -value if m.group(1) else value


def template_constants(template_args: Mapping[str, str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, text in template_args.items():
        value = int_literal(text)
        if value is not None:
            out[name] = value
    return out


@dataclass(frozen=True)
class TemplateParam:
    name: str
    is_type: bool
    c_type: str  # "typename" for type parameters, else the declared type ("int")
    default: str | None


def template_parameters(kernel: Kernel, source: str) -> list[TemplateParam]:
    """The kernel's `template<...>` parameters with their kinds, read from its source text."""
    if not kernel.is_template:
        return []
    text = kernel.span.slice(source)
    m = re.search(r"\btemplate\s*<", text)
    params: list[TemplateParam] = []
    if m:
        depth = 1
        i = m.end()
        while i < len(text) and depth:
            depth += {"<": 1, ">": -1}.get(text[i], 0)
            i += 1
        for part in split_template_args(text[m.end() : i - 1]):
            default = None
            if "=" in part:
                part, default = (s.strip() for s in part.split("=", 1))
            words = part.split()
            if not words:
                continue
            is_type = words[0] in ("typename", "class")
            name = words[-1] if len(words) > 1 else ""
            params.append(
                TemplateParam(name, is_type, words[0] if is_type else " ".join(words[:-1]), default)
            )
    names = [p.name for p in params]
    if names != list(kernel.template_params):  # fall back to the names the source model gives
        params = [TemplateParam(n, True, "typename", None) for n in kernel.template_params]
    return params


# ---------------------------------------------------------------------------------------------
# Locating keys inside the TOML block


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


class _Locator:
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
                        entry.line, entry.key_start, entry.key_end, entry.value_start,
                        entry.value_end, number,
                    )  # fmt: skip
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


# ---------------------------------------------------------------------------------------------
# Parsing


@dataclass(frozen=True)
class _Problem:
    """A problem located by key path (turned into a SpecError by the locator)."""

    path: tuple[str, ...]
    message: str
    needle: str | None = None
    column: int | None = None
    severity: Literal["error", "warning"] = "error"


_TOML_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)")


def _toml_error(locator: _Locator, error: Exception) -> SpecError:
    text = str(error)
    message = _TOML_POSITION.sub("", text).replace("(at end of document)", "").strip()
    m = _TOML_POSITION.search(text)
    if m:
        line = int(m.group(1)) - 1
        column = int(m.group(2)) - 1
        line_text = locator.lines[line] if line < len(locator.lines) else ""
        content_end = len(line_text.rstrip())
        if line > 0 and not _parses(locator.lines[:line]):
            # e.g. an unclosed array: tomllib trips over the next line, the mistake is earlier
            span = locator.line_span(_first_bad_line(locator.lines[:line]))
        elif column >= content_end:
            span = locator.line_span(line)
        else:
            span = locator.span(line, column, content_end)
    else:
        span = locator.line_span(_first_bad_line(locator.lines))
    if "overwrite" in message.lower():
        message = "duplicate key: " + message[0].lower() + message[1:]
    return SpecError(span, f"TOML syntax error: {message}")


def _parses(lines: list[str]) -> bool:
    try:
        tomllib.loads("\n".join(lines))
    except tomllib.TOMLDecodeError:
        return False
    return True


def _first_bad_line(lines: list[str]) -> int:
    """For errors tomllib reports at the end of the document: the line after the longest
    prefix of the block that still parses."""
    good = 0
    for n in range(1, len(lines) + 1):
        if _parses(lines[:n]):
            good = n
    return min(good, len(lines) - 1)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _expr_text(value: object) -> str | None:
    """A TOML value that may be an expression: a string or a number (as source text)."""
    if isinstance(value, str):
        return value
    if _is_number(value):
        return repr(value)
    return None


_POINTER_SPEC = re.compile(r"\s*(?:([A-Za-z_]\w*)\s+)?([A-Za-z_]\w*)\s*\[(.*)\]\s*\Z", re.S)
_INIT_CALL = re.compile(r"\s*([A-Za-z_]\w*)\s*\((.*)\)\s*\Z", re.S)
_INPUTS = re.compile(r".+\.py:[A-Za-z_]\w*\Z")


class _SpecParser:
    def __init__(self, kernel: Kernel, source: str) -> None:
        self.kernel = kernel
        self.source = source
        self.problems: list[_Problem] = []
        self.names: set[str] = set()

    def error(self, path: tuple[str, ...], message: str, needle: str | None = None,
              column: int | None = None) -> None:  # fmt: skip
        self.problems.append(_Problem(path, message, needle, column))

    def warn(self, path: tuple[str, ...], message: str, needle: str | None = None) -> None:
        self.problems.append(_Problem(path, message, needle, severity="warning"))

    def has_errors(self) -> bool:
        return any(p.severity == "error" for p in self.problems)

    def expression(self, path: tuple[str, ...], text: str, what: str) -> Expr | None:
        """Parse `text` and check its names; problems are reported at `path`."""
        try:
            expr = parse_expr(text)
        except ExprError as e:
            self.error(path, f"{what}: {e.message} in {text!r}", text, e.column)
            return None
        unknown = sorted(expr.names() - self.names)
        if unknown:
            known = ", ".join(sorted(self.names)) or "none: add sizes.NAME = [...]"
            first = unknown[0]
            column = _name_column(text, first)
            self.error(
                path,
                f"{what}: unknown name {first!r} in {text!r} (sizes: {known})",
                text,
                column,
            )
            return None
        return expr

    # ------------------------------------------------------------------------------------------

    def parse(self, doc: dict[str, Any]) -> TestSpec | None:
        kernel = self.kernel
        for key in doc:
            if key not in TOP_LEVEL_KEYS:
                self.warn(
                    (key,), f"unknown key {key!r} is ignored (known: {', '.join(TOP_LEVEL_KEYS)})"
                )

        instance, template_args = self.parse_instance(doc.get("instance"))
        sizes = self.parse_sizes(doc.get("sizes"))
        constants = template_constants(template_args)
        raw_sizes = doc.get("sizes")
        declared: dict[str, Any] = raw_sizes if isinstance(raw_sizes, dict) else {}
        # a size with a bad value is still a known name: no follow-on "unknown name" errors
        self.names = set(sizes) | set(declared) | set(constants)
        if kernel.is_template and not template_args:  # instance missing or bad: reported once
            self.names |= set(kernel.template_params)

        grid = self.parse_dims("grid", doc.get("grid"))
        block = self.parse_dims("block", doc.get("block"))
        smem = "0"
        if "smem" in doc:
            smem_text = _expr_text(doc["smem"])
            if smem_text is None:
                self.error(("smem",), "smem must be an integer or an expression string")
            elif self.expression(("smem",), smem_text, "smem"):
                smem = smem_text

        roles = infer_roles(kernel, self.source)
        args = self.parse_args(doc.get("args"), roles, template_args)
        inits = self.parse_inits(doc.get("init"), args)
        args = [
            replace(a, init=inits.get(a.name) or _default_init(a)) if a.is_pointer else a
            for a in args
        ]
        outputs = self.parse_outputs(doc.get("outputs"), args)
        rtol, atol = _default_tolerances(args, outputs)
        rtol = self.parse_tolerance(doc, "rtol", rtol)
        atol = self.parse_tolerance(doc, "atol", atol)

        inputs = None
        if "inputs" in doc:
            value = doc["inputs"]
            if not isinstance(value, str) or not _INPUTS.match(value.strip()):
                self.error(
                    ("inputs",),
                    'inputs must be "path/to/file.py:function" (a Python function '
                    "f(sizes, rng) -> dict of arrays)",
                )
            else:
                inputs = value.strip()

        flops = None
        if "flops" in doc:
            flops_text = _expr_text(doc["flops"])
            if flops_text is None:
                self.error(("flops",), "flops must be a number or an expression string")
            elif self.expression(("flops",), flops_text, "flops"):
                flops = flops_text

        if self.has_errors() or grid is None or block is None:
            return None
        spec = TestSpec(
            kernel=kernel.name,
            sizes=sizes,
            grid=grid,
            block=block,
            args=tuple(args),
            smem=smem,
            outputs=outputs,
            rtol=rtol,
            atol=atol,
            instance=instance,
            inputs=inputs,
            flops=flops,
            template_args=template_args,
        )
        _, problems = _evaluate_cases(spec)
        self.problems.extend(problems)
        return None if problems else spec

    def parse_instance(self, value: object) -> tuple[str | None, dict[str, str]]:
        kernel = self.kernel
        if value is None:
            if kernel.is_template:
                example = (
                    kernel.instantiations[0]
                    if kernel.instantiations
                    else (f"{kernel.name}<{', '.join('float' for _ in kernel.template_params)}>")
                )
                self.error(
                    (),
                    f"{kernel.name} is a template: add instance = {example!r} "
                    f"(the instantiation to test)",
                )
            return None, {}
        if not kernel.is_template:
            self.error(("instance",), f"instance given but {kernel.name} is not a template")
            return None, {}
        if not isinstance(value, str):
            self.error(("instance",), f'instance must be a string like "{kernel.name}<float>"')
            return None, {}
        m = re.fullmatch(r"\s*([A-Za-z_][\w:]*)\s*<(.*)>\s*", value, re.S)
        if not m:
            self.error(("instance",), f'instance must look like "{kernel.name}<float, 128>"', value)
            return None, {}
        if m.group(1).split("::")[-1] != kernel.name:
            self.error(
                ("instance",),
                f"instance names {m.group(1)!r}, not this kernel {kernel.name!r}",
                m.group(1),
            )
            return None, {}
        args = split_template_args(m.group(2))
        if not args or any(not a for a in args) or len(args) > len(kernel.template_params):
            self.error(
                ("instance",),
                f"instance has {len(args)} template argument(s); {kernel.name} takes "
                f"{len(kernel.template_params)} ({', '.join(kernel.template_params)})",
            )
            return None, {}
        given = dict(zip(kernel.template_params, args, strict=False))
        for param in template_parameters(kernel, self.source)[len(args) :]:
            if param.default is None:
                self.error(
                    ("instance",),
                    f"instance gives no argument for {param.name}, which has no default",
                )
                return None, {}
            given[param.name] = param.default
        return value.strip(), given

    def parse_sizes(self, value: object) -> dict[str, list[int]]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.error(("sizes",), "sizes must be a table: sizes.NAME = [values, ...]")
            return {}
        sizes: dict[str, list[int]] = {}
        length: tuple[str, int] | None = None
        for name, values in value.items():
            path = ("sizes", name)
            if not _IDENTIFIER.match(name) or name in FUNCTIONS:
                self.error(
                    path, f"size name {name!r} must be an identifier other than cdiv/min/max"
                )
                continue
            if not isinstance(values, list):
                self.error(path, f"sizes.{name} must be a list of integers, e.g. [1, 17, 1000]")
                continue
            if not values:
                self.error(path, f"sizes.{name} is empty: give at least one value")
                continue
            bad = next((v for v in values if not isinstance(v, int) or isinstance(v, bool)), None)
            if bad is not None:
                self.error(path, f"sizes.{name}: {bad!r} is not an integer", _toml_repr(bad))
                continue
            negative = next((v for v in values if v < 0), None)
            if negative is not None:
                self.error(path, f"sizes.{name}: {negative} is negative", str(negative))
                continue
            if length is not None and len(values) != length[1]:
                self.error(
                    path,
                    f"sizes.{name} has {len(values)} values but sizes.{length[0]} has "
                    f"{length[1]}: every size list needs the same length (case i takes value i)",
                )
                continue
            length = length or (name, len(values))
            sizes[name] = list(values)
        return sizes

    def parse_dims(self, key: str, value: object) -> tuple[str, ...] | None:
        if value is None:
            self.error((), f"missing {key} (an integer, an expression, or a list of up to 3)")
            return None
        items = value if isinstance(value, list) else [value]
        if not items:
            self.error((key,), f"{key} is empty: give 1 to 3 dimensions")
            return None
        if len(items) > 3:
            self.error((key,), f"{key} has {len(items)} dimensions; CUDA allows at most 3")
            return None
        dims: list[str] = []
        ok = True
        for n, item in enumerate(items):
            text = _expr_text(item)
            if text is None:
                self.error((key,), f"{key}[{n}] must be an integer or an expression string")
                ok = False
                continue
            if self.expression((key,), text, f"{key}[{n}]") is None:
                ok = False
            dims.append(text)
        return tuple(dims) if ok else None

    def parse_args(
        self, value: object, roles: Mapping[str, Role], template_args: Mapping[str, str]
    ) -> list[ArgSpec]:
        kernel = self.kernel
        if value is None:
            value = {}
        if not isinstance(value, dict):
            self.error(("args",), 'args must be a table: args.NAME = "..."')
            return []
        params = {p.name: p for p in kernel.params}
        signature = ", ".join(p.name for p in kernel.params) or "none"
        for name in value:
            if name not in params:
                self.error(
                    ("args", name),
                    f"args.{name}: {kernel.name} has no parameter {name!r} "
                    f"(parameters: {signature})",
                )
        missing = [p for p in kernel.params if p.name not in value]
        for p in missing:
            if not p.is_pointer and c_type_dtype(resolved_base(p, template_args)) is None:
                self.error(
                    ("args",),
                    f"missing args.{p.name}, and a {p.c_type.strip()} cannot be given in a spec "
                    "(only integer, floating-point and bool scalars can)",
                )
                continue
            example = f'"{roles.get(p.name, "in")} float32[n]"' if p.is_pointer else f'"{p.name}"'
            self.error(("args",), f"missing args.{p.name} (e.g. args.{p.name} = {example})")
        args: list[ArgSpec] = []
        for p in kernel.params:
            if p.name not in value:
                continue
            if p.is_pointer:
                arg = self.parse_pointer(p, value[p.name], roles, template_args)
            else:
                arg = self.parse_scalar(p, value[p.name], template_args)
            if arg is not None:
                args.append(arg)
        return args

    def parse_pointer(
        self,
        param: Param,
        value: object,
        roles: Mapping[str, Role],
        template_args: Mapping[str, str],
    ) -> ArgSpec | None:
        path = ("args", param.name)
        where = f"args.{param.name}"
        if not isinstance(value, str):
            self.error(
                path,
                f'{where} is a pointer: write "[in|out|inout] dtype[count]", e.g. "float32[n]"',
            )
            return None
        m = _POINTER_SPEC.match(value)
        if not m:
            words = value.split()
            if words and "[" not in value and len(words) <= 2:
                problem = "needs an element count"
            else:
                problem = "is not of the form"
            self.error(
                path, f'{where} {problem} "[in|out|inout] dtype[count]", e.g. "float32[n]"', value
            )
            return None
        role_text, dtype, count = m.group(1), m.group(2), m.group(3).strip()
        role: Role
        if role_text is None:
            role = roles.get(param.name, "inout")
        elif role_text not in ROLES:
            self.error(
                path, f"{where}: unknown role {role_text!r} (use in, out or inout)", role_text
            )
            return None
        else:
            role = cast(Role, role_text)
        if role != "in" and param.is_const:
            self.error(
                path, f"{where}: a const pointer cannot be {role!r}; it is only read", role_text
            )
            return None
        if dtype not in DTYPES:
            hint = c_type_dtype(dtype)
            suggestion = f" (did you mean {hint}?)" if hint in DTYPES else ""
            self.error(
                path,
                f"{where}: unknown element type {dtype!r}{suggestion}; "
                f"use one of {', '.join(DTYPES)}",
                dtype,
            )
            return None
        if not count:
            self.error(path, f"{where}: empty element count in {value!r}", value)
            return None
        count_ok = self.expression(path, count, f"{where} count") is not None
        base = resolved_base(param, template_args)
        declared = c_type_dtype(base) or VECTOR_TYPES.get(base, (None, 1))[0]
        if declared is not None and declared != dtype:
            self.warn(
                path,
                f"{where}: element type {dtype} but the signature declares {param.c_type.strip()} "
                f"({base} is {declared})",
                dtype,
            )
        if not count_ok:
            return None
        return ArgSpec(
            param.name, param.index, param.c_type, True, role=role, dtype=dtype, count=count
        )

    def parse_scalar(
        self, param: Param, value: object, template_args: Mapping[str, str]
    ) -> ArgSpec | None:
        path = ("args", param.name)
        where = f"args.{param.name}"
        base = resolved_base(param, template_args)
        dtype = c_type_dtype(base)
        if dtype is None:
            self.error(
                path,
                f"{where}: cannot pass a value of C type {base!r}; supported scalar types are "
                "integer, floating-point, half, __nv_bfloat16 and bool",
            )
            return None
        if isinstance(value, bool):
            value = int(value)
        text = _expr_text(value)
        if text is None:
            self.error(path, f"{where} is a scalar: give a number or an expression string")
            return None
        if _POINTER_SPEC.match(text) and any(d in text for d in DTYPES):
            self.error(
                path,
                f"{where} is a scalar ({param.c_type.strip()}), not a pointer: "
                "give a value or an expression",
                text,
            )
            return None
        if self.expression(path, text, where) is None:
            return None
        return ArgSpec(param.name, param.index, param.c_type, False, dtype=dtype, value=text)

    def parse_inits(self, value: object, args: list[ArgSpec]) -> dict[str, InitSpec]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.error(("init",), 'init must be a table: init.NAME = "uniform(-1, 1)"')
            return {}
        by_name = {a.name: a for a in args}
        params = {p.name: p for p in self.kernel.params}
        inits: dict[str, InitSpec] = {}
        for name, text in value.items():
            path = ("init", name)
            param = params.get(name)
            if param is None:
                self.error(path, f"init.{name}: {self.kernel.name} has no parameter {name!r}")
                continue
            if not param.is_pointer:
                self.error(path, f"init.{name}: only pointer arguments are initialised")
                continue
            if not isinstance(text, str):
                self.error(path, f'init.{name} must be a string such as "uniform(-1, 1)"')
                continue
            init = self.parse_init(path, name, text)
            arg = by_name.get(name)
            if init is None or arg is None:
                continue
            if arg.role == "out":
                self.warn(
                    path, f"init.{name} is ignored: {name} is 'out' (poisoned before each run)"
                )
            dtype = arg.dtype or "float32"
            if dtype not in FLOAT_DTYPES and init.kind in ("uniform", "normal"):
                self.error(
                    path,
                    f"init.{name}: {init.kind}() gives floats but {name} is {dtype}; "
                    "use randint(lo, hi)",
                    text,
                )
                continue
            if init.kind == "randint" and dtype in _INT_RANGES:
                low, high = _INT_RANGES[dtype]
                if init.a < low or init.b > high:
                    self.error(
                        path,
                        f"init.{name}: randint({int(init.a)}, {int(init.b)}) does not fit {dtype}",
                        text,
                    )
                    continue
            inits[name] = init
        return inits

    def parse_init(self, path: tuple[str, ...], name: str, text: str) -> InitSpec | None:
        known = ", ".join(f"{k}()" for k in INIT_KINDS)
        m = _INIT_CALL.match(text)
        if not m or m.group(1) not in INIT_KINDS:
            self.error(path, f"init.{name}: unknown init function {text!r} (known: {known})", text)
            return None
        kind = m.group(1)
        arg_texts = [a for a in split_template_args(m.group(2))] if m.group(2).strip() else []
        if len(arg_texts) != INIT_KINDS[kind]:
            self.error(
                path,
                f"init.{name}: {kind}() takes {INIT_KINDS[kind]} arguments, got {len(arg_texts)}",
                text,
            )
            return None
        values: list[float] = []
        for arg_text in arg_texts:
            try:
                number = parse_expr(arg_text).evaluate({})
            except ExprError as e:
                self.error(path, f"init.{name}: {arg_text!r} is not a number ({e.message})", text)
                return None
            values.append(number)
        a, b = [*values, 0.0, 0.0][:2]
        if kind == "randint" and not all(isinstance(v, int) for v in values):
            self.error(path, f"init.{name}: randint() takes integers", text)
            return None
        if kind == "uniform" and not a < b:
            self.error(path, f"init.{name}: uniform(lo, hi) needs lo < hi", text)
            return None
        if kind == "randint" and not a <= b:  # both ends included
            self.error(path, f"init.{name}: randint(lo, hi) needs lo <= hi", text)
            return None
        if kind == "normal" and b < 0:
            self.error(path, f"init.{name}: normal(mean, std) needs std >= 0", text)
            return None
        return InitSpec(cast(Any, kind), a, b)

    def parse_outputs(self, value: object, args: list[ArgSpec]) -> tuple[str, ...]:
        pointers = {a.name: a for a in args if a.is_pointer}
        if value is None:
            outputs = tuple(a.name for a in args if a.is_pointer and a.role in ("out", "inout"))
            known_pointers = {p.name for p in self.kernel.params if p.is_pointer}
            if not outputs and set(pointers) == known_pointers and not self.has_errors():
                self.error(
                    (), "nothing to compare: no pointer is 'out' or 'inout' (set roles or outputs)"
                )
            return outputs
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.error(("outputs",), 'outputs must be a list of pointer names, e.g. ["out"]')
            return ()
        if not value:
            self.error(("outputs",), "outputs is empty: name at least one pointer to compare")
            return ()
        params = {p.name: p for p in self.kernel.params}
        for name in value:
            param = params.get(name)
            if param is None:
                self.error(
                    ("outputs",),
                    f"outputs: {self.kernel.name} has no parameter {name!r}",
                    f'"{name}"',
                )
            elif not param.is_pointer:
                self.error(("outputs",), f"outputs: {name!r} is not a pointer", f'"{name}"')
            elif name in pointers and pointers[name].role == "in":
                self.error(
                    ("outputs",),
                    f"outputs: {name!r} has role 'in' (make it out or inout)",
                    f'"{name}"',
                )
        if len(set(value)) != len(value):
            self.error(("outputs",), "outputs lists a pointer twice")
        return tuple(value)

    def parse_tolerance(self, doc: Mapping[str, Any], key: str, default: float) -> float:
        if key not in doc:
            return default
        value = doc[key]
        if not _is_number(value):
            self.error((key,), f"{key} must be a number, e.g. {key} = 1e-4")
            return default
        if value < 0:
            self.error((key,), f"{key} must not be negative")
            return default
        return float(value)


def _toml_repr(value: object) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _name_column(text: str, name: str) -> int:
    m = re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", text)
    return m.start() if m else 0


def _default_init(arg: ArgSpec) -> InitSpec:
    if arg.dtype in FLOAT_DTYPES or arg.dtype is None:
        return InitSpec("uniform", -1.0, 1.0)
    return InitSpec("randint", 0, 100)


def default_tolerance(dtype: str) -> tuple[float, float]:
    """(rtol, atol) the contract gives an element type; integers compare exactly."""
    if dtype in ("float16", "bfloat16"):
        return 1e-2, 1e-2
    if dtype in ("float32", "float64"):
        return 1e-4, 1e-5
    return 0.0, 0.0


def _default_tolerances(args: list[ArgSpec], outputs: tuple[str, ...]) -> tuple[float, float]:
    by_name = {a.name: a for a in args}
    tolerances = [default_tolerance(by_name[o].dtype or "") for o in outputs if o in by_name]
    if not tolerances:
        return 1e-4, 1e-5
    return max(t[0] for t in tolerances), max(t[1] for t in tolerances)


# ---------------------------------------------------------------------------------------------
# Cases


def _evaluate_cases(spec: TestSpec) -> tuple[list[Case], list[_Problem]]:
    """Every case of `spec`, and the first problem per key (evaluation-time errors)."""
    constants = template_constants(spec.template_args)
    problems: dict[tuple[str, ...], _Problem] = {}
    cases: list[Case] = []

    def fail(path: tuple[str, ...], message: str, needle: str | None = None) -> None:
        problems.setdefault(path, _Problem(path, message, needle))

    parsed: dict[str, Expr] = {}

    def value(path: tuple[str, ...], text: str, env: Mapping[str, Number], what: str,
              where: str) -> Number | None:  # fmt: skip
        try:
            expr = parsed.get(text) or parse_expr(text)
            parsed[text] = expr
            return expr.evaluate(env)
        except ExprError as e:
            fail(path, f"{what}: {e.message} in {where}", text)
            return None

    def integer(path: tuple[str, ...], text: str, env: Mapping[str, Number], what: str,
                where: str) -> int | None:  # fmt: skip
        result = value(path, text, env, what, where)
        if result is None:
            return None
        if isinstance(result, float):
            if not result.is_integer():
                fail(path, f"{what} = {text!r} is {result}, not an integer, in {where}", text)
                return None
            result = int(result)
        return result

    for index in range(spec.case_count):
        sizes = {name: values[index] for name, values in spec.sizes.items()}
        env: dict[str, Number] = {**constants, **sizes}
        where = f"case {index} ({', '.join(f'{k}={v}' for k, v in sizes.items()) or 'no sizes'})"
        dims: dict[str, tuple[int, int, int]] = {}
        for key, texts, limits in (
            ("grid", spec.grid, _GRID_LIMITS),
            ("block", spec.block, _BLOCK_LIMITS),
        ):
            got: list[int] = []
            for axis, text in enumerate(texts):
                what = f"{key}[{axis}]" if len(texts) > 1 else key
                n = integer((key,), text, env, what, where)
                if n is None:
                    break
                if n < 1:
                    fail(
                        (key,),
                        f"{what} = {text!r} is {n} in {where}; every dimension must be at least 1",
                        text,
                    )
                    break
                if n > limits[axis]:
                    fail(
                        (key,),
                        f"{what} = {text!r} is {n} in {where}; "
                        f"the limit for axis {'xyz'[axis]} is {limits[axis]}",
                        text,
                    )
                    break
                got.append(n)
            else:
                padded = (*got, 1, 1, 1)[:3]
                dims[key] = cast(tuple[int, int, int], padded)
        block = dims.get("block")
        if block is not None and block[0] * block[1] * block[2] > MAX_THREADS_PER_BLOCK:
            fail(
                ("block",),
                f"block has {block[0] * block[1] * block[2]} threads ({block[0]} x {block[1]} x "
                f"{block[2]}) in {where}; the limit is {MAX_THREADS_PER_BLOCK}",
            )
            block = None
        smem = integer(("smem",), spec.smem, env, "smem", where)
        if smem is not None and smem < 0:
            fail(("smem",), f"smem is {smem} in {where}; it must not be negative", spec.smem)
            smem = None
        counts: dict[str, int] = {}
        scalars: dict[str, int | float] = {}
        ok = True
        for arg in spec.args:
            path = ("args", arg.name)
            if arg.is_pointer:
                count = integer(path, arg.count or "", env, f"args.{arg.name} count", where)
                if count is not None and count < 0:
                    fail(
                        path,
                        f"args.{arg.name} count {arg.count!r} is {count} in {where}; "
                        "it must not be negative",
                        arg.count,
                    )
                    count = None
                if count is None:
                    ok = False
                else:
                    counts[arg.name] = count
                continue
            scalar = _scalar_value(arg, env, where, fail, value)
            if scalar is None:
                ok = False
            else:
                scalars[arg.name] = scalar
        flops: Number | None = None
        if spec.flops is not None:
            flops = value(("flops",), spec.flops, env, "flops", where)
            if flops is not None and flops < 0:
                fail(
                    ("flops",), f"flops is {flops} in {where}; it must not be negative", spec.flops
                )
                flops = None
            if flops is None:
                ok = False
        grid = dims.get("grid")
        if grid is None or block is None or smem is None or not ok:
            continue
        cases.append(Case(index, sizes, grid, block, smem, counts, scalars, flops))
    return cases, list(problems.values())


def _scalar_value(
    arg: ArgSpec, env: Mapping[str, Number], where: str, fail: Any, value: Any
) -> int | float | None:
    path = ("args", arg.name)
    text = arg.value or ""
    result = value(path, text, env, f"args.{arg.name}", where)
    if result is None:
        return None
    dtype = arg.dtype or "float32"
    if dtype in FLOAT_DTYPES:
        return float(result)
    if isinstance(result, float):
        if not result.is_integer():
            fail(
                path,
                f"args.{arg.name} = {text!r} is {result} in {where}, "
                f"but {arg.c_type.strip()} needs an integer",
                text,
            )
            return None
        result = int(result)
    low, high = _INT_RANGES.get(dtype, (-(2**63), 2**63 - 1))
    if not low <= result <= high:
        fail(
            path,
            f"args.{arg.name} = {text!r} is {result} in {where}, "
            f"outside the range of {arg.c_type.strip()} ({dtype})",
            text,
        )
        return None
    return result


# ---------------------------------------------------------------------------------------------
# Entry points


def parse_spec(kernel: Kernel, source: str) -> tuple[TestSpec | None, list[SpecError]]:
    """The kernel's spec (from `kernel.spec`) and the problems found in it.

    `source` is the whole file text (roles of unprefixed pointers are decided from the body).
    Returns (None, []) when the kernel has no spec block; spec is None whenever it is unusable
    (any problem of severity "error"; warnings leave it usable).
    """
    block = kernel.spec
    if block is None:
        return None, []
    locator = _Locator(block)
    try:
        doc = tomllib.loads(block.toml)
    except tomllib.TOMLDecodeError as e:
        return None, [_toml_error(locator, e)]
    parser = _SpecParser(kernel, source)
    try:
        spec = parser.parse(doc)
    except RecursionError:  # absurdly nested input: report, never raise
        return None, [SpecError(locator.marker(), "spec is nested too deeply")]
    errors = [_to_error(locator, p) for p in parser.problems]
    errors.sort(key=lambda e: (e.span.start, e.severity != "error"))
    if any(e.severity == "error" for e in errors):
        spec = None
    return spec, errors


def _to_error(locator: _Locator, problem: _Problem) -> SpecError:
    path = problem.path
    if not path:
        span = locator.marker()
    elif problem.needle is not None:
        span = locator.value(path, problem.needle, problem.column)
    else:
        span = locator.key(path)
    return SpecError(span, problem.message, problem.severity)
