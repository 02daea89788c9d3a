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
The walker keeps its own stack: a file of 10,000 nested `#if` must not exhaust Python's.
"""

from __future__ import annotations

import bisect
import functools
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

import tree_sitter

from cuda_llm_lsp.compile import (
    directives,
    include_reads,
    static_overloads,
    std_names,
    std_redeclarations,
)
from cuda_llm_lsp.compile import headers as std_headers
from cuda_llm_lsp.compile.nvcc_path import find_nvcc
from cuda_llm_lsp.compile.types import Diagnostic
from cuda_llm_lsp.source.kernels import parse_tree
from cuda_llm_lsp.source.text import Span, normalized


@dataclass(frozen=True)
class IncludeProblem:
    """An `#include "..."` that could not be resolved: reported on its line."""

    span: Span
    message: str
    severity: Literal["error", "warning", "information"] = "error"


@dataclass(frozen=True)
class DeviceUnit:
    text: str  # same line count as the source; host-only code replaced by spaces
    name: str  # file name given to NVRTC (appears in its log)
    include_dirs: tuple[str, ...]  # -I directories: the file's own directory, configured paths
    # configured CUDA toolkit include directories: searched after our toolkit's, for the
    # headers it lacks (`headers.split_include_dirs`)
    toolkit_dirs: tuple[str, ...] = ()
    headers: dict[str, str] = field(default_factory=dict)  # in-memory headers given to NVRTC
    include_lines: dict[str, int] = field(default_factory=dict)  # header name -> 0-based line
    problems: tuple[IncludeProblem, ...] = ()
    # `#include <...>` files NVRTC reads itself from a configured include path: path ->
    # (mtime_ns, size), so that editing one invalidates cached compiles (the toolkit's own
    # headers are covered by the NVRTC version).
    external_headers: dict[str, tuple[int, int]] = field(default_factory=dict)


MAX_INCLUDE_DEPTH = 16
# The file name NVRTC gets comes back in its log as `NAME(LINE): error: ...`: a line break or
# other control character (`a\nb.cu`), or a `(9): ` of its own, would put the problem on another
# line or file. Such a file is compiled as `input.cu`, matched back the same way.
_UNSAFE_UNIT_NAME = re.compile(r"[\x00-\x1f\x7f-\x9f]|\(\d+\): ")

_INCLUDE = re.compile(r'^\s*#\s*include\s*(?:"(?P<quoted>[^"\n]*)"|<(?P<system>[^>\n]*)>)')
_WORD = re.compile(r"[A-Za-z_]\w*")
# `#include MACRO`: the file it names is known only after macro expansion
_COMPUTED_INCLUDE = re.compile(r"^\s*#\s*include\s+(?P<what>[A-Za-z_]\w*.*)$")
COMPUTED = "\0"  # what starts the name of a computed include in the walker's list
# what starts the name of an include directive the preprocessor sees but the walker did not
# resolve (`%:include`, `#/**/include`, a splice, `#include_next`): already blanked
UNRESOLVED = "\1"
TYPE_TRAITS = "type_traits"  # the stand-in that a host header bringing <type_traits> reads
# `#define CUDA_STD_HEADER(header) <cuda/std/header>` (CUTLASS): a function-like macro that
# names a system header from its argument; `#include CUDA_STD_HEADER(utility)` is expanded with it
_INCLUDE_MACRO = re.compile(
    r"^[ \t]*#[ \t]*define[ \t]+(?P<name>[A-Za-z_]\w*)\([ \t]*(?P<param>[A-Za-z_]\w*)[ \t]*\)"
    r"[ \t]*<(?P<path>[\w./+-]*)>[ \t]*$",
    re.MULTILINE,
)
_MACRO_CALL = re.compile(r"(?P<name>[A-Za-z_]\w*)[ \t]*\([ \t]*(?P<arg>[\w./+-]+)[ \t]*\)\s*")
# `#line 12 "f.cu"` and its GNU form `# 12 "f.cu"` (one line; a continuation is rare enough)
_LINE_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*(?:line\b|[0-9])[^\n]*", re.MULTILINE)
_STD_SCOPE = re.compile(rb"\bstd\s*::")
_DEVICE_WORDS = frozenset({"__device__", "__global__"})
_MEMORY_SPACE_WORDS = frozenset({"__device__", "__constant__", "__managed__", "__shared__"})
# node types that make up a function's head before its declarator
_HEAD_TYPES = frozenset(
    {"primitive_type", "type_identifier", "qualified_identifier", "template_type",
     "sized_type_specifier", "storage_class_specifier", "type_qualifier", "launch_bounds",
     "attribute_declaration", "attribute_specifier", "ms_call_modifier", "virtual",
     "placeholder_type_specifier", "identifier"}
)  # fmt: skip
# a macro kind (`_IncludeState.macros`): a class NVRTC never sees (`_note_hidden_class`)
HIDDEN_FROM_NVRTC = "nvrtc-hidden"
# a macro kind: a host function template that some code reads in `decltype(...)` (CUTLASS 3's
# `get_problem_shape_MNKL_helper`): nvcc deduces its type whatever its space, so it stays
READ_IN_DECLTYPE = "decltype"
# `decltype(` and the names called inside one: `ns::f<T>(`, `f(`
_DECLTYPE = re.compile(rb"\bdecltype\s*\(")
_CALLED = re.compile(rb"([A-Za-z_]\w*)\s*[<(]")
# a macro kind, then `:` and a library's namespace: that namespace, whose headers the unit drops
# (`DROPPED_LIBRARIES`), or a user item left out for naming it (`_Walker._skip_dropped`)
DROPPED = "dropped:"
# macros that open and close a library's namespace: what tree-sitter reads in their place
_NAMESPACE_MACROS = {"THRUST_NAMESPACE_BEGIN": "namespace thrust {", "THRUST_NAMESPACE_END": "}"}
# `struct __align__(8) complex {`: a class head, read from the text
_CLASS_HEAD = re.compile(rb"\b(?:struct|class|union)\s+(?:__align__\s*\([^)\n]*\)\s*)?(\w+)\s*[:{]")
# a macro kind, then `:` and a namespace: a name user code declares in that dropped namespace
# (CuPy's `thrust::complex`), which `thrust::complex` then means, not the library
EXTENDS = "extends:"
# Header prefix -> namespace of a host-only library NVRTC cannot compile (Thrust needs host
# std:: headers): user items naming that namespace are left out of the unit with a note, since
# NVRTC could only report that the namespace is unknown; the nvcc check on save covers them.
DROPPED_LIBRARIES = {"thrust/": "thrust"}
_NOT_RTC = re.compile(
    r"#\s*(?:if\s*!\s*defined\s*(?:\(\s*__CUDACC_RTC__\s*\)|\s__CUDACC_RTC__)"
    r"|ifndef\s+__CUDACC_RTC__)"
)
# `#if X` / one declarator line / `#else` / another / `#endif`, then the function's `{`
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
_SPLIT_DECLARATOR = re.compile(
    r"^([ \t]*#[ \t]*if(?:n?def)?\b[^\n]*\n)"
    r"([^\n#;{}]*\([^\n#;{}]*\)[^\n#;{}]*\n)"
    r"([ \t]*#[ \t]*else\b[^\n]*\n[^\n#;{}]*\n[ \t]*#[ \t]*endif\b[^\n]*\n)"
    r"(?=[ \t]*\{)",
    re.MULTILINE,
)
# nodes that name something (a namespace, a type, a function): `_Walker._dropped_name`
_NAME_TYPES = frozenset({"namespace_identifier", "type_identifier", "identifier"})
# items complete in themselves even where tree-sitter misread what surrounds them
_WHOLE_ITEM_TYPES = frozenset(
    {"function_definition", "struct_specifier", "class_specifier", "union_specifier",
     "alias_declaration", "using_declaration"}
)  # fmt: skip
# namespace-scope items that `_Walker._skip_dropped` may leave out whole
_ITEM_TYPES = frozenset(
    {"function_definition", "declaration", "struct_specifier", "class_specifier",
     "union_specifier", "using_declaration", "alias_declaration", "type_definition",
     "template_instantiation"}
)  # fmt: skip
_CONTAINERS = frozenset(
    {"translation_unit", "preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif",
     "preproc_elifdef", "declaration_list", "ERROR"}
)  # fmt: skip
# Words that make a macro's expansion usable by device code (kept even without a device word).
_USABLE_WORDS = frozenset(
    {"const", "constexpr", "typedef", "using", "template", "struct", "class", "union", "enum",
     "namespace", "static_assert"}
)  # fmt: skip
# Host calling-convention macros (empty on Linux): a function head holding one is host code.
_CALLING_CONVENTIONS = frozenset(
    {"CUDART_CB", "CUDARTAPI", "CUDAAPI", "CUBLASAPI", "CUSPARSEAPI", "CUFFTAPI", "CURANDAPI",
     "NVTX_API", "WINAPI", "APIENTRY", "CALLBACK", "__stdcall", "__cdecl"}
)  # fmt: skip
# C types that only host headers declare (dropped from the unit): a struct member of one of
# them is host-only (a logger's `glob_t`, a timer's `struct timeval`); the struct stays.
_HOST_TYPES = std_headers.names(
    """
    glob_t DIR dirent pthread_t pthread_mutex_t pthread_cond_t pthread_attr_t pthread_once_t
    pthread_rwlock_t pthread_barrier_t pthread_spinlock_t sem_t timeval timespec timezone tm
    jmp_buf sigjmp_buf sigset_t va_list fpos_t mbstate_t locale_t stat rusage tms pid_t
    """
)
# std:: names the prelude and stand-ins provide; any other std:: name marks host-only code.
_STD_PROVIDED = std_headers.names(
    """
    int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t intptr_t uintptr_t
    intmax_t uintmax_t size_t ptrdiff_t nullptr_t abs acos acosh asin asinh atan atan2 atanh
    cbrt ceil copysign cos cosh erf erfc exp exp2 expm1 fabs fdim floor fma fmax fmin fmod frexp
    hypot ilogb isfinite isinf isnan ldexp lgamma llrint llround log log10 log1p log2 logb lrint
    lround modf nearbyint nextafter pow remainder remquo rint round scalbln scalbn signbit sin
    sinh sqrt tan tanh tgamma trunc sqrtf expf logf fabsf fmaxf fminf powf sinf cosf tanhf floorf
    ceilf roundf truncf fmaf exp2f log2f erff printf malloc free memcpy memset
    integral_constant true_type false_type bool_constant is_same is_same_v enable_if enable_if_t
    conditional conditional_t remove_const remove_volatile remove_cv remove_cv_t remove_const_t
    remove_reference remove_reference_t remove_pointer remove_pointer_t remove_cvref
    remove_cvref_t decay decay_t is_pointer is_pointer_v is_const is_const_v is_integral
    is_integral_v is_floating_point is_floating_point_v is_arithmetic is_arithmetic_v is_signed
    is_signed_v is_unsigned is_unsigned_v
    """
)
# what a constexpr function may use and stay device code (relaxed constexpr): those, the names
# the unit gives from libcu++ (`std_names`) and NVRTC's built-in std::initializer_list (mamba's
# `constexpr size_t custom_max(std::initializer_list<size_t> l) { return std::max(l); }`).
# Not for aliases and members: a host `using pair = std::tuple<...>;` would cost a libcu++ header
_STD_FOR_CONSTEXPR = _STD_PROVIDED | frozenset([*std_names.NAMES, "numbers", "initializer_list"])


def build_device_unit(
    text: str,
    path: Path | None = None,
    include_paths: Sequence[str] = (),
    parsed: tuple[tree_sitter.Tree, bytes] | None = None,
) -> DeviceUnit:
    """The device-only unit for `text` (the contents of `path`, which may not exist on disk).

    `parsed`: `kernels.parse_tree(text)` when the caller already has it (one parse per edit).
    """
    text = normalized(text)
    if parsed is None or "\0" in text or _for_tree_sitter(text) != text:
        parsed = _parse(text)  # masks for tree-sitter that the editor's own parse lacks
    include_dirs: list[str] = []
    if path is not None:
        include_dirs.append(str(Path(path).resolve().parent))
    project, toolkits = std_headers.split_include_dirs(include_paths)
    include_dirs.extend(p for p in project if p not in include_dirs)
    # what NVRTC searches on disk itself: no untrusted workspace folder (`include_reads`)
    include_dirs = list(include_reads.disk_search_dirs(include_dirs))
    state = _IncludeState(configured=(*project, *toolkits), toolkits=toolkits)
    own = Path(path).resolve() if path is not None else None
    if own is not None:
        state.seen.add(own)
    main = _blank_host_code(text, {}, parsed, {})
    if any(k in _ATTRIBUTE_KINDS for k in main.defined.values()):
        # the file's own `#define API extern` read before its prototypes: parsed again
        parsed = _parse(text, dict(main.defined))
        main = _blank_host_code(text, dict(main.defined), parsed, {})
    body, includes, own_macros = main.text, main.includes, main.defined
    state.note_decltype(main)
    _note_include_macros(text, state)
    dropped: set[int] = set()  # rows of #include lines left out of the unit
    problems: list[IncludeProblem] = []
    include_lines: dict[str, int] = {}
    respelled: list[tuple[int, str, str]] = []
    for line_no, name, quoted, span, conditional in includes:
        base = own.parent if own else None
        state.conditional = conditional
        kept, nested, spelled = _include(name, quoted, base, state, depth=1, where="")
        if spelled != name:
            respelled.append((line_no, name, spelled))
        if kept:
            include_lines.setdefault(name, line_no)
            for header_name in nested:
                include_lines.setdefault(header_name, line_no)
        else:
            dropped.add(line_no)
        for message, severity in state.take_problems():
            problems.append(IncludeProblem(span, message, severity))
    state.reblank_headers()
    # HOST_DEVICE-style macros from user headers, or a namespace-scope invocation of a macro
    # that a header defines: the same tree, walked again with what the headers taught
    # (or an explicit instantiation of a host template a header defines: mamba's
    # `template void selective_scan_fwd_cuda<float, float>(...);`)
    if (
        set(state.macros) - set(own_macros)
        or main.invoked & set(state.bodies)
        or main.instantiated & state.host_templates
    ):
        if any(k in _ATTRIBUTE_KINDS and n in text for n, k in state.macros.items()):
            parsed = _parse(text, state.macros)  # `GGML_API void f();` in the file itself
        hosts = frozenset(state.host_templates)
        main = _blank_host_code(text, state.macros, parsed, state.bodies, hosts)
        body = main.text
    for span, named, library in main.skipped:
        uses = library if named == library else f"{named}, which needs {library}"
        message = (
            f"not checked as you type: it uses {uses} (NVRTC cannot compile {library}'s "
            "headers; the nvcc check, on open and save, covers it)"
        )
        problems.append(IncludeProblem(span, message, "information"))
    lines = _respell_includes(body.split("\n"), respelled)
    for row in dropped:
        lines[row] = " " * len(lines[row])
    unit_text = _blank_line_directives("\n".join(lines))
    unit_text = _answer_refused_probes(unit_text, own.parent if own else None, state.configured)
    unit_text = _drop_unused_constants(unit_text, text, main.constants, state)
    state.register_aliases()
    own_texts = [unit_text, *state.headers.values()]
    wanted = [n for n in std_names.used(own_texts) if not std_names.declared_in_std(n, own_texts)]
    libcuxx = std_names.used_from_libcuxx(own_texts)  # a no-op where already included
    if wanted or libcuxx:  # `std::min` in device code: nvcc --expt-relaxed-constexpr's
        state.headers[std_names.HEADER] = std_names.header_text(wanted, libcuxx)
    name = Path(path).name if path is not None else "input.cu"
    if _UNSAFE_UNIT_NAME.search(name):  # its log lines would not parse back where they belong
        name = "input.cu"
    if name in state.headers:
        name = f"cuda_llm_main_{name}"
    return DeviceUnit(
        text=unit_text,
        name=name,
        include_dirs=tuple(include_dirs),
        toolkit_dirs=include_reads.disk_search_dirs(toolkits),
        headers=dict(state.headers),
        include_lines=include_lines,
        problems=tuple(problems),
        external_headers=dict(state.external_headers),
    )


@dataclass
class _IncludeState:
    configured: tuple[str, ...]  # a project's include directories, then toolkits'
    toolkits: tuple[str, ...] = ()  # CUDA toolkits' own among them (`split_include_dirs`)
    headers: dict[str, str] = field(default_factory=dict)
    seen: set[Path] = field(default_factory=set)
    pending: list[tuple[str, Literal["error", "warning"]]] = field(default_factory=list)
    # execution-space macros: name -> "device" | "host" | "constexpr" (a macro standing for
    # `constexpr`, such as CUTLASS_CONSTEXPR_IF_CXX17: its functions are judged as constexpr ones)
    # or HIDDEN_FROM_NVRTC: not a macro, a class only nvcc sees (`_Walker._note_hidden_class`)
    macros: dict[str, str] = field(default_factory=dict)
    external_headers: dict[str, tuple[int, int]] = field(default_factory=dict)
    refused: dict[Path, str] = field(default_factory=dict)  # refused headers -> why
    include_macros: dict[str, tuple[str, str]] = field(
        default_factory=dict
    )  # name -> (param, path)
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
    constants: dict[str, list[_Constant]] = field(default_factory=dict)  # header -> its own
    host_templates: set[str] = field(default_factory=set)  # host function templates blanked
    # directories of host-library headers read (cuBLAS's): their `#include "driver_types.h"`
    # is NVRTC's own toolkit header, not the library directory's copy (`_library_header`)
    library_dirs: set[Path] = field(default_factory=set)
    mismatches: set[str] = field(default_factory=set)  # libraries whose mismatch was said
    decltype_calls: set[str] = field(default_factory=set)  # names called in `decltype(...)`

    def note_decltype(self, blanked: _Blanked) -> None:
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
            parsed = _parse(text, self.macros)
            blanked = _blank_host_code(text, self.macros, parsed, self.bodies)
            for defined, kind in blanked.defined.items():  # items it left out, for later files
                if kind.startswith((DROPPED, EXTENDS)):
                    self.macros.setdefault(defined, kind)
            if blanked.constants:  # the same text: its constants where they were, or more
                self.constants[name] = blanked.constants
            lines = _respell_includes(blanked.text.split("\n"), self.respelled.get(name, []))
            for row in dropped:
                lines[row] = " " * len(lines[row])
            self.headers[name] = _blank_line_directives("\n".join(lines))


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


def _respell_includes(lines: list[str], respelled: list[tuple[int, str, str]]) -> list[str]:
    """`lines` with each `#include "name"` of `respelled` naming its header's unit name."""
    for row, name, spelled in respelled:
        if f'"{name}"' in lines[row]:
            lines[row] = lines[row].replace(f'"{name}"', f'"{spelled}"', 1)
        else:
            lines[row] = lines[row].replace(f"<{name}>", f"<{spelled}>", 1)
    return lines


def _distinct_name(name: str, found: Path, state: _IncludeState) -> str:
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


def _system_include(name: str, state: _IncludeState) -> bool | None:
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
    if found is None:
        return None
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


def _include(
    name: str, quoted: bool, base: Path | None, state: _IncludeState, depth: int, where: str
) -> tuple[bool, list[str], str]:
    """Resolve one `#include` line: whether it stays, the user headers it loads, and the name
    the line must spell (`_unit_name`).

    Problems go to `state.pending`; `where` is ' (included from "h" line n)' inside headers.
    A computed include (`#include MACRO`) is left out with a warning: NVRTC would open
    whatever path the macros spell, unchecked (`include_reads`).
    """
    if name.startswith(UNRESOLVED):
        keyword = name[len(UNRESOLVED) :]
        message = (
            f"#{keyword} left out{where}: cuda-llm checks what an include reads and follows "
            '#include "file" and #include <file> written on one line; this one is spelled '
            "otherwise (a splice, a comment, a digraph, #include_next or #import)"
        )
        state.pending.append((message, "warning"))
        return True, [], name  # already blanked: its row keeps what else it holds
    if name.startswith(COMPUTED):
        expanded = _expand_include_macro(name[len(COMPUTED) :], state)
        if expanded is not None:  # `#include CUDA_STD_HEADER(utility)`: <cuda/std/utility>
            stays, nested, _spelled = _include(expanded, False, base, state, depth, where)
            return stays, nested, name
        message = (
            f"#include of a macro is not followed{where}: cuda-llm checks what an include "
            "reads, and this one names its file only after expansion (include the header by name)"
        )
        state.pending.append((message, "warning"))
        return False, [], name
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
    name: str, library: str, found: Path, state: _IncludeState, depth: int
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


def _read_by_nvrtc(name: str, found: Path, state: _IncludeState) -> bool:
    """Whether `<name>`, found at `found` in a configured directory, is NVRTC's to read as it
    is rather than a project header to blank: a CCCL header written for NVRTC, or a header of
    another toolkit's include directory that ours has too (NVRTC reads ours: it comes first)."""
    if std_headers.is_nvrtc_ready(name, found):
        return True
    in_other_toolkit = any(found.is_relative_to(d) for d in state.toolkits)
    return in_other_toolkit and std_headers.in_toolkit(name)


def _expand_include_macro(what: str, state: _IncludeState) -> str | None:
    """The `<...>` header `MACRO(arg)` names, for a macro of `state.include_macros`; None for
    any other computed include (it names its file through macros we do not expand)."""
    call = _MACRO_CALL.fullmatch(what.split("//")[0].split("/*")[0].strip())
    if call is None or call.group("name") not in state.include_macros:
        return None
    param, path = state.include_macros[call.group("name")]
    return re.sub(rf"\b{re.escape(param)}\b", call.group("arg"), path)


def _note_include_macros(text: str, state: _IncludeState) -> None:
    if "define" in text:
        for m in _INCLUDE_MACRO.finditer(text):
            state.include_macros[m.group("name")] = (m.group("param"), m.group("path"))


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


def _load_header(name: str, resolved: Path, state: _IncludeState, depth: int) -> list[str] | None:
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
    _note_include_macros(text, state)
    blanked = _blank_host_code(text, state.macros, _parse(text, state.macros), state.bodies)
    own_attributes = {
        n: k for n, k in blanked.defined.items() if k in _ATTRIBUTE_KINDS and n not in known
    }
    if own_attributes:  # `#define GGML_API extern` read before ggml.h's own prototypes
        macros = {**state.macros, **own_attributes}
        blanked = _blank_host_code(text, macros, _parse(text, macros), state.bodies)
    body, includes = blanked.text, blanked.includes
    state.macros.update(blanked.defined)
    state.note_decltype(blanked)
    state.bodies.update(blanked.bodies)
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
        kept, nested, spelled = _include(inner, quoted, resolved.parent, state, depth + 1, where)
        if spelled != inner:
            respelled.append((line_no, inner, spelled))
        names.extend(nested)
        if not kept:
            lines[line_no] = " " * len(lines[line_no])
            dropped.add(line_no)
    lines = _respell_includes(lines, respelled)
    state.respelled[name] = respelled
    state.headers[name] = _answer_refused_probes(
        _blank_line_directives("\n".join(lines)), resolved.parent, state.configured
    )
    state.blanked[name] = (text, frozenset(dropped), known | frozenset(blanked.defined))
    state.names[resolved] = name
    return names


def _answer_refused_probes(text: str, base: Path | None, configured: Sequence[str]) -> str:
    """`text` with each `__has_include(...)` naming a file the server would not read (a FIFO,
    a special file, one outside an untrusted workspace), or named through macros, read as `0`:
    NVRTC opens what it names (a FIFO held it to its time limit)."""
    for probe in reversed(directives.has_include_probes(text)):
        if include_reads.probe_refused(probe, base, configured):
            text = directives.blank_probe(text, probe)
    return text


def _blank_line_directives(text: str) -> str:
    """`text` with its `#line` directives made spaces (lines and columns stay)."""
    if "#" not in text:
        return text
    return _LINE_DIRECTIVE.sub(lambda m: " " * len(m.group(0)), text)


# --- blanking host code ----------------------------------------------------------------------


def _for_tree_sitter(text: str, macros: dict[str, str] | None = None) -> str:
    """`text` as tree-sitter reads it (same length): the masks below applied; `macros`: see
    `_mask_device_macros`."""
    masked = _mask_split_declarators(
        _mask_attribute_macros(_mask_device_macros(text, macros or {}), macros or {})
    )
    return _mask_split_parameters(_mask_namespace_macros(masked))


def _parse(text: str, macros: dict[str, str] | None = None) -> tuple[tree_sitter.Tree, bytes]:
    """The tree of `text` (normalized) and its bytes; `macros`: see `_mask_device_macros`."""
    # NVRTC reads a C string: a NUL would end the file (same length, so offsets hold)
    text = text.replace("\0", " ")
    masked = _for_tree_sitter(text, macros)
    if masked == text:
        return parse_tree(text)
    tree, _masked_data = parse_tree(masked)
    return tree, text.encode("utf-8", errors="surrogatepass")


@functools.lru_cache(maxsize=8)
def _split_parameter_tails(data: bytes) -> tuple[tuple[int, int, int], ...]:
    """Each `_SPLIT_PARAMETERS` match that continues a parameter list (the code before its `#if`
    ends in `,` or `(`): (its start, the end of its `#if` branch, its end), in bytes. Cached:
    `_parse` masks them and the walker of the same text extends blanks over them."""
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
    """`text` with the `#if` lines and the `#else` branch of each `_split_parameter_tails` made
    spaces, for tree-sitter only: one parameter list, ending in the first branch (the walker
    blanks the rest with the function, `_Walker.blank`)."""
    data = text.encode("utf-8", errors="surrogatepass")
    tails = _split_parameter_tails(data)
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
    for name, spelled in _NAMESPACE_MACROS.items():
        same_length = spelled.ljust(len(name))
        text = re.sub(rf"^([ \t]*){name}\b", rf"\g<1>{same_length}", text, flags=re.MULTILINE)
    return text


def _mask_split_declarators(text: str) -> str:
    """`text` with `#if` / `#else <declarator>` / `#endif` around a function's declarator
    made spaces, for tree-sitter only: the first declarator stands alone before the body.

    CUTLASS's cluster_launch.hpp spells `init(void const* kernel_function)` and, under
    `#else`, `init(void const*)`: tree-sitter then reads no function, the host member was kept
    whole and the rest of the class misread; NVRTC rejected each `__host__` member.
    """
    if "#" not in text:
        return text
    first = _SPLIT_DECLARATOR.sub(
        lambda m: _spaces(m.group(1)) + m.group(2) + _spaces(m.group(3)), text
    )
    if "#else" not in first:
        return first
    return _SPLIT_HEAD.sub(lambda m: _spaces(m.group(1)) + m.group(2) + _spaces(m.group(3)), first)


# The words a declaration-attribute macro's body may hold besides attributes (GGML_API):
# storage and linkage.
_ATTRIBUTE_WORDS = ("extern", "static", "inline", "_Noreturn", "__inline__", "__extension__")
ATTRIBUTE = "attribute"  # `#define API extern __attribute__((visibility("default")))`
ATTRIBUTE_CALL = "attribute()"  # `#define FORMAT(...) __attribute__((format(printf, ...)))`
ATTRIBUTE_WRAPPER = "attribute(decl)"  # `#define DEPRECATED(func, hint) func __attribute__(...)`
_ATTRIBUTE_KINDS = (ATTRIBUTE, ATTRIBUTE_CALL, ATTRIBUTE_WRAPPER)


def _attribute_kind(node_type: str, body: str, parameters: list[str]) -> str | None:
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
        word = _WORD.match(body, at)
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


def _mask_attribute_macros(text: str, macros: dict[str, str]) -> str:
    """`text` with each use of a declaration-attribute macro (`_attribute_kind`) made spaces,
    arguments and all (a wrapper keeps its first argument, the declaration), for tree-sitter."""
    names = {n: k for n, k in macros.items() if k in _ATTRIBUTE_KINDS and n in text}
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
            out.append(_spaces(text[match.start() : open_paren + 1]))
            out.append(text[open_paren + 1 : first_end])
            out.append(_spaces(text[first_end:end]))
        else:
            out.append(_spaces(text[match.start() : end]))
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


@dataclass(frozen=True)
class _Constant:
    """An unannotated namespace-scope constant declaration: its names, its character range."""

    names: tuple[str, ...]
    start: int
    end: int


@dataclass(frozen=True)
class _Blanked:
    """One file with its host-only code blanked, and what the rest of the unit needs from it."""

    text: str
    includes: list[tuple[int, str, bool, Span, bool]]  # line, name, quoted, span, conditional
    defined: dict[str, str]  # execution-space macros it defines: name -> "device" | "host"...
    bodies: dict[str, str]  # the macros it defines: name -> replacement text
    constants: list[_Constant]  # kept for now; dropped once the whole unit shows them unused
    invoked: frozenset[str]  # namespace-scope invocations of macros it could not judge
    skipped: list[tuple[Span, str, str]]  # items left out: span, the name, its library
    host_templates: frozenset[str] = frozenset()  # host function templates it blanked
    decltype_calls: frozenset[str] = frozenset()  # names called inside its `decltype(...)`
    instantiated: frozenset[str] = frozenset()  # explicit instantiations kept: `template f<int>`


def _blank_host_code(
    text: str,
    macros: dict[str, str],
    parsed: tuple[tree_sitter.Tree, bytes],
    bodies: dict[str, str],
    host_templates: frozenset[str] = frozenset(),
) -> _Blanked:
    """`text` with host-only code blanked; `macros` are the execution-space macros and `bodies`
    the replacement texts known from headers; `parsed` is `_parse(text)`; `host_templates`:
    host function templates the headers define (their explicit instantiations here go too)."""
    text = text.replace("\0", " ")
    tree, data = parsed
    walker = _Walker(data, macros, bodies)
    walker.host_functions |= host_templates
    walker.walk(tree.root_node)
    walker.blank_instantiation_macros()
    ranges = walker.ranges
    blanked = _unannotated_lambdas(_apply_blanks(text, data, ranges))
    includes: list[tuple[int, str, bool, Span, bool]] = []
    lines = blanked.split("\n")
    for row in walker.include_rows:
        if row >= len(lines):
            continue
        match = _INCLUDE.match(lines[row])
        if match is None:
            computed = _COMPUTED_INCLUDE.match(lines[row])
            if computed is not None:  # `#include MACRO`: `_include` reports and drops it
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
    constants = _constant_ranges(walker.constants, text, data)
    return _Blanked(
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


class _Walker:
    """Collects byte ranges of host-only code and the rows of `#include` directives."""

    def __init__(self, data: bytes, macros: dict[str, str], bodies: dict[str, str]) -> None:
        self.data = data
        # the bytes tree-sitter read, where attribute macros were masked (`_parse`): a blanked
        # declaration takes the `GGML_API`-style macros just before it along
        # (and where a function head's `#if` line was: the blank takes it along too)
        masked = _mask_split_declarators(
            _mask_attribute_macros(data.decode("utf-8", "surrogatepass"), macros)
        ).encode("utf-8", "surrogatepass")
        self.masked = masked if masked != data and len(masked) == len(data) else None
        # the end of a split parameter list's `#if` branch -> the end of its `#endif`
        self.split_tails = {branch_end: end for _, branch_end, end in _split_parameter_tails(data)}
        self.ranges: list[tuple[int, int]] = []
        self.include_rows: list[int] = []
        # unannotated namespace-scope constants: (name, start byte, end byte)
        self.constants: list[tuple[str, int, int]] = []
        self.device_macros = {n for n, kind in macros.items() if kind == "device"}
        self.host_macros = {n for n, kind in macros.items() if kind == "host"}
        self.constexpr_macros = {n for n, kind in macros.items() if kind == "constexpr"}
        self.hidden = {n for n, kind in macros.items() if kind == HIDDEN_FROM_NVRTC}
        # names the unit lacks -> their library: its namespace, and user items that need it
        self.dropped = {n: k[len(DROPPED) :] for n, k in macros.items() if k.startswith(DROPPED)}
        self.skipped: list[tuple[Span, str, str]] = []  # items naming one: span, name, library
        self.extended = {n for n, k in macros.items() if k.startswith(EXTENDS)}
        opens = (
            rb"namespace\s+(?:" + b"|".join(re.escape(n.encode()) for n in self.dropped) + rb")\b"
        )
        self.opens_dropped = bool(self.dropped) and (
            re.search(opens, data) is not None or b"THRUST_NAMESPACE_BEGIN" in data
        )
        self.host_aliases: set[str] = set()  # class-scope aliases of host-only std types
        self.defined: dict[str, str] = {}  # execution-space macros this text defines
        self.bodies = dict(bodies)  # macro replacement texts known so far (headers, this text)
        self.own_bodies: dict[str, str] = {}  # those this text defines
        self.invoked: set[str] = set()  # namespace-scope invocations of unknown macros
        self.host_functions: set[str] = set()  # names of host functions blanked so far
        self.host_templates: set[str] = set()  # those of them that are templates
        self.instantiated: set[str] = set()  # explicit instantiations kept
        self.read_in_decltype = {n for n, kind in macros.items() if kind == READ_IN_DECLTYPE}
        # rows of #include lines under a platform or feature test (`#ifdef _WIN32`, `#if ...`;
        # an include guard's `#ifndef` does not count): nvcc may never read them
        self.conditional_rows: set[int] = set()
        if self.opens_dropped:  # its classes, whatever tree-sitter made of their heads
            for match in _CLASS_HEAD.finditer(data):  # (`#if` / two heads / `#endif`: CuPy)
                declared = match.group(1).decode()
                self.defined.setdefault(declared, EXTENDS + "thrust")
                self.extended.add(declared)

    def _under_condition(self, node: tree_sitter.Node) -> bool:
        parent = node.parent
        while parent is not None:
            if parent.type in ("preproc_if", "preproc_elif", "preproc_else", "preproc_elifdef"):
                return True
            if parent.type == "preproc_ifdef" and not self.text(parent).startswith("#ifndef"):
                return True
            parent = parent.parent
        return False

    def text(self, node: tree_sitter.Node) -> str:
        return self.data[node.start_byte : node.end_byte].decode("utf-8", errors="replace")

    def _masked_start(self, start: int) -> int:
        """`start`, moved back over what was masked for tree-sitter just before it (attribute
        macros, a split head's `#if` lines): a blanked item takes those along."""
        if self.masked is not None:
            while start > 0 and self.masked[start - 1 : start].isspace():
                start -= 1
        return start

    def blank(self, node: tree_sitter.Node) -> None:
        start = self._masked_start(node.start_byte)
        end = node.end_byte
        if self.split_tails:  # a prototype ending in an `#if` branch: its `#else` branch too
            after = end
            while after < len(self.data) and self.data[after : after + 1] in (b" ", b"\t"):
                after += 1
            if self.data[after : after + 1] == b"\n":
                end = self.split_tails.get(after + 1, end)
        self.ranges.append((start, end))

    def walk(self, root: tree_sitter.Node) -> None:
        """Visit every namespace-scope item under `root` in source order (own stack)."""
        self._stack: list[tuple[tree_sitter.Node, tree_sitter.Node]] = []
        self.visit_container(root)
        while self._stack:
            node, outer = self._stack.pop()
            self._visit_one(node, outer)

    def visit_container(self, node: tree_sitter.Node) -> None:
        """Queue `node`'s children (a container) to be visited next, first child first."""
        children = node.children
        queued: list[tree_sitter.Node] = []
        taken = 0  # the end of a function read in this ERROR node: what follows is not in it
        for index, child in enumerate(children):
            if child.start_byte < taken:
                continue
            if node.type == "ERROR":
                taken = self._unterminated_function(children, index, node) or 0
                if taken >= node.end_byte:
                    break  # the rest of this ERROR node is that function's body
                if taken:
                    continue
            queued.append(child)
        self._stack.extend((child, child) for child in reversed(queued))

    def visit(self, node: tree_sitter.Node, outer: tree_sitter.Node) -> None:
        """Queue one item to be visited next (see `_visit_one`)."""
        self._stack.append((node, outer))

    def _unterminated_function(
        self, children: list[tree_sitter.Node], index: int, error: tree_sitter.Node
    ) -> int | None:
        """`head declarator {` inside an ERROR node: a function whose `}` never came, or came
        in a file tree-sitter misread (CuPy's cupy_thrust.cu, whose whole tree is one ERROR).

        Typing inside `main` (or a kernel) leaves such a node reaching to the end of the file.
        Host: blank from its head to its `}`, or to the end of the node. Device: keep it. The
        end of what it took is returned; None where `children[index]` starts no such function.
        """
        child = children[index]
        if child.type not in _HEAD_TYPES and not child.type.startswith("__"):
            return None
        end = index
        while end < len(children) and (
            children[end].type in _HEAD_TYPES or children[end].type.startswith("__")
        ):
            end += 1
        if end + 1 >= len(children) or children[end].type != "function_declarator":
            return None
        if children[end + 1].type != "{":
            return None
        head = self.data[child.start_byte : children[end].start_byte].decode("utf-8", "replace")
        words = set(_WORD.findall(head))
        close = _matching_brace(self.data, children[end + 1].start_byte, error.end_byte)
        taken = close or error.end_byte
        if not (words & _DEVICE_WORDS or words & self.device_macros or "constexpr" in words):
            start = child.start_byte
            if index >= 2 and children[index - 1].type == "template_parameter_list":
                start = children[index - 2].start_byte  # its `template <typename T>` too
            self.ranges.append((self._masked_start(start), taken))
        return taken

    def _visit_one(self, node: tree_sitter.Node, outer: tree_sitter.Node) -> None:
        """Decide about one namespace-scope item; `outer` is what gets blanked (with prefixes)."""
        kind = node.type
        if kind in _ITEM_TYPES and self._skip_dropped(node, outer):
            return
        if kind in _ITEM_TYPES and self.opens_dropped:  # its names are user code's (CuPy)
            for declared in self._item_names(node):
                self.defined.setdefault(declared, EXTENDS + "thrust")
                self.extended.add(declared)
        if kind == "preproc_include":
            self.include_rows.append(node.start_point[0])
            if self._under_condition(node):
                self.conditional_rows.add(node.start_point[0])
        elif kind in ("preproc_def", "preproc_function_def"):
            self._note_macro(node)
        elif kind in _CONTAINERS:
            self.visit_container(node)
        elif kind == "namespace_definition":
            body = node.child_by_field_name("body")
            if body is not None:
                self.visit_container(body)
        elif kind == "linkage_specification":
            body = node.child_by_field_name("body")
            if body is None:
                return
            if body.type == "declaration_list":
                self.visit_container(body)
            else:
                self.visit(body, outer)
        elif kind == "template_declaration":
            inner = next(
                # not a comment after the parameters: `typename Layout>  ///< Layout function`
                (
                    c
                    for c in node.named_children
                    if c.type not in ("template_parameter_list", "comment")
                ),
                None,
            )
            if inner is not None:
                self.visit(inner, outer)
        elif kind == "function_definition":
            if self._is_surely_host(node) and not self._is_device_function(node):
                name = self._declared_name(node.child_by_field_name("declarator"))
                template = node.parent is not None and node.parent.type == "template_declaration"
                if template and name in self.read_in_decltype and not self._needs_host_std(node):
                    return  # its type is deduced in device code's `decltype` (CUTLASS 3)
                self.blank(outer)
                self._blank_cut_short_head(node)
                if name:
                    self.host_functions.add(name)
                    if template:
                        self.host_templates.add(name)
            elif node.has_error:
                self._visit_swallowed(node)
        elif kind == "template_instantiation":
            # `template void reduce<int>(...);` of a host template blanked above
            words = self._head_words(node)
            name = self._instantiated_name(node)
            if name in self.host_functions and not words & (_DEVICE_WORDS | self.device_macros):
                self.blank(outer)
            elif name:
                self.instantiated.add(name)
        elif kind == "declaration":
            self._visit_declaration(node, outer)
        elif kind in ("struct_specifier", "class_specifier", "union_specifier"):
            bases = next((c for c in node.children if c.type == "base_class_clause"), None)
            if bases is not None and self._needs_host_std(bases):
                self.blank(outer)  # `class cuda_exception : public std::exception {...};`
            else:
                self._visit_class(node)
            self._note_hidden_class(node)
        elif kind in ("using_declaration", "alias_declaration", "type_definition") and (
            self._needs_host_std(node)
        ):
            self.blank(outer)
        elif kind == "type_definition" and self._names_host_type(node):
            self.blank(outer)  # `typedef pthread_t CUTThread;`: a host-only name
        elif kind == "expression_statement":
            self._visit_invocation(node, outer)
        elif kind == "type_definition":  # `typedef struct {...} Name;`: its members
            for child in node.named_children:
                if child.type in ("struct_specifier", "class_specifier", "union_specifier"):
                    self._visit_class(child)

    def _visit_swallowed(self, node: tree_sitter.Node) -> None:
        """Items a misread function body swallowed, walked as the namespace-scope items they are.

        tree-sitter may carry a kernel's body on past its `}` (two `#ifdef`s in a braced
        initializer: ThunderKittens' interpreter kernel took the `__host__` launcher after it
        along, and NVRTC rejected the host function). Only items past the `}` that closes the
        body's `{` are walked; what lies inside is the function's, however misread."""
        body = node.child_by_field_name("body")
        if body is None or body.type != "compound_statement":
            return
        closed = _matching_brace(self.data, body.start_byte, body.end_byte)
        if closed is None or closed >= body.end_byte:
            return
        stack = list(reversed(body.children))
        while stack:
            child = stack.pop()
            if child.end_byte <= closed or child.type in ("field_declaration_list", "comment"):
                continue
            if child.start_byte >= closed and child.type in (
                "template_declaration",
                "function_definition",
            ):
                self.visit(child, child)
            else:
                stack.extend(reversed(child.children))

    def _note_macro(self, node: tree_sitter.Node) -> None:
        name = node.child_by_field_name("name")
        value = node.child_by_field_name("value")
        if name is None or value is None:
            return
        self.bodies[self.text(name)] = self.own_bodies[self.text(name)] = self.text(value)
        words = set(_WORD.findall(self.text(value)))
        if words & _DEVICE_WORDS:
            self.device_macros.add(self.text(name))
            self.defined[self.text(name)] = "device"
        elif "__host__" in words:
            self.host_macros.add(self.text(name))
            self.defined[self.text(name)] = "host"
        elif words == {"constexpr"} and node.type == "preproc_def":
            self.constexpr_macros.add(self.text(name))
            self.defined[self.text(name)] = "constexpr"
        else:
            kind = _attribute_kind(node.type, self.text(value), self._parameters(node))
            if kind is not None:
                self.defined[self.text(name)] = kind

    def _parameters(self, node: tree_sitter.Node) -> list[str]:
        params = node.child_by_field_name("parameters")
        return [self.text(c) for c in params.named_children] if params is not None else []

    def _visit_invocation(self, node: tree_sitter.Node, outer: tree_sitter.Node) -> None:
        """`LIST(DECLARE)` at namespace scope: a macro invocation (no expression stands there).

        cuda-samples' EGL interop declares host function pointers this way, of types from host
        headers that the unit drops. Blanked when its whole expansion, as far as the user's
        macros tell, holds no device word and nothing device code could use (a constant, a
        type, a template); one whose macro is unknown (yet) is kept and noted.
        """
        call = node.named_children[0] if node.named_child_count == 1 else None
        if call is None or call.type != "call_expression":
            return
        function = call.child_by_field_name("function")
        if function is None or function.type != "identifier":
            return
        name = self.text(function)
        if name not in self.bodies:
            self.invoked.add(name)
            return
        words: set[str] = set()
        todo = [name, *_WORD.findall(self.text(call.child_by_field_name("arguments") or call))]
        while todo and len(words) < 4096:
            word = todo.pop()
            if word not in words:
                words.add(word)
                todo.extend(_WORD.findall(self.bodies.get(word, "")))
        usable = _DEVICE_WORDS | _MEMORY_SPACE_WORDS | self.device_macros | _USABLE_WORDS
        if not words & usable:
            self.blank(outer)

    def blank_instantiation_macros(self) -> None:
        """`INSTANTIATE(float)` lines, `;` or not, of a macro whose body is an explicit
        instantiation (`template void launch<T>(...);`) of a host template: blanked with it
        (DeepSpeed's inference kernels; tree-sitter reads a run of such lines as anything)."""
        for macro, body in self.bodies.items():
            instantiated = _EXPLICIT_INSTANTIATION.search(body)
            if instantiated is None or set(_WORD.findall(body)) & (
                _DEVICE_WORDS | self.device_macros
            ):
                continue
            if instantiated.group(1) not in self.host_functions:
                self.instantiated.add(instantiated.group(1))  # a header's, maybe: walked again
                continue
            line = rb"^[ \t]*" + re.escape(macro.encode()) + rb"[ \t]*\([^;{}\n]*\)[ \t]*;?[ \t]*$"
            for match in re.finditer(line, self.data, re.MULTILINE):
                self.ranges.append((match.start(), match.end()))

    def _head_words(self, node: tree_sitter.Node) -> set[str]:
        """Words before the declarator: specifiers, qualifiers, macros standing for them."""
        declarator = node.child_by_field_name("declarator")
        end = declarator.start_byte if declarator is not None else node.end_byte
        head = self.data[node.start_byte : end].decode("utf-8", errors="replace")
        return set(_WORD.findall(head))

    def _is_surely_host(self, node: tree_sitter.Node) -> bool:
        """Only a well-formed head is judged; a head tree-sitter misread is left to NVRTC.

        `struct __align__(16) V {...};` parses as a function with an ERROR in its head; a
        definition with no return type is a constructor (`S::S()`) or another misread.
        """
        declarator = node.child_by_field_name("declarator")
        body = node.child_by_field_name("body")
        if declarator is None or body is None or not self._is_function_declarator(declarator):
            return False
        for child in node.children:
            if child.start_byte >= body.start_byte:
                break
            if child.id == declarator.id and _errors_only_in_parameters(declarator):
                continue  # `std::initializer_list<int> outputs = {}`: tree-sitter's gap, not
                # the head's (ggml's ggml_can_fuse_subgraph was kept for NVRTC)
            if child.type == "ERROR" or child.is_missing or child.has_error:
                # a head misread because of an unknown macro; a known __host__ one is clear,
                # and so is a host calling convention (`void CUDART_CB callback(...)`)
                words = self._head_words(node)
                if words & (_DEVICE_WORDS | self.device_macros):
                    return False
                return bool(words & self.host_macros or words & _CALLING_CONVENTIONS)
        if declarator.start_byte == node.start_byte:  # no return type: ctor or misparse
            head = self.data[declarator.start_byte : declarator.end_byte]
            return b"::" in head or self._host_definition_macro(declarator)
        return True

    def _host_definition_macro(self, declarator: tree_sitter.Node) -> bool:
        """`PYBIND11_MODULE(name, m) {...}`, `TORCH_LIBRARY_IMPL(ns, CUDA, m) {...}`: a macro
        that defines a host function around the body (PyTorch extensions end with one). One
        of those, or a macro whose expansion (as far as the headers tell) has no device word."""
        inner = declarator.child_by_field_name("declarator")
        if inner is None or inner.type != "identifier":
            return False
        name = self.text(inner)
        if name in _HOST_DEFINITION_MACROS:
            return True
        body = self.bodies.get(name)
        return body is not None and not (set(_WORD.findall(body)) & _DEVICE_WORDS)

    def _is_device_function(self, node: tree_sitter.Node) -> bool:
        words = self._head_words(node)
        head = self._cut_short_head(node)
        if head is not None:
            words |= set(_WORD.findall(self.text(head)))
        if words & _DEVICE_WORDS or words & self.device_macros:
            return True
        # a constexpr function is judged by NVRTC exactly as nvcc would (relaxed-constexpr rules)
        constexpr = "constexpr" in words or bool(words & self.constexpr_macros)
        return constexpr and not self._needs_host_std(node, _STD_FOR_CONSTEXPR)

    def _visit_declaration(self, node: tree_sitter.Node, outer: tree_sitter.Node) -> None:
        if _ends_cut(node):
            return  # misread: `struct CUTE_ALIGNAS(16) array_aligned : ...` (CuTe), for NVRTC
        words = self._head_words(node)
        if words & _MEMORY_SPACE_WORDS or words & _DEVICE_WORDS or words & self.device_macros:
            return
        for child in node.named_children:
            if child.type in ("struct_specifier", "class_specifier", "union_specifier"):
                self._visit_class(child)
        # `extern "C" struct S {...};` reads as a declaration whose declarator is MISSING: a
        # type, not a host variable (numba's nrt.cuh)
        declarators = [
            c
            for c in node.children_by_field_name("declarator")
            if c.type != "ERROR" and not c.is_missing
        ]
        if any(self._is_function_declarator(d) for d in declarators):
            if b"->" not in self.data[node.start_byte : node.end_byte]:
                self.blank(outer)  # a host function's prototype
            # else `auto has_size(T*) -> bool_constant<...>;` (CuTe): a declaration only for
            # decltype to read, which nvcc accepts from device code whatever its space
            return
        if self._needs_host_std(node):
            self.blank(outer)
            return
        if not declarators:
            return  # `struct S {...};`, `enum {...};`
        if "typedef" in words:
            return
        if words & {"const", "constexpr"} and "extern" not in words:
            names = [self._declared_name(d) for d in declarators]
            if all(names):
                for name in names:
                    self.constants.append((name or "", outer.start_byte, outer.end_byte))
            return
        self.blank(outer)  # a host variable: NVRTC rejects those in JIT mode

    def _visit_class(self, node: tree_sitter.Node) -> None:
        body = node.child_by_field_name("body")
        if body is None:
            return
        for member in _members(body):
            if member.type in ("preproc_def", "preproc_function_def"):
                self._note_macro(member)
                continue
            if member.type == "preproc_call" and self.text(member).startswith("#include"):
                # `#include "memory/memory.cuh"` inside `struct group {` (ThunderKittens;
                # tree-sitter reads it as a `preproc_call` there): read and registered like
                # one at namespace scope
                self.include_rows.append(member.start_point[0])
                if self._under_condition(member):
                    self.conditional_rows.add(member.start_point[0])
                continue
            target = member
            if member.type == "template_declaration":
                target = next(
                    (
                        c
                        for c in member.named_children
                        if c.type not in ("template_parameter_list", "comment")
                    ),
                    member,
                )
            if target.type == "function_definition":
                declarator = target.child_by_field_name("declarator")
                if not self._is_function_declarator(declarator):
                    continue  # misread: `STATIC_ASSERT(A{} % B{} == 0);` as `M (A) {}` (CuTe)
                if not self._is_device_function(target) and not self._is_defaulted(target):
                    self.blank(member)
                    self._blank_cut_short_head(member)
            elif target.type == "field_declaration" and _defines_class(target):
                # `struct Arguments { ... };` (CUTLASS 2.x): a nested class is walked member by
                # member; its host methods go, the class stays for the device code naming it
                for child in target.named_children:
                    if child.type in _CLASS_TYPES and child.child_by_field_name("body"):
                        self._visit_class(child)
            elif target.type in ("field_declaration", "declaration") and (
                self._needs_host_std(target) or self._names_host_type(target)
            ):
                self.blank(member)
            elif target.type == "alias_declaration" and self._needs_host_std(target):
                # `using engine_type = std::mt19937;` (CUTLASS's reference/host/tensor_fill.h):
                # gone, and so are the members of its type
                self.blank(member)
                name = target.child_by_field_name("name")
                if name is not None:
                    self.host_aliases.add(self.text(name))

    def _cut_short_head(self, node: tree_sitter.Node) -> tree_sitter.Node | None:
        """tree-sitter reads `MACRO explicit S(float x) {...}` or `MACRO friend bool f() {...}`
        as a member (`MACRO explicit`) whose `;` is missing, then a function with no head: that
        member (before `node`) is the function's head."""
        before = node.prev_named_sibling
        if before is None:
            return None
        if before.type in ("preproc_if", "preproc_ifdef"):
            # `#if ... __device__ __noinline__ #else HD #endif` then the function (half_t)
            heads = _branch_items(before)
            cut = all(h.type == "field_declaration" and _ends_cut(h) for h in heads)
            return before if heads and cut else None
        return before if before.type == "field_declaration" and _ends_cut(before) else None

    def _blank_cut_short_head(self, node: tree_sitter.Node) -> None:
        head = self._cut_short_head(node)
        if head is not None:
            self.blank(head)

    def _names_host_type(self, node: tree_sitter.Node) -> bool:
        """A member whose type only host headers declare (`glob_t g;`, `struct timeval t;`),
        or only host compilers see (`_note_hidden_class`)."""
        kind = node.child_by_field_name("type")
        if kind is None:
            return False
        words = set(_WORD.findall(self.text(kind)))
        return bool(words & _HOST_TYPES or words & self.hidden or words & self.host_aliases)

    def _note_hidden_class(self, node: tree_sitter.Node) -> None:
        """A class defined under `#if !defined(__CUDACC_RTC__)` exists for nvcc, not NVRTC.

        CUTLASS's `platform::unique_ptr` is one: the host class `DeviceAllocation` keeps a
        member of it, which NVRTC rejects. Its name is noted (as a macro kind, so that headers
        blanked before it was known are walked again) and members of its type are blanked.
        """
        name = node.child_by_field_name("name")
        body = node.child_by_field_name("body")
        if name is None or body is None or name.type != "type_identifier":
            return
        child, parent = node, node.parent
        while parent is not None:
            if parent.type in ("preproc_if", "preproc_ifdef") and _hides_from_nvrtc(
                self.text(parent).split("\n", 1)[0]
            ):
                alternative = parent.child_by_field_name("alternative")
                if alternative is None or child.start_byte < alternative.start_byte:
                    self.defined[self.text(name)] = HIDDEN_FROM_NVRTC
                    return
            child, parent = parent, parent.parent

    def _skip_dropped(self, node: tree_sitter.Node, outer: tree_sitter.Node) -> bool:
        """Blank an item that names a dropped library's namespace (`thrust::tuple<...>`) and
        note it, unless it is host code the walker blanks anyway (no note then)."""
        if not self.dropped or outer.has_error:
            return False  # a misread item: blanking part of it would leave the rest stranded
        if _in_error(outer) and not (
            node.type in _WHOLE_ITEM_TYPES
            and self.data[outer.end_byte - 1 : outer.end_byte] in (b"}", b";")
        ):
            return False  # in a misread region only an item complete in itself is left out
        named = self._dropped_name(outer)
        if named is None:
            return False
        self.blank(outer)
        if node.type == "function_definition" and (
            self._is_surely_host(node) and not self._is_device_function(node)
        ):
            return True
        if node.type == "declaration" and not self._head_words(node) & (
            _MEMORY_SPACE_WORDS | _DEVICE_WORDS | self.device_macros | {"typedef"}
        ):
            return True  # a host variable or prototype
        library = self.dropped[named]
        for name in self._item_names(node):  # what names it is left out too (`range_view<T>`)
            if self.opens_dropped or name in self.extended:
                continue  # an overload in the library's namespace (CuPy's `thrust::atanh`)
            self.dropped.setdefault(name, library)
            self.defined.setdefault(name, DROPPED + library)
        row, column = outer.start_point
        line = self.data[outer.start_byte : outer.end_byte].split(b"\n", 1)[0]
        end = len(line.decode("utf-8", errors="replace").rstrip())
        self.skipped.append((Span.of(row, column, row, column + end), named, library))
        return True

    def _dropped_name(self, node: tree_sitter.Node) -> str | None:
        """The dropped name that `node` uses (`thrust::get<0>(t)`, `range_view<T>`), if any."""
        source = self.data[node.start_byte : node.end_byte]
        if not any(n.encode() in source for n in self.dropped):
            return None  # cheap: most items name none
        declared = set(self._item_names(node))
        stack = [node]
        while stack:
            current = stack.pop()
            if current.type in _NAME_TYPES:
                word = self.text(current)
                if word in self.dropped and word not in declared and not self._extended(current):
                    return word
            stack.extend(current.children)
        return None

    def _extended(self, node: tree_sitter.Node) -> bool:
        """`thrust::complex` where user code declares `complex` in namespace thrust."""
        parent = node.parent
        if parent is None or parent.type != "qualified_identifier":
            return False
        name = parent.child_by_field_name("name")
        if name is None:
            return False
        word = _WORD.match(self.text(name))
        return word is not None and word.group(0) in self.extended

    def _item_names(self, node: tree_sitter.Node) -> list[str]:
        """The names a namespace-scope item declares: a class's, a function's, an alias's."""
        if node.type in ("struct_specifier", "class_specifier", "union_specifier"):
            name = node.child_by_field_name("name")
            return [self.text(name)] if name is not None and name.type == "type_identifier" else []
        if node.type == "alias_declaration":
            name = node.child_by_field_name("name")
            return [self.text(name)] if name is not None else []
        names: list[str] = []
        for declarator in node.children_by_field_name("declarator"):
            if declarator.type == "type_identifier":  # `typedef ... Name;`
                names.append(self.text(declarator))
            else:
                declared = self._declared_name(declarator)
                if declared:
                    names.append(declared)
        return names

    def _is_defaulted(self, node: tree_sitter.Node) -> bool:
        body = node.child_by_field_name("body")
        return body is None

    def _is_function_declarator(self, node: tree_sitter.Node | None) -> bool:
        while node is not None:
            # `operator T*() {...}`: a conversion operator (ThunderKittens' `__host__` ones)
            if node.type in ("function_declarator", "operator_cast"):
                return True
            if node.type in ("init_declarator", "array_declarator"):
                return False
            node = _inner_declarator(node)
        return False

    def _instantiated_name(self, node: tree_sitter.Node) -> str | None:
        """`reduce` of `template void reduce<int>(...);`."""
        declarator = node.child_by_field_name("declarator")
        while declarator is not None and declarator.type != "function_declarator":
            declarator = declarator.child_by_field_name("declarator")
        inner = declarator.child_by_field_name("declarator") if declarator else None
        if inner is None:
            return None
        if inner.type == "template_function":
            inner = inner.child_by_field_name("name")
        return self.text(inner).split("::")[-1] if inner is not None else None

    def _declared_name(self, node: tree_sitter.Node | None) -> str | None:
        while node is not None:
            if node.type == "identifier":
                return self.text(node)
            node = _inner_declarator(node)
        return None

    def _needs_host_std(
        self, node: tree_sitter.Node, provided: frozenset[str] = _STD_PROVIDED
    ) -> bool:
        """Whether `node` names something in `std::` that only host headers declare (not one
        of `provided`)."""
        if _STD_SCOPE.search(self.data, node.start_byte, node.end_byte) is None:
            return False  # cheap: big initializer lists need no tree walk
        stack: list[tuple[tree_sitter.Node, bool]] = [(node, False)]
        while stack:
            current, nested = stack.pop()  # nested: the name part of `cuda::std::tuple`
            inner: tree_sitter.Node | None = None
            if current.type == "qualified_identifier":
                scope = current.child_by_field_name("scope")
                name = current.child_by_field_name("name")
                if scope is not None and self.text(scope) == "std" and name is not None:
                    word = _WORD.match(self.text(name))
                    if not nested and (word is None or word.group(0) not in provided):
                        return True
                elif scope is not None and self.text(scope) not in ("", "::"):
                    inner = name  # `cuda::std::tuple<...>`: libcu++'s, not the host's
            if current.type == "using_declaration" and current.child_count >= 2:
                parts = [self.text(c) for c in current.named_children]
                if parts and parts[-1].startswith("std::"):
                    rest = parts[-1][5:]
                    if rest not in provided:
                        return True
            stack.extend((c, inner is not None and c.id == inner.id) for c in current.children)
        return False


_CLASS_TYPES = ("struct_specifier", "class_specifier", "union_specifier")


def _defines_class(node: tree_sitter.Node) -> bool:
    """Whether the member `node` defines a class (`struct tma { ... };`), with or without a
    declarator (`struct { ... } fields;`)."""
    kind = node.child_by_field_name("type")
    return (
        kind is not None
        and kind.type in _CLASS_TYPES
        and kind.child_by_field_name("body") is not None
    )


# `template void launch<T>(...)` in a macro's body: an explicit instantiation, and its name
_EXPLICIT_INSTANTIATION = re.compile(r"\btemplate\b(?!\s*<)[^;{}<(]*?\b(\w+)\s*[<(]")
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


def _matching_brace(data: bytes, start: int, end: int) -> int | None:
    """The byte just past the `}` that closes the `{` at `start`, if it comes before `end`
    (comments and string or character literals skipped)."""
    depth, index = 0, start
    while index < end:
        char = data[index : index + 1]
        if data.startswith(b"//", index):
            index = data.find(b"\n", index, end)
            if index < 0:
                return None
        elif data.startswith(b"/*", index):
            index = data.find(b"*/", index + 2, end)
            if index < 0:
                return None
            index += 1
        elif char in (b'"', b"'"):
            index += 1
            while index < end and data[index : index + 1] not in (char, b"\n"):
                index += 2 if data[index : index + 1] == b"\\" else 1
        elif char == b"{":
            depth += 1
        elif char == b"}":
            depth -= 1
            if depth == 0:
                return index + 1
        index += 1
    return None


def _in_error(node: tree_sitter.Node) -> bool:
    """Whether `node` lies inside an ERROR node (tree-sitter misread what surrounds it)."""
    parent = node.parent
    while parent is not None:
        if parent.type == "ERROR":
            return True
        parent = parent.parent
    return False


def _hides_from_nvrtc(directive: str) -> bool:
    """Whether `#if !defined(__CUDACC_RTC__)` (or `#ifndef __CUDACC_RTC__`) is `directive`."""
    return _NOT_RTC.fullmatch(directive.split("//")[0].split("/*")[0].strip()) is not None


def _inner_declarator(node: tree_sitter.Node) -> tree_sitter.Node | None:
    """The declarator inside `node`: its `declarator` field, or a reference declarator's
    (`std::ostream& operator<<(...)`: tree-sitter gives `&` declarators no field)."""
    inner = node.child_by_field_name("declarator")
    if inner is None and node.type == "reference_declarator" and node.named_children:
        inner = node.named_children[-1]
    return inner


def _ends_cut(node: tree_sitter.Node) -> bool:
    """Whether `node` ends with a `;` tree-sitter supplied (the text has none there)."""
    return bool(node.children) and node.children[-1].is_missing


#: Macros that define a host function around the body that follows them.
_HOST_DEFINITION_MACROS = frozenset(
    {"PYBIND11_MODULE", "TORCH_LIBRARY", "TORCH_LIBRARY_IMPL", "TORCH_LIBRARY_FRAGMENT",
     "TEST", "TEST_F", "TEST_P", "TYPED_TEST", "TEST_CASE", "BENCHMARK"}
)  # fmt: skip


def _errors_only_in_parameters(declarator: tree_sitter.Node) -> bool:
    """Whether a function declarator's parse errors all lie in its parameter list, its name
    and the head before it well read."""
    node: tree_sitter.Node | None = declarator
    while node is not None and node.type != "function_declarator":
        node = node.child_by_field_name("declarator")
    if node is None:
        return False
    parameters = node.child_by_field_name("parameters")
    if parameters is None:
        return False
    return not any(
        c.has_error or c.type == "ERROR" or c.is_missing
        for c in node.children
        if c.id != parameters.id
    ) and not (declarator.id != node.id and _outside_has_error(declarator, node))


def _outside_has_error(outer: tree_sitter.Node, inner: tree_sitter.Node) -> bool:
    """Whether `outer` has a parse error outside `inner` (a pointer or reference declarator
    around the function declarator)."""
    return any(
        (c.has_error or c.type == "ERROR" or c.is_missing)
        and not (c.start_byte <= inner.start_byte and inner.end_byte <= c.end_byte)
        for c in outer.children
    )


def _members(body: tree_sitter.Node) -> list[tree_sitter.Node]:
    """A class body's members, those under `#if`/`#ifndef` (every branch) included: a
    `__host__` constructor under `#ifndef LIB_NO_HOST` (ThunderKittens) is a member too."""
    members: list[tree_sitter.Node] = []
    for child in body.named_children:
        if child.type in ("preproc_if", "preproc_ifdef"):
            members.extend(_members_of(_branch_items(child)))
        else:
            members.append(child)
    return members


def _members_of(items: list[tree_sitter.Node]) -> list[tree_sitter.Node]:
    out: list[tree_sitter.Node] = []
    for item in items:
        if item.type in ("preproc_if", "preproc_ifdef"):
            out.extend(_members_of(_branch_items(item)))
        else:
            out.append(item)
    return out


def _branch_items(node: tree_sitter.Node) -> list[tree_sitter.Node]:
    """The items of every branch of a conditional (`#if`, `#else`, `#elif`), in order."""
    items: list[tree_sitter.Node] = []
    condition = node.child_by_field_name("condition")
    for child in node.named_children:
        if condition is not None and child.id == condition.id:
            continue
        if child.type in ("preproc_else", "preproc_elif", "preproc_elifdef"):
            items.extend(_branch_items(child))
        elif child.type not in ("identifier", "comment"):
            items.append(child)
    return items


def _apply_blanks(text: str, data: bytes, ranges: list[tuple[int, int]]) -> str:
    """Replace every character in the byte `ranges` except newlines by a space."""
    if not ranges:
        return text
    pieces: list[str] = []
    cursor = 0
    for s, e in _char_ranges(text, data, _merge(ranges)):
        s = max(s, cursor)
        if e <= s:
            continue
        pieces.append(text[cursor:s])
        pieces.append(_spaces(text[s:e]))
        cursor = e
    pieces.append(text[cursor:])
    return "".join(pieces)


def _char_ranges(text: str, data: bytes, ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted byte ranges of `data` (UTF-8 of `text`) as character ranges of `text`."""
    if len(data) == len(text):
        return ranges
    out: list[tuple[int, int]] = []
    byte_pos = char_pos = 0
    for start, end in ranges:  # sorted: decode only the gaps once
        char_pos += len(data[byte_pos:start].decode("utf-8", errors="surrogatepass"))
        s = char_pos
        char_pos += len(data[start:end].decode("utf-8", errors="surrogatepass"))
        out.append((s, char_pos))
        byte_pos = end
    return out


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _spaces(chunk: str) -> str:
    return "\n".join(" " * len(line) for line in chunk.split("\n"))


def _constant_ranges(
    constants: list[tuple[str, int, int]], text: str, data: bytes
) -> list[_Constant]:
    """The walker's constants (name, byte range) as declarations with character ranges."""
    by_decl: dict[tuple[int, int], list[str]] = {}
    for name, start, end in constants:
        by_decl.setdefault((start, end), []).append(name)
    decls = sorted(by_decl)
    return [
        _Constant(tuple(by_decl[decl]), s, e)
        for (s, e), decl in zip(_char_ranges(text, data, decls), decls, strict=True)
    ]


def _drop_unused_constants(
    main: str, main_read: str, own: list[_Constant], state: _IncludeState
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
    declared = {key: _rebased(c, read[key], texts[key]) for key, c in declared.items()}
    total: dict[str, int] = {}
    for text in (main, *state.headers.values()):
        for word in _WORD.findall(text):
            if word in wanted:
                total[word] = total.get(word, 0) + 1
    for key, constants in declared.items():
        unused: list[tuple[int, int]] = []
        text = texts[key]
        for constant in constants:
            mine = _WORD.findall(text[constant.start : constant.end])
            if not any(total.get(n, 0) > mine.count(n) for n in constant.names):
                unused.append((constant.start, constant.end))
        if unused:
            texts[key] = _blank_chars(text, unused)
    for name in state.constants:
        state.headers[name] = texts[name]
    return texts[""]


def _rebased(constants: list[_Constant], read: str, now: str) -> list[_Constant]:
    """`constants`' ranges in `read` as ranges in `now`: the same lines and columns (blanking
    keeps both; only `#include` lines, which hold no constant, were respelled)."""
    if read == now or len(read) == len(now) or not constants:
        return constants
    read_starts = _line_starts(read)
    now_starts = _line_starts(now)

    def moved(offset: int) -> int:
        row = bisect.bisect_right(read_starts, offset) - 1
        return now_starts[row] + offset - read_starts[row]

    return [_Constant(c.names, moved(c.start), moved(c.end)) for c in constants]


def _line_starts(text: str) -> list[int]:
    starts = [0]
    starts.extend(m.end() for m in re.finditer("\n", text))
    return starts


def _blank_chars(text: str, ranges: list[tuple[int, int]]) -> str:
    """`text` with the sorted character `ranges` made spaces (newlines stay)."""
    pieces: list[str] = []
    cursor = 0
    for s, e in ranges:
        if s < cursor:
            continue
        pieces.append(text[cursor:s])
        pieces.append(_spaces(text[s:e]))
        cursor = e
    pieces.append(text[cursor:])
    return "".join(pieces)
