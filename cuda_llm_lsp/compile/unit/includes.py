"""Reading and expanding a device unit's `#include`s, with their safety checks.

Each `#include` is resolved (the file's directory, the configured paths, the toolkit), checked
by `include_reads` (what may be read, how much) and, for a user header, blanked like the main
file (`blanking.blank_host_code`) and registered in memory under one name. `IncludeState`
carries what the headers taught (macros, constants, names) to the rest of the pipeline."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from cuda_llm_lsp.compile import directives, include_reads, static_overloads, std_redeclarations
from cuda_llm_lsp.compile import headers as std_headers
from cuda_llm_lsp.compile.nvcc_path import find_nvcc
from cuda_llm_lsp.compile.unit.blanking import Blanked, blank_host_code
from cuda_llm_lsp.compile.unit.common import (
    ATTRIBUTE_KINDS,
    COMPUTED,
    DROPPED,
    EXTENDS,
    READ_IN_DECLTYPE,
    UNRESOLVED,
    WORD,
)
from cuda_llm_lsp.compile.unit.known import DROPPED_LIBRARIES
from cuda_llm_lsp.compile.unit.masks import blank_line_directives, parse_masked
from cuda_llm_lsp.compile.unit.ranges import Constant, blank_chars, rebased
from cuda_llm_lsp.source.text import normalized

MAX_INCLUDE_DEPTH = 16
CCCL_PREFIX = "cccl/"  # CCCL's directory in a CUDA 13 toolkit's include directory
TYPE_TRAITS = "type_traits"  # the stand-in that a host header bringing <type_traits> reads
# `#define CUDA_STD_HEADER(header) <cuda/std/header>` (CUTLASS): a function-like macro that
# names a system header from its argument; `#include CUDA_STD_HEADER(utility)` is expanded with it
_INCLUDE_MACRO = re.compile(
    r"^[ \t]*#[ \t]*define[ \t]+(?P<name>[A-Za-z_]\w*)\([ \t]*(?P<param>[A-Za-z_]\w*)[ \t]*\)"
    r"[ \t]*<(?P<path>[\w./+-]*)>[ \t]*$",
    re.MULTILINE,
)
_MACRO_CALL = re.compile(r"(?P<name>[A-Za-z_]\w*)[ \t]*\([ \t]*(?P<arg>[\w./+-]+)[ \t]*\)\s*")


@dataclass
class IncludeState:
    configured: tuple[str, ...]  # a project's include directories, then toolkits'
    toolkits: tuple[str, ...] = ()  # CUDA toolkits' own among them (`split_include_dirs`)
    headers: dict[str, str] = field(default_factory=dict)
    seen: set[Path] = field(default_factory=set)
    pending: list[tuple[str, Literal["error", "warning"]]] = field(default_factory=list)
    # execution-space macros: name -> "device" | "host" | "constexpr" (a macro standing for
    # `constexpr`, such as CUTLASS_CONSTEXPR_IF_CXX17: its functions are judged as constexpr ones)
    # or HIDDEN_FROM_NVRTC: not a macro, a class only nvcc sees (`Walker._note_hidden_class`)
    macros: dict[str, str] = field(default_factory=dict)
    external_headers: dict[str, tuple[int, int]] = field(default_factory=dict)
    refused: dict[Path, str] = field(default_factory=dict)  # refused headers -> why
    # name -> its definitions' (param, path), the last one last (`#if` alternatives: CUTLASS's
    # `<cccl/cuda/std/header>` for CUDA 13, `<cuda/std/header>` before)
    include_macros: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    budget: include_reads.IncludeBudget = field(default_factory=include_reads.IncludeBudget.fresh)
    conditional: bool = False  # the #include being resolved is under a platform test
    names: dict[Path, str] = field(default_factory=dict)  # resolved header -> first spelling
    owners: dict[str, Path] = field(default_factory=dict)  # unit name -> the file it names
    aliases: list[tuple[str, Path]] = field(default_factory=list)  # later spellings
    # header name -> (its text, the rows of its include lines left out, the execution-space
    # macros known when it was blanked): `reblank_headers` walks it again once more are known
    blanked: dict[str, tuple[str, frozenset[int], frozenset[str]]] = field(default_factory=dict)
    # header name -> its `#include "x.h"` lines respelled (row, spelling, unit name)
    respelled: dict[str, list[tuple[int, str, str]]] = field(default_factory=dict)
    bodies: dict[str, str] = field(default_factory=dict)  # user macros: name -> replacement
    objects: dict[str, str] = field(default_factory=dict)  # those of them that are object-like
    constants: dict[str, list[Constant]] = field(default_factory=dict)  # header -> its own
    host_templates: set[str] = field(default_factory=set)  # host function templates blanked
    # directories of host-library headers read (cuBLAS's): their `#include "driver_types.h"`
    # is NVRTC's own toolkit header, not the library directory's copy (`_library_header`)
    library_dirs: set[Path] = field(default_factory=set)
    mismatches: set[str] = field(default_factory=set)  # libraries whose mismatch was said
    decltype_calls: set[str] = field(default_factory=set)  # names called in `decltype(...)`

    def note_decltype(self, blanked: Blanked) -> None:
        """A host function template that a `decltype(...)` anywhere in the unit calls becomes
        a READ_IN_DECLTYPE name: the headers that blanked it are walked again, keeping it."""
        self.host_templates |= blanked.host_templates
        self.decltype_calls |= blanked.decltype_calls
        for name in blanked.host_templates & self.decltype_calls | (
            blanked.decltype_calls & self.host_templates
        ):
            self.macros.setdefault(name, READ_IN_DECLTYPE)

    def register_aliases(self) -> None:
        """Give every later spelling of a header one line including its first spelling.

        nvcc reads a `#pragma once` header once whatever the spelling (it is by file); NVRTC
        keys in-memory headers by name, so the text under two names was read twice (DeepSpeed's
        memory_access_utils.h: "enum has already been defined"). The angle form finds the first
        spelling by name, never relative to the alias (which could be itself)."""
        for alias, resolved in self.aliases:
            first = self.names.get(resolved)
            if first is not None and alias not in self.headers and alias != first:
                self.headers[alias] = f"#include <{first}>\n"

    def take_problems(self) -> list[tuple[str, Literal["error", "warning"]]]:
        problems, self.pending = self.pending, []
        return problems

    def reblank_headers(self) -> None:
        """Blank again each header that uses an execution-space macro defined after it was
        blanked. A header is blanked before its own includes are read (they come out of the
        blanking), so `CUTLASS_HOST_DEVICE` from a header it includes, or one that an include
        cycle reaches later, was unknown then: its functions looked host-only and were cut.
        Names a pass learns that items need a dropped library, or extend its namespace, can
        matter to headers blanked before them in that pass: a pass more then (CuPy's)."""
        for _ in range(3):
            learned = len(self.macros)
            self._reblank_pass()
            if len(self.macros) == learned:
                return

    def _reblank_pass(self) -> None:
        for name, (text, dropped, known) in self.blanked.items():
            later = [m for m in self.macros if m not in known and m in text]
            if not any(re.search(rf"\b{re.escape(m)}\b", text) for m in later):
                continue
            parsed = parse_masked(text, self.macros)
            blanked = blank_host_code(text, self.macros, parsed, self.bodies)
            for defined, kind in blanked.defined.items():  # items it left out, for later files
                if kind.startswith((DROPPED, EXTENDS)):
                    self.macros.setdefault(defined, kind)
            if blanked.constants:  # the same text: its constants where they were, or more
                self.constants[name] = blanked.constants
            lines = respell_includes(blanked.text.split("\n"), self.respelled.get(name, []))
            for row in dropped:
                lines[row] = " " * len(lines[row])
            self.headers[name] = blank_line_directives("\n".join(lines))


def _resolve_quoted(name: str, base: Path | None, configured: Iterable[str]) -> Path | None:
    """The file `#include "name"` names. Any kind of file counts (a FIFO, a device): the
    reader refuses what is not a regular file with a message, and the line is left out, so
    that NVRTC does not go and read it either."""
    candidates = [base / name] if base is not None else []
    candidates.extend(Path(d) / name for d in configured)
    for candidate in candidates:
        try:
            if candidate.exists() and not candidate.is_dir():
                return candidate.resolve()
        except (OSError, ValueError):
            continue
    return None


def _unit_name(name: str, base: Path | None, configured: Iterable[str]) -> str:
    """The name a `#include "name"` found next to its including file is registered under.

    NVRTC knows in-memory headers by name only: CUTLASS's `#include "mma.h"` inside
    `cutlass/arch/` registered as `mma.h` would shadow the toolkit's `<mma.h>` (read by
    `<mma.h>`'s users) and be read a second time under `cutlass/arch/mma.h`. Its path relative
    to the configured include directory holding it names it as every other spelling does.
    """
    try:
        if base is None or not (base / name).exists():
            return name
    except (OSError, ValueError):
        return name
    here = Path(os.path.normpath(base / name))  # `base` is resolved: so is a directory
    for directory in configured:
        try:
            relative = here.relative_to(Path(directory).resolve())
        except (OSError, ValueError):
            continue
        return relative.as_posix()
    return name


def respell_includes(lines: list[str], respelled: list[tuple[int, str, str]]) -> list[str]:
    """`lines` with each `#include "name"` of `respelled` naming its header's unit name."""
    for row, name, spelled in respelled:
        if f'"{name}"' in lines[row]:
            lines[row] = lines[row].replace(f'"{name}"', f'"{spelled}"', 1)
        else:
            lines[row] = lines[row].replace(f"<{name}>", f"<{spelled}>", 1)
    return lines


def _distinct_name(name: str, found: Path, state: IncludeState) -> str:
    """`name`, or, where another file is registered under it, a name only `found` has.

    ThunderKittens has `include/common/common.cuh` and `prototype/common/common.cuh`, each
    `"common/common.cuh"` from beside it; NVRTC knows in-memory headers by name, so the second
    was taken for the first (was: its concepts undefined). Its path from another include
    directory names it, else its absolute path."""
    owner = state.owners.get(name)
    if owner is None or owner == found:
        return name
    for directory in state.configured:
        try:
            relative = found.relative_to(Path(directory).resolve()).as_posix()
        except (OSError, ValueError):
            continue
        if state.owners.get(relative, found) == found:
            return relative
    return found.as_posix()


def _system_include(name: str, state: IncludeState) -> bool | None:
    """`#include <name>` (or a quoted name found nowhere near the file, as nvcc searches it).

    True: keep (a stand-in or a header NVRTC can find); False: host-only, drop; None: not found.
    One found in a configured path is noted in `state.external_headers` (for the cache key).
    """
    if name in std_headers.STUBBED:
        return True
    if std_headers.cub_host_algorithm(name):
        state.headers.setdefault(name, std_headers.CUB_HOST_ALGORITHM_STAND_IN)
        return True
    if std_headers.is_host_only(name):
        for prefix, namespace in DROPPED_LIBRARIES.items():
            if name.startswith(prefix):
                state.macros[namespace] = DROPPED + namespace
        return False
    found = std_headers.find_system_header(name, state.configured)
    if found is None and name.startswith(CCCL_PREFIX):
        # `<cccl/cuda/std/cstdint>` (CUTLASS for CUDA 13): where a CUDA 13 toolkit's include
        # directory holds CCCL; NVRTC's CCCL may sit elsewhere (a wheel's, the nvcc's toolkit's)
        inner = name[len(CCCL_PREFIX) :]
        if std_headers.find_system_header(inner, state.configured) is not None:
            state.headers.setdefault(name, f"#include <{inner}>\n")
            return True
    if found is None:
        return None
    borrowed = std_headers.borrowed_include_dirs()  # (none where NVRTC's wheels have all)
    if borrowed and "CCCL" not in state.mismatches and any(map(found.is_relative_to, borrowed)):
        mismatch = std_headers.borrowed_mismatch()
        if mismatch is not None:
            state.mismatches.add("CCCL")
            state.pending.append((mismatch, "warning"))
    try:  # NVRTC reads it itself: the same rules as for the headers we read
        include_reads.check_header(found)
    except include_reads.IncludeRefused as refused:
        state.pending.append((f'include file "{name}" not read: {refused}', "error"))
        return False
    if any(found.is_relative_to(d) for d in state.configured):
        try:
            stat = found.stat()
            state.external_headers[str(found)] = (stat.st_mtime_ns, stat.st_size)
        except OSError:
            pass
    return True


def resolve_include(
    name: str, quoted: bool, base: Path | None, state: IncludeState, depth: int, where: str
) -> tuple[bool, list[str], str]:
    """Resolve one `#include` line: whether it stays, the user headers it loads, and the name
    the line must spell (`_unit_name`).

    Problems go to `state.pending`; `where` is ' (included from "h" line n)' inside headers.
    A computed include (`#include MACRO`) is left out with a warning: NVRTC would open
    whatever path the macros spell, unchecked (`include_reads`).
    """
    if name.startswith((UNRESOLVED, COMPUTED)):
        return _spelled_otherwise(name, base, state, depth, where)
    if std_headers.is_torch(name) and (not quoted or _resolve_quoted(name, base, ()) is None):
        state.headers.setdefault(name, std_headers.TORCH_STAND_IN)  # not a project's own file
        return True, [], name
    if not quoted and name in std_headers.BRINGS_TYPE_TRAITS:
        # what `<vector>` brings under nvcc: an in-memory `vector` reading the stand-in
        state.headers.setdefault(name, f"#include <{TYPE_TRAITS}>\n")
        return True, [], name
    if (
        quoted
        and base is not None
        and base in state.library_dirs
        and std_headers.host_library(name) is None
        and std_headers.in_toolkit(name)
    ):  # cuBLAS's `"driver_types.h"`: NVRTC's own, whatever version sits beside cuBLAS
        return bool(_system_include(name, state)), [], name
    library = std_headers.host_library(name)
    if (
        library is not None
        and _resolve_quoted(name, base if quoted else None, state.configured) is None
    ):
        found = std_headers.find_library_header(name, _nvcc_include_dirs())
        if found is not None:
            return _library_header(name, library, found.resolve(), state, depth)
    if quoted:
        found = _resolve_quoted(name, base, state.configured)
        if found is not None:
            spelled = _distinct_name(_unit_name(name, base, state.configured), found, state)
            loaded = _load_header(spelled, found, state, depth)
            return loaded is not None, loaded or [], spelled
    elif name not in std_headers.STUBBED and not std_headers.is_host_only(name):
        # a project header reached through -I: blanked like a "..." one (nvcc searches -I
        # before the system directories for <...> too); NVRTC would read it raw, host code
        # and host includes and all. A CCCL header there (a newer libcu++ or CUB than the
        # toolkit's) is NVRTC's to read as it is.
        found = _resolve_quoted(name, None, state.configured)
        if found is not None and library is not None:
            return _library_header(name, library, found, state, depth)
        if found is not None and not _read_by_nvrtc(name, found, state):
            spelled = _distinct_name(name, found, state)
            loaded = _load_header(spelled, found, state, depth)
            return loaded is not None, loaded or [], spelled
    return _system_or_missing(name, quoted, state, where)


def _spelled_otherwise(
    name: str, base: Path | None, state: IncludeState, depth: int, where: str
) -> tuple[bool, list[str], str]:
    """An include the walker could not read as `#include "file"` or `<file>` on one line
    (`UNRESOLVED`), or one of a macro (`COMPUTED`): followed only where a known include macro
    names the file, else reported (`resolve_include`)."""
    if name.startswith(UNRESOLVED):
        keyword = name[len(UNRESOLVED) :]
        message = (
            f"#{keyword} left out{where}: cuda-llm checks what an include reads and follows "
            '#include "file" and #include <file> written on one line; this one is spelled '
            "otherwise (a splice, a comment, a digraph, #include_next or #import)"
        )
        state.pending.append((message, "warning"))
        return True, [], name  # already blanked: its row keeps what else it holds
    # COMPUTED: `#include MACRO`
    expanded = _expand_include_macro(name[len(COMPUTED) :], state)
    if expanded:  # `#include CUDA_STD_HEADER(utility)`: <cuda/std/utility>
        *others, last = expanded
        stays, nested, _spelled = resolve_include(last, False, base, state, depth, where)
        for other in others:  # the spelling NVRTC's macros pick may be another definition's:
            _system_include(other, state)  # where it is a system header, it is found too
        return stays, nested, name
    message = (
        f"#include of a macro is not followed{where}: cuda-llm checks what an include "
        "reads, and this one names its file only after expansion (include the header by name)"
    )
    state.pending.append((message, "warning"))
    return False, [], name


def _system_or_missing(
    name: str, quoted: bool, state: IncludeState, where: str
) -> tuple[bool, list[str], str]:
    """An include no project file answers: a system header (`_system_include`), a missing
    device library's stand-in, or left out with the problem that says why."""
    kept = _system_include(name, state)
    if kept is None and quoted and state.conditional:
        # `#if defined(USE_HIP)` / `#include "vendors/hip.h"`: nvcc may never read it
        message = f'cannot find include file "{name}"{where}, under an #if nvcc may skip'
        state.pending.append((message, "warning"))
    elif kept is None and quoted:
        state.pending.append((f'cannot find include file "{name}"{where}', "error"))
    elif kept is None and name not in std_headers.DEVICE_LIBRARIES:
        # the host compiler's: silent; one under `#ifdef _WIN32` may never be read by nvcc
        if not state.conditional and std_headers.find_host_header(name) is None:
            state.pending.append((_not_found(name, where, state.configured), "warning"))
    elif not kept and name in std_headers.DEVICE_LIBRARIES:
        wheel = std_headers.DEVICE_LIBRARIES[name]
        message = (
            f"<{name}> is not installed{where}: device code using it cannot be checked, and "
            f"resources of kernels calling it leave out its code (pip install '{wheel}==13.*')"
        )
        state.pending.append((message, "warning"))
        stand_in = std_headers.missing_stand_in(name)
        if stand_in is not None:  # its names, so the rest of the file is still checked
            state.headers.setdefault(name, stand_in)
            return True, [], name
    return bool(kept), [], name


def _library_header(
    name: str, library: str, found: Path, state: IncludeState, depth: int
) -> tuple[bool, list[str], str]:
    """A host library's header (`headers.host_library`): blanked like a project header (only
    host-API declarations: names a newer library takes from a newer runtime never reach NVRTC),
    its toolkit includes read from NVRTC's own toolkit, and one warning naming both versions
    when the library is not of NVRTC's CUDA version (`headers.version_mismatch`)."""
    state.library_dirs.add(found.parent)
    if library not in state.mismatches:
        mismatch = std_headers.version_mismatch(library, found)
        if mismatch is not None:
            state.mismatches.add(library)
            state.pending.append((mismatch, "warning"))
    spelled = _distinct_name(name, found, state)
    loaded = _load_header(spelled, found, state, depth)
    return loaded is not None, loaded or [], spelled


@functools.lru_cache(maxsize=1)
def _nvcc_include_dirs() -> tuple[str, ...]:
    """The include directories of the toolkit of the nvcc in use (`nvcc_path.find_nvcc`)."""
    return std_headers.nvcc_include_dirs(find_nvcc())


def _read_by_nvrtc(name: str, found: Path, state: IncludeState) -> bool:
    """Whether `<name>`, found at `found` in a configured directory, is NVRTC's to read as it
    is rather than a project header to blank: a CCCL header written for NVRTC, or a header of
    another toolkit's include directory that ours has too (NVRTC reads ours: it comes first)."""
    if std_headers.is_nvrtc_ready(name, found):
        return True
    in_other_toolkit = any(found.is_relative_to(d) for d in state.toolkits)
    return in_other_toolkit and std_headers.in_toolkit(name)


def _expand_include_macro(what: str, state: IncludeState) -> list[str]:
    """The `<...>` headers `MACRO(arg)` names, one per definition of a macro of
    `state.include_macros` (the last one last); none for any other computed include (it names
    its file through macros we do not expand)."""
    call = _MACRO_CALL.fullmatch(what.split("//")[0].split("/*")[0].strip())
    if call is None or call.group("name") not in state.include_macros:
        return []
    definitions = state.include_macros[call.group("name")]
    expanded = [re.sub(rf"\b{re.escape(p)}\b", call.group("arg"), path) for p, path in definitions]
    return list(dict.fromkeys(reversed(expanded)))[::-1]


def note_include_macros(text: str, state: IncludeState) -> None:
    if "define" in text:
        for m in _INCLUDE_MACRO.finditer(text):
            definitions = state.include_macros.setdefault(m.group("name"), [])
            definition = (m.group("param"), m.group("path"))
            if definition in definitions:
                definitions.remove(definition)
            definitions.append(definition)


def _not_found(name: str, where: str, configured: Sequence[str]) -> str:
    """The warning for an `#include <name>` found nowhere: what was searched, how to add more.

    The line is left out of the unit (NVRTC would stop at it), so names it declares are
    reported where they are used; this says why.
    """
    shown = [str(d) for d in configured[:4]]
    if len(configured) > 4:
        shown.append(f"{len(configured) - 4} more")
    searched = ", ".join(shown) + " and " if shown else ""
    package = std_headers.library_package(name)
    install = (
        f"; it comes with `pip install '{package}'` in the environment cuda-llm runs from, or "
        if package
        else "; "
    )
    return (
        f"cannot find <{name}>{where}: searched {searched}the CUDA toolkit's headers{install}add "
        "its directory with -I (cuda-llm check), compile_commands.json or compile_flags.txt, or "
        "the cudaLlm.includePaths setting"
    )


def _load_header(name: str, resolved: Path, state: IncludeState, depth: int) -> list[str] | None:
    """Blank the host code of a user header and register it (and its includes) in memory.

    A header is one file whatever spelling reaches it (`"sub/h.h"`, `"../x/sub/h.h"`, `<h.h>`
    through -I): every spelling is registered with the same blanked text, so NVRTC never
    reads the raw file from disk under a second name (host code and all). None when it may not
    be read (`include_reads`: its `#include` line is then left out).
    """
    if resolved in state.refused:  # refused once: every line including it is left out
        state.pending.append(
            (f'include file "{name}" not read: {state.refused[resolved]}', "error")
        )
        return None
    if name in state.headers:
        return []
    if resolved in state.seen:
        state.aliases.append((name, resolved))
        return [name]
    if depth > MAX_INCLUDE_DEPTH:
        message = f'"{name}": includes nested deeper than {MAX_INCLUDE_DEPTH} levels'
        state.pending.append((message, "error"))
        return []
    state.seen.add(resolved)
    state.owners.setdefault(name, resolved)
    try:
        raw = include_reads.read_header(resolved, state.budget)
    except include_reads.IncludeRefused as refused:
        state.refused[resolved] = str(refused)
        state.pending.append((f'include file "{name}" not read: {refused}', "error"))
        return None
    text = std_redeclarations.agree_with_cccl(normalized(raw.decode("utf-8", errors="replace")))
    text = static_overloads.separate(text)
    outer_conditional = state.conditional
    known = frozenset(state.macros)
    note_include_macros(text, state)
    blanked = blank_host_code(text, state.macros, parse_masked(text, state.macros), state.bodies)
    own_attributes = {
        n: k for n, k in blanked.defined.items() if k in ATTRIBUTE_KINDS and n not in known
    }
    if own_attributes:  # `#define GGML_API extern` read before ggml.h's own prototypes
        macros = {**state.macros, **own_attributes}
        blanked = blank_host_code(text, macros, parse_masked(text, macros), state.bodies)
    body, includes = blanked.text, blanked.includes
    state.macros.update(blanked.defined)
    state.note_decltype(blanked)
    state.bodies.update(blanked.bodies)
    state.objects.update(blanked.objects)
    if blanked.constants:
        state.constants[name] = blanked.constants
    lines = body.split("\n")
    names = [name]
    dropped: set[int] = set()
    respelled: list[tuple[int, str, str]] = []
    for line_no, inner, quoted, _span, conditional in includes:
        where = f' (included from "{name}" line {line_no + 1})'
        # a header read under `#if defined(GGML_USE_HIP)`: what it includes is as conditional
        state.conditional = conditional or outer_conditional
        kept, nested, spelled = resolve_include(
            inner, quoted, resolved.parent, state, depth + 1, where
        )
        if spelled != inner:
            respelled.append((line_no, inner, spelled))
        names.extend(nested)
        if not kept:
            lines[line_no] = " " * len(lines[line_no])
            dropped.add(line_no)
    lines = respell_includes(lines, respelled)
    state.respelled[name] = respelled
    state.headers[name] = answer_refused_probes(
        blank_line_directives("\n".join(lines)), resolved.parent, state.configured
    )
    state.blanked[name] = (text, frozenset(dropped), known | frozenset(blanked.defined))
    state.names[resolved] = name
    return names


def answer_refused_probes(text: str, base: Path | None, configured: Sequence[str]) -> str:
    """`text` with each `__has_include(...)` naming a file the server would not read (a FIFO,
    a special file, one outside an untrusted workspace), or named through macros, read as `0`:
    NVRTC opens what it names (a FIFO held it to its time limit)."""
    for probe in reversed(directives.has_include_probes(text)):
        if include_reads.probe_refused(probe, base, configured):
            text = directives.blank_probe(text, probe)
    return text


def drop_unused_constants(
    main: str, main_read: str, own: list[Constant], state: IncludeState
) -> str:
    """Blank namespace-scope constants that no kept code of the unit mentions; returns `main`
    (the main file's text) with its own dropped, and drops the headers' in `state.headers`.

    NVRTC warns about unreferenced ones (#177-D) on lines the user sees as host code. A use
    counts wherever it is: cuda-samples' dwtHaar1D.cu defines `LOG_NUM_BANKS` for the kernel
    header it includes next (dropped when only the file's own text was searched).
    """
    declared = {"": own, **state.constants}
    wanted = {n for constants in declared.values() for c in constants for n in c.names}
    if not wanted:
        return main
    texts = {"": main, **{name: state.headers[name] for name in state.constants}}
    # the walker's ranges are of the text as read; a respelled `#include` line since then
    # (`"../../common/x.cuh"` -> `"common/x.cuh"`) moved what follows it on (ThunderKittens)
    read = {"": main_read, **{name: state.blanked[name][0] for name in state.constants}}
    declared = {key: rebased(c, read[key], texts[key]) for key, c in declared.items()}
    total: dict[str, int] = {}
    for text in (main, *state.headers.values()):
        for word in WORD.findall(text):
            if word in wanted:
                total[word] = total.get(word, 0) + 1
    for key, constants in declared.items():
        unused: list[tuple[int, int]] = []
        text = texts[key]
        for constant in constants:
            mine = WORD.findall(text[constant.start : constant.end])
            if not any(total.get(n, 0) > mine.count(n) for n in constant.names):
                unused.append((constant.start, constant.end))
        if unused:
            texts[key] = blank_chars(text, unused)
    for name in state.constants:
        state.headers[name] = texts[name]
    return texts[""]
