"""Every prompt the FSR loop sends, in one place: read this module to know what the model sees.

A prompt has: the task and its rules, the file's context (includes, `#define`s, `__device__`
helpers, the host launch site), the test spec and its sizes, the GPU's facts, the baseline's
resources and latency, the best correct candidates so far (with their figures) and the failures
of earlier candidates (compile log, failing case, expected vs got), and where `ncu` ran, the
winner's bottleneck class with the metrics that matter for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from cuda_llm_lsp.compile.types import Resources
from cuda_llm_lsp.evaluate.format import peak_note
from cuda_llm_lsp.evaluate.types import DeviceFacts
from cuda_llm_lsp.fsr.types import CandidateOutcome
from cuda_llm_lsp.source.context import outline
from cuda_llm_lsp.source.kernels import Kernel

SYSTEM_PROMPT = """\
You are an expert CUDA performance engineer. You rewrite one CUDA kernel so that it runs faster \
on a specific NVIDIA GPU while computing exactly the same results.

Rules, all checked by an automatic judge that compiles your kernel with NVRTC and runs it against \
the original on many random inputs:
- Keep the kernel's name, template parameters, parameter list and linkage exactly as they are.
- It is launched with the SAME grid, block and dynamic shared memory as the original: do not \
assume any other launch configuration.
- Every output element must be written on every launch; inputs must not be modified; nothing may \
be written outside the buffers; results must not depend on earlier launches or on races.
- Reply with the COMPLETE kernel in ONE ```cuda fenced code block. `__device__` helper functions \
and `#define`s it needs may come before it in the same block. No host code, no `main`, no \
`#include` lines other than those the file already has.
- Briefly say what you changed and why before the code block."""

STRATEGY_HINTS = (
    "Start from the most promising idea for the bottleneck described.",
    "Try a different approach from the obvious one: e.g. change the memory access pattern "
    "(coalescing, vectorized loads such as float4, shared-memory tiling).",
    "Focus on instruction-level efficiency: more work per thread, loop unrolling, fewer "
    "divisions and index computations, fast intrinsics where exact results are kept.",
    "Focus on parallelism and latency hiding: occupancy, registers per thread, warp-level "
    "primitives (__shfl_sync), fewer synchronizations.",
)

COMPILE_LOG_LINES = 25
COMPILE_LOG_CHARS = 2500
MAX_FAILURES_SHOWN = 6


@dataclass(frozen=True)
class FileContext:
    """What of the kernel's file the model needs to write a drop-in replacement."""

    includes: tuple[str, ...] = ()
    defines: tuple[str, ...] = ()
    helpers: tuple[str, ...] = ()  # `__device__` functions and other device code outside kernels
    launch_sites: tuple[str, ...] = ()  # host lines that launch the kernel (with a little context)


@dataclass(frozen=True)
class TaskContext:
    """Everything that stays the same across one run's prompts."""

    kernel_name: str
    kernel_source: str
    file: FileContext = field(default_factory=FileContext)
    spec_text: str = ""
    sizes: dict[str, list[int]] = field(default_factory=dict)
    device: DeviceFacts | None = None
    baseline_resources: Resources | None = None
    baseline_ms: float | None = None
    baseline_spread_pct: float | None = None
    baseline_bandwidth_gbs: float | None = None
    baseline_fraction_of_peak: float | None = None


@dataclass(frozen=True)
class Attempt:
    """An earlier candidate as feedback: its outcome and, for correct ones, its resources."""

    outcome: CandidateOutcome
    resources: Resources | None = None


# ---------------------------------------------------------------------------------------------
# The file's context


def file_context(text: str, kernel: Kernel) -> FileContext:
    """Includes, defines, `__device__` helpers and launch sites of `kernel` in `text`; each
    launch site with the two lines above it (where the grid and block are often computed)."""
    found = outline(text)
    lines = text.split("\n")
    helpers = tuple(text[start:end].strip() for start, end in found.device_functions)
    launch_sites = tuple(
        "\n".join(lines[max(0, line - 2) : line + 1]).strip("\n")
        for line in found.launch_lines(kernel.name)
    )
    return FileContext(found.includes, found.defines, helpers, launch_sites)


# ---------------------------------------------------------------------------------------------
# Sections


def _fmt_bytes(value: int) -> str:
    if value >= 1 << 30:
        return f"{value / (1 << 30):.0f} GiB"
    if value >= 1 << 20:
        return f"{value / (1 << 20):.0f} MiB"
    if value >= 1 << 10:
        return f"{value / (1 << 10):.0f} KiB"
    return f"{value} B"


def device_section(device: DeviceFacts | None) -> str:
    if device is None:
        return ""
    major, minor = device.compute_capability
    lines = [
        f"- {device.name}, compute capability {major}.{minor} ({device.arch}), "
        f"{device.sm_count} SMs",
        f"- shared memory: {_fmt_bytes(device.shared_per_block)} per block "
        f"({_fmt_bytes(device.shared_per_block_optin)} opt-in), "
        f"{_fmt_bytes(device.shared_per_sm)} per SM",
        f"- registers: {device.registers_per_block} per block, {device.registers_per_sm} per SM; "
        f"max {device.max_threads_per_block} threads per block",
        f"- L2 cache: {_fmt_bytes(device.l2_bytes)}; memory: {_fmt_bytes(device.memory_bytes)}, "
        f"{device.memory_bus_width}-bit bus",
    ]
    if device.copy_bandwidth_gbs:
        lines.append(
            f"- measured device-to-device copy bandwidth: {device.copy_bandwidth_gbs:.0f} GB/s"
        )
    return "## The GPU\n" + "\n".join(lines)


def resources_text(resources: Resources | None) -> str:
    if resources is None:
        return "resources unknown"
    parts = [f"{resources.registers} registers/thread"]
    if resources.spill_stores or resources.spill_loads:
        parts.append(f"spills {resources.spill_stores} B stores / {resources.spill_loads} B loads")
    parts.append(f"{resources.shared_bytes} B static shared")
    if resources.stack_bytes:
        parts.append(f"{resources.stack_bytes} B stack")
    return ", ".join(parts)


def baseline_section(task: TaskContext) -> str:
    lines = [f"- resources (ptxas): {resources_text(task.baseline_resources)}"]
    if task.baseline_ms is not None:
        spread = (
            f" (±{task.baseline_spread_pct:.1f}%)" if task.baseline_spread_pct is not None else ""
        )
        lines.append(f"- latency on the timed (last) case: {task.baseline_ms:.4f} ms{spread}")
    if task.baseline_bandwidth_gbs is not None:
        peak = (
            f", {peak_note(task.baseline_fraction_of_peak, 'the copy bandwidth')}"
            if task.baseline_fraction_of_peak is not None
            else ""
        )
        lines.append(f"- achieved bandwidth: {task.baseline_bandwidth_gbs:.0f} GB/s{peak}")
    return "## The original kernel's figures\n" + "\n".join(lines)


def context_section(context: FileContext) -> str:
    parts: list[str] = []
    if context.includes:
        parts.append("Includes:\n```cuda\n" + "\n".join(context.includes) + "\n```")
    if context.defines:
        parts.append("Macros:\n```cuda\n" + "\n".join(context.defines) + "\n```")
    if context.helpers:
        parts.append(
            "Device helpers already in the file (you may call them; do not redefine them):\n"
            "```cuda\n" + "\n\n".join(context.helpers) + "\n```"
        )
    if context.launch_sites:
        parts.append(
            "How the host launches it:\n```cuda\n" + "\n...\n".join(context.launch_sites) + "\n```"
        )
    return "## The file around the kernel\n" + "\n\n".join(parts) if parts else ""


def spec_section(task: TaskContext) -> str:
    if not task.spec_text and not task.sizes:
        return ""
    lines = ["## The test (every case must match the original; the last case is timed)"]
    if task.spec_text:
        lines.append("```toml\n" + task.spec_text.strip("\n") + "\n```")
    if task.sizes:
        count = len(next(iter(task.sizes.values()), []))
        for case in range(count):
            sizes = ", ".join(f"{name}={values[case]}" for name, values in task.sizes.items())
            timed = " (timed)" if case == count - 1 else ""
            lines.append(f"- case {case}: {sizes}{timed}")
    return "\n".join(lines)


def trim_log(
    log: str, max_lines: int = COMPILE_LOG_LINES, max_chars: int = COMPILE_LOG_CHARS
) -> str:
    """The start of a long compile log: the first errors are the ones that matter."""
    lines = [line for line in log.strip().splitlines() if line.strip()]
    shown = "\n".join(lines[:max_lines])
    if len(shown) > max_chars:
        shown = shown[:max_chars]
    if len(lines) > max_lines or len(shown) < len("\n".join(lines)):
        shown += "\n[... log trimmed]"
    return shown


def _attempt_title(attempt: Attempt) -> str:
    o = attempt.outcome
    return f"round {o.round} candidate {o.index}"


def best_section(best: Sequence[Attempt]) -> str:
    if not best:
        return ""
    parts = ["## The best correct kernels so far (improve on these)"]
    for rank, attempt in enumerate(best, 1):
        o = attempt.outcome
        figures = []
        if o.ms is not None:
            figures.append(f"{o.ms:.4f} ms")
        if o.speedup is not None:
            figures.append(f"{o.speedup:.2f}x the original's speed")
        figures.append(resources_text(attempt.resources))
        parts.append(
            f"### #{rank}: {_attempt_title(attempt)} — {'; '.join(figures)}\n"
            f"```cuda\n{o.source.strip()}\n```"
        )
    return "\n\n".join(parts)


def failures_section(failures: Sequence[Attempt]) -> str:
    if not failures:
        return ""
    parts = ["## Earlier candidates that were rejected (do not repeat these mistakes)"]
    for attempt in list(failures)[-MAX_FAILURES_SHOWN:]:
        o = attempt.outcome
        if o.status == "compile_error":
            detail = f"compile error:\n```\n{trim_log(o.message)}\n```"
        elif o.status == "slower":
            ms = f"{o.ms:.4f} ms" if o.ms is not None else "slower"
            speed = f", {o.speedup:.2f}x" if o.speedup is not None else ""
            used = resources_text(attempt.resources)
            detail = f"correct but slower than the original ({ms}{speed}); {used}"
        else:
            detail = f"{o.status}: {o.message.strip()}"
        parts.append(f"- {_attempt_title(attempt)}: {detail}")
    return "\n".join(parts)


def profile_section(profile: str | None) -> str:
    return (
        f"## Profile of the current best kernel (Nsight Compute)\n{profile.strip()}"
        if profile
        else ""
    )


def task_section(task: TaskContext, round_: int, index: int, candidates: int) -> str:
    hint = (
        STRATEGY_HINTS[(index - 1) % len(STRATEGY_HINTS)] if candidates > 1 else STRATEGY_HINTS[0]
    )
    return (
        f"## Task\nRewrite the kernel `{task.kernel_name}` below to run faster on this GPU. "
        "Same name, signature and launch configuration; the full kernel in one ```cuda block.\n"
        f"This is round {round_}, candidate {index} of {candidates}. {hint}\n\n"
        f"```cuda\n{task.kernel_source.strip()}\n```"
    )


def build_messages(
    task: TaskContext,
    *,
    round_: int,
    index: int,
    candidates: int,
    best: Sequence[Attempt] = (),
    failures: Sequence[Attempt] = (),
    profile: str | None = None,
) -> tuple[dict[str, str], ...]:
    """The chat messages for one candidate."""
    sections = [
        task_section(task, round_, index, candidates),
        context_section(task.file),
        spec_section(task),
        device_section(task.device),
        baseline_section(task),
        best_section(best),
        profile_section(profile),
        failures_section(failures),
        "Reply with a short explanation, then the complete kernel in one ```cuda block.",
    ]
    user = "\n\n".join(section for section in sections if section)
    return ({"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user})
