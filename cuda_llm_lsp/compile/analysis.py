"""One file's analysis: kernels, specs, the NVRTC compile, every diagnostic (CLI and LSP).

`analyze` is blocking (NVRTC): the language server calls it from a worker thread. Lines and
columns of `FileAnalysis.diagnostics` are 1-based (as printed), sorted by position.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path

from cuda_llm_lsp.compile.arch import resolve_arch
from cuda_llm_lsp.compile.cache import compile_cached
from cuda_llm_lsp.compile.device_unit import DeviceUnit, build_device_unit
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
from cuda_llm_lsp.source.text import Span

log = logging.getLogger(__name__)

DEFAULT_MAX_DEVICE_CODE = 256_000  # characters of non-blank device code (about 8 s of NVRTC)


@dataclass(frozen=True)
class KernelInfo:
    kernel: Kernel
    name_expression: str | None  # what NVRTC resolved for resources; None: unknown (template)
    resources: Resources | None
    spec: TestSpec | None

    @property
    def symbol_note(self) -> str:
        """Why resources are missing, for display ('' when they are known)."""
        if self.resources is not None:
            return ""
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

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.severity == "error")


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
    """Analyse `text` (the contents of `path`, possibly unsaved). Raises only NvrtcUnavailable."""
    if "\0" in text:
        binary = Diagnostic(
            1, 1, 1, 2, "error", "the file contains NUL bytes (binary content?): not compiled",
            code="input",
        )  # fmt: skip
        return FileAnalysis(path, text, (), None, (binary,))
    parsed = parse_tree(text)  # one tree-sitter parse for the kernels and the device unit
    kernels = find_kernels(text, parsed)
    diagnostics: list[Diagnostic] = []
    specs: list[TestSpec | None] = []
    for kernel in kernels:
        spec, problems = _spec_of(kernel, text)
        specs.append(spec)
        diagnostics.extend(
            _span_diagnostic(p.span, p.message, "spec", p.severity) for p in problems
        )
    unit = build_device_unit(text, path, settings.include_paths, parsed)
    diagnostics.extend(
        _span_diagnostic(p.span, p.message, "include", p.severity) for p in unit.problems
    )
    wanted = [name_expressions(k, s) for k, s in zip(kernels, specs, strict=True)]
    flat = tuple(dict.fromkeys(e for group in wanted for e in group))
    size, limit = device_code_size(unit), max_device_code()
    if size > limit:
        too_big = Diagnostic(
            1, 1, 1, 2, "warning",
            f"not compiled: {size // 1000} kB of device code is over the {limit // 1000} kB "
            "limit for compiling on every edit (CUDA_LLM_MAX_DEVICE_CODE raises it)",
            code="size",
        )  # fmt: skip
        unknown = tuple(KernelInfo(k, None, None, s) for k, s in zip(kernels, specs, strict=True))
        ordered = tuple(sorted(dict.fromkeys([*diagnostics, too_big]), key=_position))
        return FileAnalysis(path, text, unknown, None, ordered)
    result = compile_cached(unit, compile_options(settings), flat)
    diagnostics.extend(_place(d, kernels) for d in result.diagnostics)
    infos: list[KernelInfo] = []
    for kernel, spec, expressions in zip(kernels, specs, wanted, strict=True):
        resolved = next((e for e in expressions if e in result.resources), None)
        chosen = resolved or (expressions[0] if expressions else None)
        infos.append(
            KernelInfo(kernel, chosen, result.resources.get(resolved) if resolved else None, spec)
        )
        if result.ok and spec is not None and spec.instance and resolved is None:
            message = (
                f'spec instance "{spec.instance}" is not a valid instantiation of '
                f"{kernel.name}: resources unknown"
            )
            diagnostics.append(_span_diagnostic(kernel.name_span, message, "spec", "warning"))
    ordered = tuple(sorted(dict.fromkeys(diagnostics), key=_position))
    return FileAnalysis(path, text, tuple(infos), result, ordered)


def _spec_of(kernel: Kernel, text: str) -> tuple[TestSpec | None, list]:
    if kernel.spec is None:
        return None, []
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
