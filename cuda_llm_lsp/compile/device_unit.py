"""Turn a `.cu` file into the translation unit NVRTC compiles: device code only.

Host-only code (functions that are not `__global__`/`__device__`, `main`, `<<<...>>>` launch
sites, host variables, declarations that need host-only headers) is blanked out with spaces so
every line keeps its number and diagnostics map 1:1 onto the user's file. `#include "..."` is
resolved relative to the file, then the configured include paths; found headers get the same
treatment and travel to NVRTC in memory. What may be read (regular files outside /proc, /sys
and /dev, of bounded size) is `include_reads`'s rule; a refused header's line is left out.
Standard headers NVRTC lacks are served by small device-side stand-ins
(`compile/stub_headers/`); host-only ones are dropped silently. Structure comes from
tree-sitter-cuda; regexes only read single `#include` lines and words.

The unit is built from `normalized(text)` (lone-CR line breaks as `\n`, a BOM as a space) so
NVRTC counts lines as the editor does, and the user's `#line` directives are blanked: NVRTC
would otherwise report errors at the numbers they set, not at the lines the user sees.

This module is the door and reads as the pipeline, in order; the stages live in `compile.unit`
(`includes`, `blanking`, `walker`, `nodes`, `masks`, `ranges`, `known`, `common`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import tree_sitter

from cuda_llm_lsp.compile import headers as std_headers
from cuda_llm_lsp.compile import include_reads, std_names
from cuda_llm_lsp.compile.types import DeviceUnit, Diagnostic, IncludeProblem
from cuda_llm_lsp.compile.unit.blanking import Blanked, blank_host_code
from cuda_llm_lsp.compile.unit.common import ATTRIBUTE_KINDS
from cuda_llm_lsp.compile.unit.includes import (
    IncludeState,
    answer_refused_probes,
    drop_unused_constants,
    note_include_macros,
    resolve_include,
    respell_includes,
)
from cuda_llm_lsp.compile.unit.masks import blank_line_directives, for_tree_sitter, parse_masked
from cuda_llm_lsp.source.kernels import kernel_macros
from cuda_llm_lsp.source.text import normalized

_Parsed = tuple[tree_sitter.Tree, bytes]  # a tree and the bytes it was read from


# The file name NVRTC gets comes back in its log as `NAME(LINE): error: ...`: a line break or
# other control character (`a\nb.cu`), or a `(9): ` of its own, would put the problem on another
# line or file. Such a file is compiled as `input.cu`, matched back the same way.
_UNSAFE_UNIT_NAME = re.compile(r"[\x00-\x1f\x7f-\x9f]|\(\d+\): ")


def build_device_unit(
    text: str,
    path: Path | None = None,
    include_paths: Sequence[str] = (),
    parsed: tuple[tree_sitter.Tree, bytes] | None = None,
) -> DeviceUnit:
    """The device-only unit for `text` (the contents of `path`, which may not exist on disk).

    `parsed`: `kernels.parse_tree(text)` when the caller already has it (one parse per edit).
    The pipeline, in order: the file blanked (`unit.blanking`, `unit.walker`), its includes
    read and their headers blanked (`unit.includes`), the file blanked again where the headers
    taught it macros, then the text finished for NVRTC.
    """
    text = normalized(text)
    if parsed is None or "\0" in text or for_tree_sitter(text) != text:
        parsed = parse_masked(text)  # masks for tree-sitter that the editor's own parse lacks
    project, toolkits = std_headers.split_include_dirs(include_paths)
    include_dirs = _include_dirs(path, project)
    state = IncludeState(configured=(*project, *toolkits), toolkits=toolkits)
    own = Path(path).resolve() if path is not None else None
    if own is not None:
        state.seen.add(own)
    first, parsed = _blank_main(text, parsed)
    read = _read_includes(first, text, own, state)
    state.reblank_headers()
    main = _blank_main_again(text, parsed, first, state)
    unit_text = _finish_text(text, main, read, own, state)
    state.register_aliases()
    _add_std_names(unit_text, state)
    return DeviceUnit(
        text=unit_text,
        name=_nvrtc_name(path, state),
        include_dirs=include_dirs,
        toolkit_dirs=include_reads.disk_search_dirs(toolkits),
        headers=dict(state.headers),
        include_lines=read.include_lines,
        problems=(*read.problems, *_skipped_notes(main)),
        external_headers=dict(state.external_headers),
        # of the object-like macros the walker read (the file's own and those of the headers
        # `include_reads` let it read; none is executed)
        kernel_macros=kernel_macros({**state.objects, **main.objects}),
    )


@dataclass
class _Includes:
    """What reading the main file's `#include` lines gave, for the lines and the problems."""

    dropped: set[int] = field(default_factory=set)  # rows of #include lines left out of the unit
    problems: list[IncludeProblem] = field(default_factory=list)
    include_lines: dict[str, int] = field(default_factory=dict)  # header name -> its row
    respelled: list[tuple[int, str, str]] = field(default_factory=list)  # `respell_includes`


def _blank_main(text: str, parsed: _Parsed) -> tuple[Blanked, _Parsed]:
    """The main file blanked with no macro known yet, and the tree it was blanked from."""
    main = blank_host_code(text, {}, parsed, {})
    if any(k in ATTRIBUTE_KINDS for k in main.defined.values()):
        # the file's own `#define API extern` read before its prototypes: parsed again
        parsed = parse_masked(text, dict(main.defined))
        main = blank_host_code(text, dict(main.defined), parsed, {})
    return main, parsed


def _read_includes(main: Blanked, text: str, own: Path | None, state: IncludeState) -> _Includes:
    """Each `#include` of the main file resolved, its headers read and blanked into `state`."""
    state.note_decltype(main)
    note_include_macros(text, state)
    read = _Includes()
    for line_no, name, quoted, span, conditional in main.includes:
        base = own.parent if own else None
        state.conditional = conditional
        kept, nested, spelled = resolve_include(name, quoted, base, state, depth=1, where="")
        if spelled != name:
            read.respelled.append((line_no, name, spelled))
        if kept:
            read.include_lines.setdefault(name, line_no)
            for header_name in nested:
                read.include_lines.setdefault(header_name, line_no)
        else:
            read.dropped.add(line_no)
        for message, severity in state.take_problems():
            read.problems.append(IncludeProblem(span, message, severity))
    return read


def _blank_main_again(text: str, parsed: _Parsed, first: Blanked, state: IncludeState) -> Blanked:
    """The main file blanked again with what its headers taught, where that can matter."""
    # HOST_DEVICE-style macros from user headers, or a namespace-scope invocation of a macro
    # that a header defines: the same tree, walked again with what the headers taught
    # (or an explicit instantiation of a host template a header defines: mamba's
    # `template void selective_scan_fwd_cuda<float, float>(...);`)
    if not (
        set(state.macros) - set(first.defined)
        or first.invoked & set(state.bodies)
        or first.instantiated & state.host_templates
    ):
        return first
    if any(k in ATTRIBUTE_KINDS and n in text for n, k in state.macros.items()):
        parsed = parse_masked(text, state.macros)  # `GGML_API void f();` in the file itself
    hosts = frozenset(state.host_templates)
    return blank_host_code(text, state.macros, parsed, state.bodies, hosts)


def _finish_text(
    text: str, main: Blanked, read: _Includes, own: Path | None, state: IncludeState
) -> str:
    """The main file's unit text: includes respelled or left out, `#line` directives and
    refused `__has_include` probes blanked, constants no kept code uses dropped."""
    lines = respell_includes(main.text.split("\n"), read.respelled)
    for row in read.dropped:
        lines[row] = " " * len(lines[row])
    unit_text = blank_line_directives("\n".join(lines))
    unit_text = answer_refused_probes(unit_text, own.parent if own else None, state.configured)
    return drop_unused_constants(unit_text, text, main.constants, state)


def _add_std_names(unit_text: str, state: IncludeState) -> None:
    """The header of the `std::` names device code uses (`std_names`), where any is used."""
    own_texts = [unit_text, *state.headers.values()]
    wanted = [n for n in std_names.used(own_texts) if not std_names.declared_in_std(n, own_texts)]
    libcuxx = std_names.used_from_libcuxx(own_texts)  # a no-op where already included
    if wanted or libcuxx:  # `std::min` in device code: nvcc --expt-relaxed-constexpr's
        state.headers[std_names.HEADER] = std_names.header_text(
            wanted,
            libcuxx,
            lambda h: std_headers.find_system_header(h, state.configured) is not None,
        )


def _skipped_notes(main: Blanked) -> list[IncludeProblem]:
    """A note on each item left out for naming a dropped library (`known.DROPPED_LIBRARIES`)."""
    notes: list[IncludeProblem] = []
    for span, named, library in main.skipped:
        uses = library if named == library else f"{named}, which needs {library}"
        message = (
            f"not checked as you type: it uses {uses} (NVRTC cannot compile {library}'s "
            "headers; the nvcc check, on open and save, covers it)"
        )
        notes.append(IncludeProblem(span, message, "information"))
    return notes


def _nvrtc_name(path: Path | None, state: IncludeState) -> str:
    """The file name NVRTC is given (`_UNSAFE_UNIT_NAME`), distinct from every header's."""
    name = Path(path).name if path is not None else "input.cu"
    if _UNSAFE_UNIT_NAME.search(name):  # its log lines would not parse back where they belong
        name = "input.cu"
    if name in state.headers:
        name = f"cuda_llm_main_{name}"
    return name


def _include_dirs(path: Path | None, project: Sequence[str]) -> tuple[str, ...]:
    """The -I directories NVRTC searches on disk itself: the file's own directory, then the
    project's, without any untrusted workspace folder (`include_reads`)."""
    include_dirs: list[str] = []
    if path is not None:
        include_dirs.append(str(Path(path).resolve().parent))
    include_dirs.extend(p for p in project if p not in include_dirs)
    return tuple(include_reads.disk_search_dirs(include_dirs))


_CANNOT_FIND = re.compile(r"^cannot find <(?P<name>[^>\n]+)>")
_UNDECLARED = re.compile(r'"(?P<name>[A-Za-z_]\w*)" is undefined|"(?P<type>[A-Za-z_]\w*)" is not a')


def fold_missing_library_errors(
    diagnostics: Iterable[Diagnostic], unit: DeviceUnit
) -> tuple[Diagnostic, ...]:
    """The errors that only say a missing library header's names are undeclared (`identifier
    "cublasHandle_t" is undefined` after `<cublas_v2.h>` was found nowhere) as warnings that
    point at the include: one cause, already warned about with the package that brings it, must
    not turn the file red in nine places."""
    missing: dict[str, tuple[str, int]] = {}  # name prefix -> (header, its 1-based line)
    for problem in unit.problems:
        found = _CANNOT_FIND.match(problem.message)
        stem = std_headers.library_stem(found["name"]) if found else None
        if found and stem:
            missing.setdefault(stem, (found["name"], problem.span.start.line + 1))
    folded: list[Diagnostic] = []
    for d in diagnostics:
        named = _UNDECLARED.search(d.message) if d.severity == "error" and d.file is None else None
        name = (named["name"] or named["type"]).lower() if named else ""
        owner = next((v for stem, v in missing.items() if name and name.startswith(stem)), None)
        if owner is not None:
            note = f" (a name of <{owner[0]}>, which was not found: see line {owner[1]})"
            d = replace(d, severity="warning", message=d.message + note)
        folded.append(d)
    return tuple(folded)
