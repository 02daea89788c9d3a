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
newer text came changes nothing at all. The CLI runs it by default wherever nvcc is found
(`check`; `--no-nvcc` for the fast tier alone), the language server in the background on open
and save (`lsp.nvcc_check`), where the last verdict stays the arbiter of the lines unchanged
since (`carry_nvcc`).
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from cuda_llm_lsp.compile.analysis import (
    CompiledKernel,
    FileAnalysis,
    KernelInfo,
    compile_options,
)
from cuda_llm_lsp.compile.flags import nvcc_spellings
from cuda_llm_lsp.compile.mangled import base_name, display_names
from cuda_llm_lsp.compile.nvcc import DEFAULT_TIMEOUT_S, NvccResult, compile_file, find_nvcc
from cuda_llm_lsp.compile.project_config import apply as apply_project_flags
from cuda_llm_lsp.compile.project_config import find_flags
from cuda_llm_lsp.compile.types import Diagnostic, Resources
from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.source.kernels import Kernel

#: Diagnostic codes the fast tier finds without compiling: kept whatever nvcc says.
OWN_CODES = frozenset({"spec", "include", "size", "input"})
#: the host preprocessor's warning on a header compiled as the main file (`check x.cuh`)
HEADER_AS_MAIN = "#pragma once in main file"


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
        # nvcc's own flags among the settings' (a project's --expt-relaxed-constexpr) and
        # the code-generation ones both take (its -rdc=true, -maxrregcount=N)
        extra_flags=nvcc_spellings(settings.nvrtc_flags),
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
    return _merge(analysis, result, timeout, None)


def carry_nvcc(
    analysis: FileAnalysis, checked: str, result: NvccResult, timeout: float
) -> FileAnalysis:
    """The fast tier's `analysis` of a newer text, with nvcc's verdict on the text `checked`
    kept where the two texts agree: on every line unchanged since (`line_map`) nvcc's answer
    stands, its diagnostics moved to their new lines and the fast tier's compile diagnostics
    there withdrawn, so a fast-tier error nvcc refuted never comes back while typing elsewhere;
    on changed lines the fast tier's diagnostics are all there is, and they are shown. Kernels
    whose text is unchanged keep nvcc's figures."""
    if checked == analysis.text:
        return _merge(analysis, result, timeout, None)
    return _merge(analysis, result, timeout, line_map(checked, analysis.text))


def line_map(old: str, new: str) -> dict[int, int]:
    """1-based lines of `old` found unchanged in `new`, to their line there: the common head and
    tail, then in between the lines found once in each (in order: their longest increasing run)
    and the equal lines around them (a patience diff: a few milliseconds for 3,000 lines, on the
    event loop; difflib took 40 ms for two edits far apart)."""
    a, b = old.split("\n"), new.split("\n")
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    moved = {i + 1: i + 1 for i in range(head)}
    moved.update({len(a) - k: len(b) - k for k in range(tail)})
    middle_a, middle_b = a[head : len(a) - tail], b[head : len(b) - tail]
    for i, j in _patience(middle_a, middle_b).items():
        moved[head + i + 1] = head + j + 1
    return moved


def _patience(a: list[str], b: list[str]) -> dict[int, int]:
    """Indices of `a` matched to equal lines of `b`, in order (see `line_map`)."""
    once_a, once_b = Counter(a), Counter(b)
    where_b = {line: j for j, line in enumerate(b) if once_b[line] == 1}
    pairs = [
        (i, where_b[line]) for i, line in enumerate(a) if once_a[line] == 1 and line in where_b
    ]
    # the longest run of pairs increasing in both (patience sorting)
    tops: list[int] = []  # per run length, the index in `pairs` of the smallest last `j`
    top_j: list[int] = []  # that `j`
    back: list[int] = []
    for n, (_, j) in enumerate(pairs):
        k = bisect.bisect_left(top_j, j)
        back.append(tops[k - 1] if k else -1)
        if k == len(tops):
            tops.append(n)
            top_j.append(j)
        else:
            tops[k], top_j[k] = n, j
    chain: list[tuple[int, int]] = []
    n = tops[-1] if tops else -1
    while n >= 0:
        chain.append(pairs[n])
        n = back[n]
    matched: dict[int, int] = {}
    taken: set[int] = set()
    for i, j in reversed(chain):  # each anchor and the equal lines around it
        step = 0
        while i + step < len(a) and j + step < len(b) and a[i + step] == b[j + step]:
            if i + step in matched or j + step in taken:
                break
            matched[i + step] = j + step
            taken.add(j + step)
            step += 1
        step = 1
        while i - step >= 0 and j - step >= 0 and a[i - step] == b[j - step]:
            if i - step in matched or j - step in taken:
                break
            matched[i - step] = j - step
            taken.add(j - step)
            step += 1
    return matched


def _merge(
    analysis: FileAnalysis, result: NvccResult, timeout: float, moved: dict[int, int] | None
) -> FileAnalysis:
    """`merge_nvcc` (`moved` None: the same text) or `carry_nvcc` (`moved`: `line_map`)."""
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
            f"nvcc check skipped: nvcc took over {timeout:g} s and was stopped (the limit: "
            "cudaLlm.nvccTimeoutS in the editor, --nvcc-timeout for cuda-llm check); the fast "
            "check's diagnostics are shown",
            code="nvcc",
        )  # fmt: skip
        return replace(analysis, diagnostics=(*analysis.diagnostics, note))
    unchanged = set(moved.values()) if moved is not None else None
    kept = [
        d for d in analysis.diagnostics
        if d.code in OWN_CODES or (unchanged is not None and d.line not in unchanged)
    ]  # fmt: skip
    fast = {(d.line, d.message): d for d in analysis.diagnostics if d.code not in OWN_CODES}
    name = analysis.path.name if analysis.path is not None else "file.cu"
    for d in result.diagnostics:
        if d.message == HEADER_AS_MAIN:
            continue  # a header checked on its own is compiled as a main file: no problem of it
        if d.file is None or Path(d.file).name == name:
            placed = replace(d, file=None, code=d.code or "nvcc")
        else:  # in a header: on line 1, saying where (as the fast tier places them)
            message = f'in included file "{d.file}" line {d.line}: {d.message}'
            placed = Diagnostic(1, 1, 1, 2, d.severity, message, code="nvcc")
        if moved is not None:
            line = moved.get(placed.line)
            if line is None:
                continue  # its line was edited since: the fast tier's view of it is shown
            placed = replace(placed, line=line, end_line=placed.end_line - placed.line + line)
        same = fast.get((placed.line, placed.message))
        if same is not None and placed.column == 1:  # EDG gives no column: the fast tier's
            placed = replace(
                placed, column=same.column, end_line=same.end_line, end_column=same.end_column
            )
        kept.append(placed)
    kept.extend(notes)
    ordered = tuple(sorted(dict.fromkeys(kept), key=lambda d: (d.line, d.column)))
    merged = replace(analysis, diagnostics=ordered)
    errors = len(result.errors)
    verdict = "compiles" if result.ok else f"{errors} error{'' if errors == 1 else 's'}"
    since = "" if moved is None else "; the text was edited since"
    merged = replace(merged, nvcc_note=f"nvcc: {verdict} ({result.seconds:.1f} s{since})")
    if result.ok and result.resources:
        if moved is None:
            merged = _with_resources(merged, result.resources, result.names)
        else:  # a kernel edited since keeps the fast tier's figures
            assert unchanged is not None
            lines = unchanged

            def kept_as_checked(k: Kernel) -> bool:
                return all(n in lines for n in range(k.span.start.line + 1, k.span.end.line + 2))

            merged = _with_resources(merged, result.resources, result.names, kept_as_checked)
    return merged


def _with_resources(
    analysis: FileAnalysis,
    found: dict[str, Resources],
    shown: dict[str, str],
    unchanged: Callable[[Kernel], bool] | None = None,
) -> FileAnalysis:
    """Every kernel's figures as ptxas reported them to nvcc, on the kernel they belong to
    (with `unchanged`: only on the file's kernels it accepts, those nvcc compiled as they are)."""
    names = {symbol: shown.get(symbol, symbol) for symbol in found}
    by_base: dict[str, list[str]] = {}
    for symbol in found:
        by_base.setdefault(base_name(symbol) or symbol, []).append(symbol)
    taken: set[str] = set()

    def figures(info: KernelInfo, own: bool = True) -> KernelInfo:
        kernel = info.kernel
        if own and unchanged is not None and not unchanged(kernel):
            return info  # edited since nvcc's check: the fast tier's figures
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
    headers = tuple(replace(h, info=figures(h.info, False)) for h in analysis.header_kernels)
    library = tuple(
        sorted(
            (CompiledKernel(s, names[s], found[s]) for s in found if s not in taken),
            key=lambda k: k.name,
        )
    )
    return replace(analysis, kernels=kernels, header_kernels=headers, library_kernels=library)
