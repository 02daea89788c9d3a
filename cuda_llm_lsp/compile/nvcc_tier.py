"""The second tier: nvcc itself on the whole file, so what is shown agrees with nvcc.

The fast tier (NVRTC on the device unit) cannot see host code nor templates that only host code
instantiates; it can also report what nvcc would not (a stand-in's gap). When nvcc is there,
its whole-file compile (`compile.nvcc.compile_file`, `-c`, nothing linked or run) replaces the
fast tier's compile diagnostics: nvcc's errors and warnings appear, a fast-tier compile error
that nvcc does not report is withdrawn. Spec, include and size problems are the fast tier's
own and stay. A compile that outlives its time limit changes nothing (a warning says so).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from cuda_llm_lsp.compile.analysis import FileAnalysis, compile_options, with_project_flags
from cuda_llm_lsp.compile.nvcc import DEFAULT_TIMEOUT_S, NvccResult, compile_file
from cuda_llm_lsp.compile.types import Diagnostic
from cuda_llm_lsp.config import Settings

#: Diagnostic codes the fast tier finds without compiling: kept whatever nvcc says.
OWN_CODES = frozenset({"spec", "include", "size", "input"})
_NVCC_FLAGS = ("--expt-relaxed-constexpr", "--extended-lambda")  # passed on when configured


def with_nvcc(
    analysis: FileAnalysis, settings: Settings, timeout: float = DEFAULT_TIMEOUT_S
) -> tuple[FileAnalysis, NvccResult]:
    """`analysis` with its compile diagnostics replaced by nvcc's on the same text and flags.

    Raises `compile.nvcc.NvccUnavailable` when no nvcc is found.
    """
    path = analysis.path
    settings = with_project_flags(settings, path)
    options = compile_options(settings)
    result = compile_file(
        analysis.text,
        path,
        include_paths=options.include_paths,
        arch=options.arch,
        timeout=timeout,
        defines=options.defines,
        std=options.std,
        extra_flags=[f for f in settings.nvrtc_flags if f in _NVCC_FLAGS],
    )
    if result.timed_out:
        note = Diagnostic(
            1, 1, 1, 2, "warning",
            f"nvcc check skipped: nvcc took over {timeout:g} s (the fast tier's diagnostics "
            "are shown)",
            code="nvcc",
        )  # fmt: skip
        return replace(analysis, diagnostics=(*analysis.diagnostics, note)), result
    kept = [d for d in analysis.diagnostics if d.code in OWN_CODES]
    name = path.name if path is not None else "file.cu"
    for d in result.diagnostics:
        if d.file is None or Path(d.file).name == name:
            kept.append(replace(d, file=None, code=d.code or "nvcc"))
        else:  # in a header: on line 1, saying where (as the fast tier places them)
            message = f'in included file "{d.file}" line {d.line}: {d.message}'
            kept.append(Diagnostic(1, 1, 1, 2, d.severity, message, code="nvcc"))
    ordered = tuple(sorted(dict.fromkeys(kept), key=lambda d: (d.line, d.column)))
    return replace(analysis, diagnostics=ordered), result
