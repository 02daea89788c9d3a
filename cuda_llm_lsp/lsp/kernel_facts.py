"""What the server says about one kernel: its resources, launch bounds, spec and last result
(with a tuning's table of configurations, in the hover).

Shared by `textDocument/hover` (Markdown), the resources code lens (one line) and
`cudaLlm.showResources` (one plain message), so the three never disagree. Pure: it reads an
analysis's `KernelInfo` and the kernel's report.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from cuda_llm_lsp.compile.types import Resources
from cuda_llm_lsp.engine.analysis import CompiledKernel, KernelInfo
from cuda_llm_lsp.lsp.results import KernelReport


def resources_line(
    name: str, resources: Resources | None, why: str = "", instances: int = 0
) -> str:
    """'saxpy · 24 regs · 0 B spill · 0 B smem' (or `why` there are no figures: the analysis's
    `KernelInfo.symbol_note`); a template with several `instances` says how many (the hover
    lists them)."""
    if resources is None:
        return f"{name} · {why or 'no resource figures'}"
    text = f"{name} · {figures(resources)}"
    if instances > 1:
        text += f" · {instances} instances"
    return text


def figures(resources: Resources) -> str:
    """'24 regs · 0 B spill · 0 B smem' (and stack, constant memory when there are any)."""
    spill = resources.spill_stores + resources.spill_loads
    text = f"{resources.registers} regs · {spill} B spill · {resources.shared_bytes} B smem"
    if resources.stack_bytes:
        text += f" · {resources.stack_bytes} B stack"
    if resources.constant_bytes:
        text += f" · {resources.constant_bytes} B const"
    return text


def info_line(info: KernelInfo) -> str:
    """A `KernelInfo`'s resources line: its first instance's figures, and how many there are."""
    return resources_line(info.kernel.name, info.resources, info.symbol_note, len(info.instances))


def instance_lines(info: KernelInfo) -> tuple[tuple[str, str], ...]:
    """Each instance of a template and its figures (none for fewer than two instances)."""
    if len(info.instances) < 2:
        return ()
    return tuple((name, figures(r)) for name, r in info.instances.items())


def library_list(kernels: Iterable[CompiledKernel]) -> str:
    """The kernels nvcc compiled from libraries (`FileAnalysis.library_kernels`), one a line."""
    return "\n".join(f"{k.name}: {figures(k.resources)}" for k in kernels)


@dataclass(frozen=True)
class _Facts:
    """What hover and the resources lens say about a kernel, before either renders it."""

    signature: str
    resources: str
    launch_bounds: str | None
    spec: str  # Markdown: *emphasis* and paragraphs
    last_result: str | None
    table: str | None  # Markdown: a tuning's configurations
    instances: tuple[tuple[str, str], ...] = ()  # a template's instances and their figures


def _facts(info: KernelInfo, report: KernelReport | None) -> _Facts:
    kernel = info.kernel
    params = ", ".join(f"{p.c_type} {p.name}" for p in kernel.params)
    bounds = kernel.launch_bounds
    return _Facts(
        signature=f"__global__ void {kernel.name}({params})",
        resources=info_line(info),
        launch_bounds=f"__launch_bounds__({bounds})" if bounds else None,
        spec=spec_summary(info),
        last_result=report.info if report is not None else None,
        table=report.table if report is not None else None,
        instances=instance_lines(info),
    )


def describe(info: KernelInfo, report: KernelReport | None) -> str:
    """The hover, in Markdown."""
    facts = _facts(info, report)
    parts = [f"```cuda\n{facts.signature}\n```", facts.resources]
    if facts.instances:
        parts.append("\n".join(f"- `{name}`: {shown}" for name, shown in facts.instances))
    if facts.launch_bounds:
        parts.append(f"`{facts.launch_bounds}`")
    parts.append(facts.spec)
    if facts.last_result:
        parts.append(facts.last_result)
    if facts.table:
        parts.append(facts.table)
    return "\n\n".join(parts)


def plain_summary(info: KernelInfo, report: KernelReport | None) -> str:
    """The hover's facts as one plain-text message (what the resources lens shows on a click)."""
    facts = _facts(info, report)
    parts = [facts.resources]
    if facts.instances:
        parts.append(", ".join(f"{name}: {shown}" for name, shown in facts.instances))
    if facts.launch_bounds:
        parts.append(facts.launch_bounds)
    parts.append(facts.spec.replace("*", "").replace("\n\n", " · "))
    if facts.last_result:
        parts.append(f"last result: {facts.last_result}")
    return "cuda-llm: " + "; ".join(parts)


def spec_summary(info: KernelInfo) -> str:
    spec = info.spec
    if spec is None:
        if info.kernel.spec is not None:
            return "Test spec: has errors (see diagnostics)"
        return "No test spec: use the code action *Add test spec* to draft one"
    sizes = ", ".join(f"{name}={values[-1]}" for name, values in spec.sizes.items())
    grid = ", ".join(spec.grid)
    block = ", ".join(spec.block)
    args = ", ".join(
        f"{a.name}: {a.role} {a.dtype}[{a.count}]" if a.is_pointer else f"{a.name}={a.value}"
        for a in spec.args
    )
    return (
        f"Test spec: {spec.case_count} cases, timed case {sizes or '-'}; "
        f"grid ({grid}) block ({block})\n\n{args}"
    )
