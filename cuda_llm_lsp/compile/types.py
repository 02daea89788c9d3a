"""Plain results of a compile, shared by the CLI, the language server and the evaluator."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from cuda_llm_lsp.source.text import Span

Severity = Literal["error", "warning", "information"]


@dataclass(frozen=True)
class CompileOptions:
    arch: str = "sm_90"  # "sm_XY"; resolved from the local GPU by `compile.arch.resolve_arch`
    include_paths: tuple[str, ...] = ()
    defines: tuple[str, ...] = ()  # "NAME" or "NAME=VALUE"
    extra_flags: tuple[str, ...] = ()
    std: str = "c++17"  # NVRTC's -std: the project's dialect (config.STDS)


@dataclass(frozen=True)
class Diagnostic:
    """One compiler message in the user's file. Lines and columns are 1-based (as printed)."""

    line: int
    column: int
    end_line: int
    end_column: int
    severity: Severity
    message: str
    code: str | None = None  # NVRTC/EDG warning or error number, e.g. "177-D"
    file: str | None = None  # None: the file being compiled


@dataclass(frozen=True)
class Resources:
    """ptxas's report for one kernel."""

    registers: int
    spill_stores: int  # bytes
    spill_loads: int  # bytes
    shared_bytes: int  # static shared memory
    stack_bytes: int
    constant_bytes: int = 0


@dataclass(frozen=True)
class CompileResult:
    ok: bool
    arch: str
    diagnostics: tuple[Diagnostic, ...]
    log: str
    cubin: bytes | None = None
    # name expression as given (source name, e.g. "saxpy" or "k<float, 128>") -> lowered symbol
    lowered_names: dict[str, str] = field(default_factory=dict)
    # name expression -> resources
    resources: dict[str, Resources] = field(default_factory=dict)
    from_cache: bool = False

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.severity == "error")


class NvrtcUnavailable(RuntimeError):
    """NVRTC (libnvrtc from the toolkit wheels) could not be loaded."""


@dataclass(frozen=True)
class IncludeProblem:
    """An `#include "..."` that could not be resolved: reported on its line."""

    span: Span
    message: str
    severity: Literal["error", "warning", "information"] = "error"


@dataclass(frozen=True)
class DeviceUnit:
    """What NVRTC compiles for a file (`compile.device_unit` builds it). Defined here, with the
    plain results, so that a compile process unpickling one does not import the builder (and
    tree-sitter): ~90 ms of every compile process's start."""

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
    # the object-like macros of the file and its headers that expand to `__global__` (a kernel's
    # head may name one: `__kernel void f()`), each with whether it holds `extern "C"`
    # (`kernels.kernel_macros`; `kernels.find_kernels`'s `macros`)
    kernel_macros: dict[str, bool] = field(default_factory=dict)
