"""One file's analysis: kernels, specs, the NVRTC compile, every diagnostic (CLI and LSP).

Two stages, so that diagnostics do not wait for code generation (whose cost grows with every
kernel of the file):

- `analyze_syntax`: kernels, specs, includes and NVRTC's front end alone (`-fdevice-syntax-only`,
  the same device unit, so the same messages at the same positions). Resources are not known
  yet (`FileAnalysis.resources_pending`).
- `add_resources`: code generation per kernel, for registers, spills, shared memory, stack and
  the problems only ptxas finds (placed on the kernel's name). Each kernel is generated from its
  own unit: the device unit with every other kernel's body cut (`KernelCuts`), so its key is
  what the kernel depends on (its text, helpers, macros, includes, options) and an edit inside
  one kernel generates that kernel alone. A body holding a preprocessor line is kept as is
  (cutting it could change what follows), a fallback to the whole unit for that body. When most
  kernels are new (a file just opened), one whole-unit compile serves them all.

`analyze` runs both (the CLI). Both are blocking (NVRTC in a compile process): the server runs
them in worker threads. Lines and columns of `FileAnalysis.diagnostics` are 1-based (as
printed), sorted by position.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from cuda_llm_lsp.compile.arch import resolve_arch
from cuda_llm_lsp.compile.cache import CompileCache, cache_key, compile_cached
from cuda_llm_lsp.compile.device_unit import DeviceUnit, build_device_unit
from cuda_llm_lsp.compile.isolated import CRASH_CODE, DEFAULT_TIMEOUT_S, TIMEOUT_CODE
from cuda_llm_lsp.compile.types import (
    CompileOptions,
    CompileResult,
    Diagnostic,
    Resources,
    Severity,
)
from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.source.kernels import Kernel, find_kernels, parse_tree
from cuda_llm_lsp.source.spec import TestSpec, parse_spec
from cuda_llm_lsp.source.text import Span, offset_of

log = logging.getLogger(__name__)

DEFAULT_MAX_DEVICE_CODE = 256_000  # characters of non-blank device code (about 8 s of NVRTC)
DEFAULT_MAX_FILE_CHARS = 8_000_000  # ~200,000 lines: past it nothing is parsed
DEFAULT_MAX_KERNELS = 500  # past it, no code generation and no spec checks past the 500th
WHOLE_UNIT_AT = 4  # kernels to generate at once from which one whole-unit compile is cheaper


@dataclass(frozen=True)
class KernelInfo:
    kernel: Kernel
    name_expression: str | None  # what NVRTC resolved for resources; None: unknown (template)
    resources: Resources | None
    spec: TestSpec | None
    pending: bool = False  # resources not known yet: code generation runs in the background

    @property
    def symbol_note(self) -> str:
        """Why resources are missing, for display ('' when they are known)."""
        if self.resources is not None:
            return ""
        if self.pending:
            return "updating…"
        if self.kernel.is_template and self.name_expression is None:
            return "template: no instantiation (add `instance` to its spec or launch it)"
        return "resources unknown"


@dataclass(frozen=True)
class FileAnalysis:
    path: Path | None
    text: str
    kernels: tuple[KernelInfo, ...]
    compile: CompileResult | None
    diagnostics: tuple[Diagnostic, ...]  # compile + include problems + spec errors, sorted
    # Set by `analyze_syntax` when code generation is still to run (`add_resources`).
    plan: CodegenPlan | None = field(default=None, compare=False, repr=False)

    @property
    def resources_pending(self) -> bool:
        return self.plan is not None

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.severity == "error")


@dataclass(frozen=True)
class CodegenPlan:
    """What `add_resources` needs from the syntax stage."""

    unit: DeviceUnit
    options: CompileOptions
    kernels: tuple[Kernel, ...]
    wanted: tuple[tuple[str, ...], ...]  # name expressions per kernel
    timeout_s: float


def compile_options(settings: Settings) -> CompileOptions:
    return CompileOptions(
        arch=resolve_arch(settings.arch),
        include_paths=tuple(settings.include_paths),
        defines=tuple(settings.defines),
        extra_flags=tuple(settings.nvrtc_flags),
    )


def device_code_size(unit: DeviceUnit) -> int:
    """Non-blank characters NVRTC would compile (NVRTC's time grows with them: ~3 s per 130 kB)."""
    parts = (unit.text, *unit.headers.values())
    return sum(len(part) - sum(part.count(c) for c in " \n\t\r") for part in parts)


def max_device_code() -> int:
    try:
        return int(os.environ.get("CUDA_LLM_MAX_DEVICE_CODE", DEFAULT_MAX_DEVICE_CODE))
    except ValueError:
        return DEFAULT_MAX_DEVICE_CODE


def name_expressions(kernel: Kernel, spec: TestSpec | None) -> tuple[str, ...]:
    """What to ask NVRTC to resolve for `kernel`: its name, or its instantiations if a template."""
    if not kernel.is_template:
        return (kernel.name,)
    if spec is not None and spec.instance:
        return (spec.instance,)
    return tuple(dict.fromkeys(kernel.instantiations))


def analyze(text: str, path: Path | None, settings: Settings) -> FileAnalysis:
    """Both stages (the CLI): diagnostics and resources. Raises only NvrtcUnavailable."""
    return add_resources(analyze_syntax(text, path, settings))


def analyze_syntax(text: str, path: Path | None, settings: Settings) -> FileAnalysis:
    """Analyse `text` (the contents of `path`, possibly unsaved) up to NVRTC's front end: every
    diagnostic but ptxas's; resources pending. Raises only NvrtcUnavailable."""
    if "\0" in text:
        binary = Diagnostic(
            1, 1, 1, 2, "error", "the file contains NUL bytes (binary content?): not compiled",
            code="input",
        )  # fmt: skip
        return FileAnalysis(path, text, (), None, (binary,))
    max_chars = _limit("CUDA_LLM_MAX_FILE_CHARS", DEFAULT_MAX_FILE_CHARS)
    if len(text) > max_chars:
        too_long = Diagnostic(
            1, 1, 1, 2, "warning",
            f"not compiled or analysed: {len(text) // 1000:,} thousand characters is over "
            f"the limit of {max_chars // 1000:,} thousand (CUDA_LLM_MAX_FILE_CHARS raises it): "
            "no kernels, specs, diagnostics or resources for this file",
            code="size",
        )  # fmt: skip
        return FileAnalysis(path, text, (), None, (too_long,))
    parsed = parse_tree(text)  # one tree-sitter parse for the kernels and the device unit
    kernels = find_kernels(text, parsed)
    diagnostics: list[Diagnostic] = []
    max_kernels = _limit("CUDA_LLM_MAX_KERNELS", DEFAULT_MAX_KERNELS)
    too_many = len(kernels) > max_kernels
    too_many_warning: Diagnostic | None = None
    if too_many:
        message = (
            f"{len(kernels)} kernels is over the limit of {max_kernels} per file "
            "(CUDA_LLM_MAX_KERNELS raises it): no resources for any kernel, and the specs of "
            "this kernel and those after it are not checked"
        )
        where = kernels[max_kernels].name_span
        too_many_warning = _span_diagnostic(where, message, "size", "warning")
    specs: list[TestSpec | None] = []
    for index, kernel in enumerate(kernels):
        if index >= max_kernels:
            specs.append(None)
            continue
        spec, problems = _spec_of(kernel, text)
        specs.append(spec)
        diagnostics.extend(
            _span_diagnostic(p.span, p.message, "spec", p.severity) for p in problems
        )
    unit = build_device_unit(text, path, settings.include_paths, parsed)
    diagnostics.extend(
        _span_diagnostic(p.span, p.message, "include", p.severity) for p in unit.problems
    )
    wanted = tuple(
        name_expressions(k, s) if i < max_kernels else ()
        for i, (k, s) in enumerate(zip(kernels, specs, strict=True))
    )
    flat = tuple(dict.fromkeys(e for group in wanted for e in group))
    size, limit = device_code_size(unit), max_device_code()
    if size > limit:
        skipped_specs = (
            f"; specs past kernel {max_kernels} of {len(kernels)} are not checked "
            "(CUDA_LLM_MAX_KERNELS raises the limit)"
            if too_many
            else ""
        )
        too_big = Diagnostic(
            1, 1, 1, 2, "warning",
            f"not compiled: {size // 1000} kB of device code is over the {limit // 1000} kB "
            "limit for compiling on every edit (CUDA_LLM_MAX_DEVICE_CODE raises it)"
            + skipped_specs,
            code="size",
        )  # fmt: skip
        unknown = tuple(KernelInfo(k, None, None, s) for k, s in zip(kernels, specs, strict=True))
        ordered = tuple(sorted(dict.fromkeys([*diagnostics, too_big]), key=_position))
        return FileAnalysis(path, text, unknown, None, ordered)
    if too_many_warning is not None:
        diagnostics.append(too_many_warning)
    options = compile_options(settings)
    timeout_s = float(getattr(settings, "compile_timeout_s", DEFAULT_TIMEOUT_S))
    result = compile_cached(unit, options, flat, syntax_only=True, timeout_s=timeout_s)
    diagnostics.extend(_place(d, kernels) for d in result.diagnostics)
    plan = None
    if result.ok and not too_many:
        plan = CodegenPlan(unit, options, tuple(kernels), wanted, timeout_s)
    infos = tuple(
        KernelInfo(k, e[0] if e else None, None, s, pending=plan is not None and bool(e))
        for k, s, e in zip(kernels, specs, wanted, strict=True)
    )
    ordered = tuple(sorted(dict.fromkeys(diagnostics), key=_position))
    return FileAnalysis(path, text, infos, result, ordered, plan)


def add_resources(front: FileAnalysis, cancelled: Callable[[], bool] | None = None) -> FileAnalysis:
    """`front` (from `analyze_syntax`) with each kernel's resources and ptxas's problems; only
    kernels whose dependencies changed are generated again. `cancelled` is asked between
    kernels: when it says so, `front` comes back unchanged (a newer edit supersedes it)."""
    plan = front.plan
    if plan is None:
        return front
    results = _generate(plan, cancelled or (lambda: False))
    if results is None:
        return front
    syntax = front.compile
    assert syntax is not None
    diagnostics = list(front.diagnostics)
    infos: list[KernelInfo] = []
    merged: dict[str, Resources] = {}
    generated: list[Diagnostic] = []  # what code generation adds to the compile's own
    ok = syntax.ok
    for info, expressions, result in zip(front.kernels, plan.wanted, results, strict=True):
        ok = ok and result.ok
        merged.update(result.resources)
        kept = [d for d in result.diagnostics if d.code in _CODEGEN_CODES]
        generated.extend(_place(d, list(plan.kernels)) for d in kept)
        resolved = next((e for e in expressions if e in result.resources), None)
        chosen = resolved or (expressions[0] if expressions else None)
        resources = result.resources.get(resolved) if resolved else None
        infos.append(replace(info, name_expression=chosen, resources=resources, pending=False))
        spec = info.spec
        if result.ok and spec is not None and spec.instance and resolved is None:
            message = (
                f'spec instance "{spec.instance}" is not a valid instantiation of '
                f"{info.kernel.name}: resources unknown"
            )
            diagnostics.append(_span_diagnostic(info.kernel.name_span, message, "spec", "warning"))
    diagnostics.extend(generated)
    compile_result = replace(
        syntax,
        ok=ok,
        diagnostics=tuple(dict.fromkeys([*syntax.diagnostics, *generated])),
        resources=merged,
        from_cache=syntax.from_cache and all(r.from_cache for r in results),
    )
    ordered = tuple(sorted(dict.fromkeys(diagnostics), key=_position))
    return FileAnalysis(front.path, front.text, tuple(infos), compile_result, ordered)


_CODEGEN_CODES = ("ptxas", "nvrtc", CRASH_CODE, TIMEOUT_CODE)  # what only code generation finds
# Per-kernel code generation results, by the key of the kernel's own unit (memory only: after a
# restart, one whole-unit compile, cached on disk, serves every kernel again).
_kernel_cache = CompileCache(memory_entries=4096, use_disk=False)


def _generate(plan: CodegenPlan, cancelled: Callable[[], bool]) -> list[CompileResult] | None:
    """One code generation result per kernel of `plan` (None when cancelled)."""
    if cancelled():
        return None
    nothing = CompileResult(ok=True, arch=plan.options.arch, diagnostics=(), log="")
    cuts = KernelCuts(plan)
    results: dict[int, CompileResult] = {}
    missing: list[int] = []
    for i in range(len(plan.kernels)):
        hit = _kernel_cache.get(cuts.key(i)) if plan.wanted[i] else nothing
        if hit is None:
            missing.append(i)
        else:
            results[i] = hit
    if len(missing) >= WHOLE_UNIT_AT:  # most kernels new: one compile of the whole unit
        flat = tuple(dict.fromkeys(e for group in plan.wanted for e in group))
        whole = compile_cached(plan.unit, plan.options, flat, timeout_s=plan.timeout_s)
        # a crash is the file's (each kernel's own unit would crash too); past the time
        # limit, the kernels one by one may each fit in it
        crashed = any(d.code == CRASH_CODE for d in whole.diagnostics)
        if whole.ok or crashed:
            for n, i in enumerate(missing):
                share = _share_of(whole, plan, i, first=n == 0)
                if whole.ok:
                    _kernel_cache.put(cuts.key(i), share)
                results[i] = share
            missing = []
    for i in missing:
        if cancelled():
            return None
        result = _kernel_cache.compile(
            cuts.unit(i), plan.options, plan.wanted[i], timeout_s=plan.timeout_s
        )
        if not result.ok and not any(d.code in _CODEGEN_CODES for d in result.errors):
            # cutting the other kernels broke the unit (a front-end error that the whole
            # unit does not have): generate from the whole unit instead
            log.info("kernel %s: its own unit failed; using the whole unit", plan.kernels[i].name)
            whole = compile_cached(
                plan.unit, plan.options, plan.wanted[i], timeout_s=plan.timeout_s
            )
            result = _share_of(whole, plan, i, first=True)
        _kernel_cache.put(cuts.key(i), result)
        results[i] = result
    return [results[i] for i in range(len(plan.kernels))]


class KernelCuts:
    """Each kernel's own unit and its cache key, from one pass over the device unit.

    A kernel's unit is the device unit with every other kernel's body cut, leaving its
    declaration (`;`): what the kernel depends on, unchanged by an edit inside another body,
    and no code generated for the others. Bodies holding a preprocessor line are never cut
    (cutting one could change the code after it). The key hashes the unit with every cuttable
    body cut (the skeleton: helpers, macros, includes, signatures, options) once, then per
    kernel its own body and name expressions, so it costs the file's size, not size x kernels.
    """

    def __init__(self, plan: CodegenPlan) -> None:
        self.plan = plan
        text = plan.unit.text
        self.bodies: dict[int, tuple[int, int]] = {}  # kernel index -> [start, end) of its body
        at = 0
        for i, kernel in enumerate(plan.kernels):
            start = offset_of(text, kernel.body_span.start)
            end = offset_of(text, kernel.body_span.end)
            body = text[start:end]
            if start < at or not body.startswith("{") or not body.endswith("}"):
                continue  # the device unit does not line up with the kernels: leave it whole
            if _DIRECTIVE.search(body):
                continue
            self.bodies[i] = (start, end)
            at = end
        skeleton = self._text(keep=None)
        base = cache_key(replace(plan.unit, text=skeleton), plan.options, ())
        self._base = base

    def key(self, index: int) -> str:
        span = self.bodies.get(index)
        body = self.plan.unit.text[span[0] : span[1]] if span else ""
        digest = hashlib.sha256(self._base.encode())
        extra = json.dumps([index, list(self.plan.wanted[index])])
        digest.update(extra.encode())
        digest.update(body.encode("utf-8", errors="surrogatepass"))
        return digest.hexdigest()

    def unit(self, index: int) -> DeviceUnit:
        return replace(self.plan.unit, text=self._text(keep=index))

    def _text(self, keep: int | None) -> str:
        text = self.plan.unit.text
        pieces: list[str] = []
        at = 0
        for i, (start, end) in self.bodies.items():
            if i == keep:
                continue
            pieces.append(text[at:start])
            pieces.append(";")
            at = end
        pieces.append(text[at:])
        return "".join(pieces)


def _share_of(whole: CompileResult, plan: CodegenPlan, index: int, first: bool) -> CompileResult:
    """Kernel `index`'s part of a whole-unit compile: its resources, the problems that name it
    (and, for the `first` kernel, those naming no kernel)."""
    kernels = list(plan.kernels)
    kernel = kernels[index]
    mine: list[Diagnostic] = []
    for d in whole.diagnostics:
        if d.code not in _CODEGEN_CODES:
            continue
        placed = _place(d, kernels)
        if placed is d:  # names no kernel
            if first:
                mine.append(d)
        elif placed.line == kernel.name_span.start.line + 1:
            mine.append(d)
    wanted = plan.wanted[index]
    return CompileResult(
        ok=not any(d.severity == "error" for d in mine) and (whole.ok or not first),
        arch=whole.arch,
        diagnostics=tuple(mine),
        log="",
        resources={e: r for e, r in whole.resources.items() if e in wanted},
        from_cache=whole.from_cache,
    )


_DIRECTIVE = re.compile(r"^[ \t]*#", re.MULTILINE)


def _limit(variable: str, default: int) -> int:
    try:
        return int(os.environ.get(variable, default))
    except ValueError:
        return default


def _spec_of(kernel: Kernel, text: str) -> tuple[TestSpec | None, list]:
    """The kernel's spec, remembered: an edit elsewhere leaves the kernel (positions included)
    and its text equal, and the spec's meaning depends on nothing else (parse_spec reads the
    kernel's own body for pointer roles)."""
    if kernel.spec is None:
        return None, []
    key = (kernel, kernel.span.slice(text))
    with _specs_lock:
        found = _specs.get(key)
        if found is not None:
            _specs.move_to_end(key)
            return found
    spec = _parse_spec(kernel, text)
    with _specs_lock:
        _specs[key] = spec
        while len(_specs) > 4096:
            _specs.popitem(last=False)
    return spec


_specs: OrderedDict[tuple[Kernel, str], tuple[TestSpec | None, list]] = OrderedDict()
_specs_lock = threading.Lock()


def _parse_spec(kernel: Kernel, text: str) -> tuple[TestSpec | None, list]:
    try:
        return parse_spec(kernel, text)
    except NotImplementedError:
        return None, []
    except Exception:  # a bug in spec parsing must not cost the user the compile diagnostics
        log.exception("parsing the spec of %s failed", kernel.name)
        return None, []


def _span_diagnostic(
    span: Span, message: str, code: str, severity: Severity = "error"
) -> Diagnostic:
    end = span.end if span.end > span.start else span.start
    end_column = end.column + 1 if end > span.start else span.start.column + 2
    return Diagnostic(
        span.start.line + 1, span.start.column + 1, end.line + 1, end_column, severity, message,
        code=code,
    )  # fmt: skip


def _place(d: Diagnostic, kernels: list[Kernel]) -> Diagnostic:
    """ptxas problems carry no line: put them on the kernel they name.

    NVRTC's log names the mangled symbol; `parse_log` already replaced it with the name
    expression ('k' or 'k<128>'), so the kernel's name is matched with or without arguments.
    """
    if d.code != "ptxas":
        return d
    for kernel in kernels:
        names = {kernel.name, kernel.qualified_name}
        quoted = any(f"'{n}'" in d.message or f"'{n}<" in d.message for n in names)
        if quoted or kernel.name in _mangled_names(d.message):
            placed = _span_diagnostic(kernel.name_span, d.message, d.code, d.severity)
            return replace(d, line=placed.line, column=placed.column,
                           end_line=placed.end_line, end_column=placed.end_column)  # fmt: skip
    return d


_MANGLED = re.compile(r"\b_Z(N?)(\w+)")


def _mangled_names(message: str) -> set[str]:
    """Function names of the Itanium-mangled symbols quoted in `message` ('_ZN2ns1kEPf': k).

    A failed compile has no lowered names, so ptxas's message keeps the mangled symbol.
    """
    names: set[str] = set()
    for match in _MANGLED.finditer(message):
        nested, rest = match.group(1), match.group(2)
        last = ""
        while (length := re.match(r"\d+", rest)) is not None:
            size, start = int(length.group(0)), length.end()
            last, rest = rest[start : start + size], rest[start + size :]
            if not nested:
                break
        if last:
            names.add(last)
    return names


def _position(d: Diagnostic) -> tuple[int, int, int]:
    return (d.line, d.column, 0 if d.severity == "error" else 1)  # stable: log order kept
