"""One file's text with its host-only code blanked: the walker's byte ranges applied, then
its `#include` lines read back (`Blanked`).

Used by the door for the main file and by `includes` for each header, so that both get the same
treatment; the walker decides, this module turns its verdicts into text."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import tree_sitter

from cuda_llm_lsp.compile import directives
from cuda_llm_lsp.compile.unit.common import COMPUTED, UNRESOLVED
from cuda_llm_lsp.compile.unit.ranges import Constant, apply_blanks, constant_ranges
from cuda_llm_lsp.compile.unit.walker import Walker
from cuda_llm_lsp.source.text import Span

_INCLUDE = re.compile(r'^\s*#\s*include\s*(?:"(?P<quoted>[^"\n]*)"|<(?P<system>[^>\n]*)>)')
# `#include MACRO`: the file it names is known only after macro expansion
_COMPUTED_INCLUDE = re.compile(r"^\s*#\s*include\s+(?P<what>[A-Za-z_]\w*.*)$")
# `decltype(` and the names called inside one: `ns::f<T>(`, `f(`
_DECLTYPE = re.compile(rb"\bdecltype\s*\(")
_CALLED = re.compile(rb"([A-Za-z_]\w*)\s*[<(]")


@dataclass(frozen=True)
class Blanked:
    """One file with its host-only code blanked, and what the rest of the unit needs from it."""

    text: str
    includes: list[tuple[int, str, bool, Span, bool]]  # line, name, quoted, span, conditional
    defined: dict[str, str]  # execution-space macros it defines: name -> "device" | "host"...
    bodies: dict[str, str]  # the macros it defines: name -> replacement text
    constants: list[Constant]  # kept for now; dropped once the whole unit shows them unused
    invoked: frozenset[str]  # namespace-scope invocations of macros it could not judge
    skipped: list[tuple[Span, str, str]]  # items left out: span, the name, its library
    host_templates: frozenset[str] = frozenset()  # host function templates it blanked
    decltype_calls: frozenset[str] = frozenset()  # names called inside its `decltype(...)`
    instantiated: frozenset[str] = frozenset()  # explicit instantiations kept: `template f<int>`
    objects: dict[str, str] = field(default_factory=dict)  # its object-like macros' bodies


def blank_host_code(
    text: str,
    macros: dict[str, str],
    parsed: tuple[tree_sitter.Tree, bytes],
    bodies: dict[str, str],
    host_templates: frozenset[str] = frozenset(),
) -> Blanked:
    """`text` with host-only code blanked; `macros` are the execution-space macros and `bodies`
    the replacement texts known from headers; `parsed` is `parse_masked(text)`; `host_templates`:
    host function templates the headers define (their explicit instantiations here go too)."""
    text = text.replace("\0", " ")
    tree, data = parsed
    walker = Walker(data, macros, bodies)
    walker.host_functions |= host_templates
    walker.walk(tree.root_node)
    walker.blank_instantiation_macros()
    ranges = walker.ranges
    blanked = _unannotated_lambdas(apply_blanks(text, data, ranges))
    includes: list[tuple[int, str, bool, Span, bool]] = []
    lines = blanked.split("\n")
    for row in walker.include_rows:
        if row >= len(lines):
            continue
        match = _INCLUDE.match(lines[row])
        if match is None:
            computed = _COMPUTED_INCLUDE.match(lines[row])
            if computed is not None:  # `#include MACRO`: `resolve_include` reports and drops it
                span = Span.of(row, computed.start("what"), row, len(lines[row].rstrip()))
                what = COMPUTED + computed.group("what").strip()
                includes.append((row, what, False, span, row in walker.conditional_rows))
            continue
        quoted = match.group("quoted") is not None
        name = (match.group("quoted") if quoted else match.group("system")) or ""
        group = "quoted" if quoted else "system"
        span = Span.of(row, match.start(group) - 1, row, match.end(group) + 1)
        includes.append((row, name.strip(), quoted, span, row in walker.conditional_rows))
    blanked = _blank_unresolved_includes(blanked, includes)
    constants = constant_ranges(walker.constants, text, data)
    return Blanked(
        blanked,
        includes,
        walker.defined,
        walker.own_bodies,
        constants,
        frozenset(walker.invoked),
        walker.skipped,
        frozenset(walker.host_templates),
        _decltype_calls(data),
        frozenset(walker.instantiated),
        walker.own_objects,
    )


def _blank_unresolved_includes(text: str, includes: list[tuple[int, str, bool, Span, bool]]) -> str:
    """`text` with every include directive the preprocessor would see on a row `includes` does
    not hold blanked, each added to `includes` as `UNRESOLVED` (reported, never read): NVRTC
    would open what it names unchecked (`compile.directives`)."""
    handled = {row for row, *_ in includes}
    for directive in directives.unresolved(text, handled):
        line_start = text.rfind("\n", 0, directive.start) + 1
        line_end = text.find("\n", directive.start)
        column = directive.start - line_start
        end = len(text) if line_end < 0 else line_end
        plain = _INCLUDE.match(text[line_start:end])
        if plain is not None and directive.first_row == directive.last_row:
            # a plain one the walker does not visit (in a function body, an initializer's
            # braces): read through the same checks as any other include, never left out
            quoted = plain.group("quoted") is not None
            group = "quoted" if quoted else "system"
            name = (plain.group(group) or "").strip()
            where = Span.of(
                directive.first_row,
                plain.start(group) - 1,
                directive.first_row,
                plain.end(group) + 1,
            )
            includes.append((directive.first_row, name, quoted, where, False))
            continue
        span = Span.of(directive.first_row, column, directive.first_row, end - line_start)
        text = directives.blank(text, directive)
        includes.append((directive.first_row, UNRESOLVED + directive.keyword, False, span, False))
    return text


# `[=] __device__ (int i) {...}`: an execution space on a lambda, after its captures
_LAMBDA_SPACE = re.compile(
    r"(?<=\])(\s*)(__host__\s+__device__|__device__\s+__host__|__device__|__host__)"
    r"(?=\s*(?:\(|\{|mutable\b|->))"
)


def _unannotated_lambdas(text: str) -> str:
    """`text` with lambdas' `__device__` / `__host__ __device__` made spaces (same length).

    nvcc's `--extended-lambda` takes them; NVRTC refuses any ("annotation on lambda is not
    allowed in JIT mode": ThunderKittens' `[] __device__ (int row, int col, auto val)`). A
    lambda in device code is device code without one."""
    if "__device__" not in text and "__host__" not in text:
        return text
    return _LAMBDA_SPACE.sub(lambda m: m.group(1) + " " * len(m.group(2)), text)


def _decltype_calls(data: bytes) -> frozenset[str]:
    """The names called inside `data`'s `decltype(...)`s (`f` of `decltype(ns::f<T>(x))`)."""
    if b"decltype" not in data:
        return frozenset()
    names: set[str] = set()
    for match in _DECLTYPE.finditer(data):
        depth, end = 1, match.end()
        while end < len(data) and depth:
            depth += {40: 1, 41: -1}.get(data[end], 0)
            end += 1
        names.update(n.decode() for n in _CALLED.findall(data, match.end(), end))
    return frozenset(names)
