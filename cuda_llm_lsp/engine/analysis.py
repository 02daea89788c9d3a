"""The analysis use case, for the server and `cuda-llm check`: open, analyse, close.

`open_analysis` starts the compile processes (NVRTC loads while the first edit is debounced),
`analyse_fast` and `add_codegen` are the server's two tiers (tree-sitter, the device unit and
NVRTC's front end at once; resources and ptxas's problems in the background); the server asks
the fast tier for its first answer (`analyse_first`, the front end stopped before the end of
the unit) and completes it once typing pauses (`complete_fast`); `analyse` is both at once
for the CLI, `close_analysis` ends the compile processes. The nvcc tier checks the whole
file (`check_nvcc`, `carry_nvcc`, `with_nvcc`). What a workspace may set (`Trust` and the rules
on flags) is the compile layer's own policy, passed through as it is: one set of rules for the
editor's settings and the CLI's options.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from cuda_llm_lsp.compile import analysis as _analysis
from cuda_llm_lsp.compile import headers as _std_headers
from cuda_llm_lsp.compile import isolated as _isolated
from cuda_llm_lsp.compile import nvcc_tier as _nvcc_tier
from cuda_llm_lsp.compile.analysis import (
    DEFAULT_MAX_FILE_CHARS,
    CompiledKernel,
    FileAnalysis,
    KernelInfo,
)
from cuda_llm_lsp.compile.arch import normalize_arch
from cuda_llm_lsp.compile.flags import (
    Trust,
    allowed_flags,
    define_problem,
    include_dir_problem,
    set_workspace,
)
from cuda_llm_lsp.compile.isolated import DEFAULT_TIMEOUT_S, TIMEOUT_CODE
from cuda_llm_lsp.compile.nvcc import NvccResult, NvccUnavailable, nvcc_missing
from cuda_llm_lsp.compile.types import Diagnostic
from cuda_llm_lsp.config import Settings

__all__ = [
    # the data an analysis is (plain dataclasses) and its limits
    "DEFAULT_MAX_FILE_CHARS",
    "DEFAULT_TIMEOUT_S",
    "TIMEOUT_CODE",
    "CompiledKernel",
    "FileAnalysis",
    "KernelInfo",
    "NvccResult",
    "NvccUnavailable",
    # what a workspace may set: the compile layer's rules, passed through
    "Trust",
    # the actions
    "add_codegen",
    "allowed_flags",
    "analyse",
    "analyse_fast",
    "analyse_first",
    "carry_nvcc",
    "check_nvcc",
    "close_analysis",
    "complete_fast",
    "define_problem",
    "include_dir_problem",
    "keep_pch",
    "normalize_arch",
    "nvcc_missing",
    "open_analysis",
    "set_workspace",
    "with_completion",
    "with_nvcc",
]


def open_analysis(*, editor: bool = False, persistent_pch: bool = False) -> None:
    """Start the compile processes now, so NVRTC has loaded by the first analysis. Raises
    OSError when they cannot start (the first analysis then starts them, or says why).

    `editor`: a document is checked at every edit, so its headers are precompiled once per
    prefix, and code generation runs niced: it yields the cores to the checks the user waits
    for; the process the first check takes starts alone, the others during that check
    (`CompilePool.warm`). A CLI run checks each file once and gets none of this.
    `persistent_pch`: `keep_pch`."""
    pool = _isolated.shared_pool()
    if editor:
        pool.background_nice = pool.BACKGROUND_NICE
        pool.use_pch(persistent=persistent_pch)
        # the toolkit's header directories, found once (cuda.pathfinder's import, 0.05 s)
        # while the processes start, not in the first document's check
        threading.Thread(
            target=_std_headers.toolkit_include_dirs, daemon=True, name="toolkit-headers"
        ).start()
    pool.warm(first=editor)


def keep_pch(on: bool) -> None:
    """`cudaLlm.persistentPch` in a trusted workspace: the editor's header PCHs kept across
    sessions (`compile.isolated`); a pool not set up for the editor ignores it."""
    _isolated.shared_pool().set_persistent(on)


def analyse_fast(text: str, path: Path | None, settings: Settings) -> FileAnalysis:
    """The fast tier: kernels, specs and NVRTC's front-end diagnostics, resources pending."""
    return _analysis.analyze_syntax(text, path, settings)


def analyse_first(text: str, path: Path | None, settings: Settings) -> FileAnalysis:
    """The fast tier's first answer to an edit: NVRTC's front end without the end of the unit
    (`compile.first_answer`); `front_end_complete` False until `complete_fast` has run."""
    return _analysis.analyze_syntax(text, path, settings, first=True)


def complete_fast(first: FileAnalysis) -> tuple[Diagnostic, ...]:
    """What the full front-end check adds to a first answer: what only the end of the unit
    reports; `with_completion` merges it into the first answer or its code generation's."""
    return _analysis.complete_front_end(first)


def with_completion(analysis: FileAnalysis, extras: Sequence[Diagnostic]) -> FileAnalysis:
    """`analysis` completed by `complete_fast`'s diagnostics."""
    return _analysis.with_completion(analysis, extras)


def add_codegen(front: FileAnalysis, cancelled: Callable[[], bool] | None = None) -> FileAnalysis:
    """The background tier: `front` with each kernel's resources and ptxas's problems; stops
    between kernels once `cancelled()` (a newer edit)."""
    return _analysis.add_resources(front, cancelled)


def analyse(text: str, path: Path | None, settings: Settings) -> FileAnalysis:
    """Both tiers at once (`cuda-llm check`)."""
    return _analysis.analyze(text, path, settings)


def close_analysis() -> None:
    """End the compile processes: no compile outlives the command or the server."""
    _isolated.close_shared_pool()


def check_nvcc(
    text: str,
    path: Path | None,
    settings: Settings,
    timeout: float,
    stop: Callable[[], bool] | None = None,
) -> NvccResult:
    """nvcc's verdict on the whole file (host code included); raises NvccUnavailable."""
    return _nvcc_tier.run_nvcc(text, path, settings, timeout, stop)


def carry_nvcc(
    analysis: FileAnalysis, checked: str, result: NvccResult, timeout: float
) -> FileAnalysis:
    """The fast tier's `analysis` of a newer text with nvcc's verdict on `checked` kept on the
    lines the two texts share (`compile.nvcc_tier.carry_nvcc`)."""
    return _nvcc_tier.carry_nvcc(analysis, checked, result, timeout)


def with_nvcc(
    analysis: FileAnalysis, settings: Settings, timeout: float
) -> tuple[FileAnalysis, NvccResult]:
    """`analysis` with nvcc's verdict on the same text merged in; raises NvccUnavailable."""
    return _nvcc_tier.with_nvcc(analysis, settings, timeout)
