"""The second tier: nvcc itself on the whole file, so what is shown agrees with nvcc.

The fast tier (NVRTC on the device unit) cannot see host code nor templates that only host code
instantiates; it can also report what nvcc would not (a stand-in's gap). When nvcc is there,
its whole-file compile (`compile.nvcc.compile_file`, `-c` with `-Xptxas -v`, nothing linked or
run) is merged over the fast tier's analysis of the same text (`merge_nvcc`):

- diagnostics: nvcc's errors and warnings replace the fast tier's compile diagnostics, so a
  fast-tier compile error that nvcc does not report is withdrawn; spec, include and size
  problems are the fast tier's own and stay;
- resources: every kernel ptxas compiled, with ptxas's figures as nvcc reports them, goes on
  the kernel it instantiates (`compile.mangled` reads the symbol back): template instances only
  host code launches included; kernels of no definition in the file or its headers (CUB's,
  Thrust's) are `FileAnalysis.library_kernels`. When nvcc fails, the fast tier's figures stay.

A compile that outlives its time limit changes nothing but a warning; one stopped because a
newer text came changes nothing at all. The CLI runs it with `check --nvcc`, the language
server in the background after saves (`lsp.nvcc_check`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from cuda_llm_lsp.compile.analysis import (
    CompiledKernel,
    FileAnalysis,
    KernelInfo,
    compile_options,
)
from cuda_llm_lsp.compile.flags import NVCC_ONLY
from cuda_llm_lsp.compile.mangled import base_name, display_names
from cuda_llm_lsp.compile.nvcc import DEFAULT_TIMEOUT_S, NvccResult, compile_file, find_nvcc
from cuda_llm_lsp.compile.project_config import apply as apply_project_flags
from cuda_llm_lsp.compile.project_config import find_flags
from cuda_llm_lsp.compile.types import Diagnostic, Resources
from cuda_llm_lsp.config import Settings

#: Diagnostic codes the fast tier finds without compiling: kept whatever nvcc says.
OWN_CODES = frozenset({"spec", "include", "size", "input"})


def with_nvcc(
    analysis: FileAnalysis,
    settings: Settings,
    timeout: float = DEFAULT_TIMEOUT_S,
    stop: Callable[[], bool] | None = None,
) -> tuple[FileAnalysis, NvccResult]:
    """`analysis` with nvcc's verdict on the same text and flags merged in (`merge_nvcc`).

    Raises `compile.nvcc.NvccUnavailable` when no nvcc is found.
    """
    result = run_nvcc(analysis.text, analysis.path, settings, timeout, stop)
    return merge_nvcc(analysis, result, timeout), result


@dataclass(frozen=True)
class NvccFlags:
    """The flags nvcc builds a file with: the project's (compile_commands.json,
    compile_flags.txt), then the settings' (`cudaLlm.defines`, include paths, `--std`...)."""

    include_paths: tuple[str, ...] = ()
    arch: str | None = None
    defines: tuple[str, ...] = ()
    std: str | None = None
    extra_flags: tuple[str, ...] = ()
    # where each define came from, named when one is refused (`compile.nvcc_inputs`)
    define_sources: dict[str, str] = field(default_factory=dict)


def nvcc_flags(settings: Settings, path: Path | None) -> NvccFlags:
    """The flags the nvcc tier compiles `path` with; the check before a write uses the same."""
    sources = {d: "the settings' defines" for d in settings.defines}
    project = find_flags(path, settings.compile_commands_dir) if path is not None else None
    if project is not None:
        sources.update({d: project.source for d in project.defines})
    settings = apply_project_flags(settings, project)
    options = compile_options(settings)
    return NvccFlags(
        include_paths=tuple(options.include_paths),
        arch=options.arch,
        defines=tuple(options.defines),
        std=options.std,
        # nvcc's own flags among the settings' (a project's --expt-relaxed-constexpr)
        extra_flags=tuple(
            dict.fromkeys(NVCC_ONLY[f] for f in settings.nvrtc_flags if f in NVCC_ONLY)
        ),
        define_sources=sources,
    )


def run_nvcc(
    text: str,
    path: Path | None,
    settings: Settings,
    timeout: float = DEFAULT_TIMEOUT_S,
    stop: Callable[[], bool] | None = None,
) -> NvccResult:
    """nvcc's whole-file compile of `text` with the flags the fast tier uses (the project's,
    then the settings'), ptxas's figures included. Raises `NvccUnavailable`."""
    flags = nvcc_flags(settings, path)
    result = compile_file(
        text,
        path,
        include_paths=flags.include_paths,
        arch=flags.arch,
        timeout=timeout,
        defines=flags.defines,
        std=flags.std,
        extra_flags=flags.extra_flags,
        define_sources=flags.define_sources,
        resource_usage=True,
        stop=stop,
    )
    if not result.resources:
        return result
    return replace(result, names=display_names(list(result.resources), find_nvcc()))


def merge_nvcc(analysis: FileAnalysis, result: NvccResult, timeout: float) -> FileAnalysis:
    """The fast tier's `analysis` as nvcc sees the same text (see the module's docstring)."""
    if result.stopped:
        return analysis
    notes = tuple(
        Diagnostic(1, 1, 1, 2, "warning", f"nvcc check: {why}", code="nvcc")
        for why in (*result.refused, *((result.skipped,) if result.skipped else ()))
    )
    if result.skipped:  # nvcc did not run: the fast tier's view, and why
        return replace(analysis, diagnostics=(*analysis.diagnostics, *notes))
    if result.timed_out:
        note = Diagnostic(
            1, 1, 1, 2, "warning",
            f"nvcc check skipped: nvcc took over {timeout:g} s (the fast tier's diagnostics "
            "are shown)",
            code="nvcc",
        )  # fmt: skip
        return replace(analysis, diagnostics=(*analysis.diagnostics, note))
    kept = [d for d in analysis.diagnostics if d.code in OWN_CODES]
    name = analysis.path.name if analysis.path is not None else "file.cu"
    for d in result.diagnostics:
        if d.file is None or Path(d.file).name == name:
            kept.append(replace(d, file=None, code=d.code or "nvcc"))
        else:  # in a header: on line 1, saying where (as the fast tier places them)
            message = f'in included file "{d.file}" line {d.line}: {d.message}'
            kept.append(Diagnostic(1, 1, 1, 2, d.severity, message, code="nvcc"))
    kept.extend(notes)
    ordered = tuple(sorted(dict.fromkeys(kept), key=lambda d: (d.line, d.column)))
    merged = replace(analysis, diagnostics=ordered)
    verdict = "compiles" if result.ok else f"{len(result.errors)} errors"
    merged = replace(merged, nvcc_note=f"nvcc: {verdict} ({result.seconds:.1f} s)")
    if result.ok and result.resources:
        merged = _with_resources(merged, result.resources, result.names)
    return merged


def _with_resources(
    analysis: FileAnalysis, found: dict[str, Resources], shown: dict[str, str]
) -> FileAnalysis:
    """Every kernel's figures as ptxas reported them to nvcc, on the kernel they belong to."""
    names = {symbol: shown.get(symbol, symbol) for symbol in found}
    by_base: dict[str, list[str]] = {}
    for symbol in found:
        by_base.setdefault(base_name(symbol) or symbol, []).append(symbol)
    taken: set[str] = set()

    def figures(info: KernelInfo) -> KernelInfo:
        kernel = info.kernel
        symbols = by_base.get(kernel.qualified_name, [])
        if not symbols:  # an anonymous or inline namespace the scope does not spell
            symbols = [
                s for base, group in by_base.items()
                if base.rpartition("::")[2] == kernel.name for s in group if s not in taken
            ]  # fmt: skip
        symbols = sorted((s for s in symbols if s not in taken), key=lambda s: names[s])
        if not symbols:
            return info  # nvcc compiled no instance of it: the fast tier's figures stay
        taken.update(symbols)
        first = symbols[0]
        if not kernel.is_template:  # its one instance, under the fast tier's key if any
            instances = {key: found[first] for key in info.instances}
            return replace(info, resources=found[first], pending=False, instances=instances)
        instances = {names[s]: found[s] for s in symbols}
        return replace(
            info, resources=found[first], name_expression=names[first], pending=False,
            instances=instances,
        )  # fmt: skip

    kernels = tuple(figures(info) for info in analysis.kernels)
    headers = tuple(replace(h, info=figures(h.info)) for h in analysis.header_kernels)
    library = tuple(
        sorted(
            (CompiledKernel(s, names[s], found[s]) for s in found if s not in taken),
            key=lambda k: k.name,
        )
    )
    return replace(analysis, kernels=kernels, header_kernels=headers, library_kernels=library)
