"""Every prompt the FSR loop sends, in one place: read this module to know what the model sees.

A prompt has: the rules and the toolchain that judges (NVRTC, CUDA 13, CCCL 3, which includes
exist), the task, the file's context (device-side includes, `#define`s, `__device__` helpers, the
launch statement), the test spec with its sizes and tolerances, the GPU's facts and limits, the
original's resources, latency and roofline (bytes, FLOPs, floor, % of floor, bottleneck class),
the best correct candidates so far, and the judge's rejections of earlier candidates, each compile
error with the lines of that candidate's own code around it and advice where NVRTC's words are
not enough. Each request is fresh: nothing refers to text the model has not been shown.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from cuda_llm_lsp.compile.headers import is_host_only
from cuda_llm_lsp.compile.types import Resources
from cuda_llm_lsp.evaluate.compare import SCALE_ULPS
from cuda_llm_lsp.evaluate.format import peak_note
from cuda_llm_lsp.evaluate.roofline import (
    MAX_REGISTERS_PER_THREAD,
    Floor,
    arch_figures,
    device_peaks,
    kernel_floor,
    percent_of_floor,
)
from cuda_llm_lsp.evaluate.types import DeviceFacts
from cuda_llm_lsp.fsr.profile import ADVICE, BUSY_PCT, Bottleneck
from cuda_llm_lsp.fsr.types import CandidateOutcome
from cuda_llm_lsp.source.context import outline
from cuda_llm_lsp.source.kernels import Kernel
from cuda_llm_lsp.source.spec import TestSpec

SYSTEM_PROMPT = """\
You are an expert CUDA performance engineer. You rewrite one CUDA kernel so that it runs faster \
on a specific NVIDIA GPU while computing the same results.

An automatic judge compiles your kernel and runs it against the original on many random inputs:
- Toolchain: NVRTC from CUDA 13 with CCCL 3, device code only (no host code, no -rdc). Include \
specific CCCL headers (`<cub/block/block_reduce.cuh>`, `<cub/warp/warp_reduce.cuh>`, \
`<cuda/functional>`), not umbrella ones. CCCL 3 removed `cub::Max`/`cub::Min`/`cub::Sum`: use \
`cuda::maximum<>{}`, `cuda::minimum<>{}`, `cuda::std::plus<>{}`.
- Includes: only CUDA toolkit and CCCL headers (`<cuda_fp16.h>`, `<cuda_bf16.h>`, \
`<cooperative_groups.h>`, `<cub/...>`, `<cuda/...>`) and the file's own includes. No host-only \
headers (`<iostream>`, `<vector>`, thrust).
- Keep the kernel's name, template parameters, parameter list and linkage exactly. It is \
launched with the SAME grid, block and dynamic shared memory as the original, unless the task's \
"Launch" paragraph lets you choose your own.
- Every output element must be written on every launch; inputs must not be modified; nothing \
written outside the buffers; no dependence on earlier launches or on races.
- Outputs must match the original within the stated tolerances on every case shown and on \
hidden cases (other sizes, other values, unaligned buffers): do not specialize to the sizes shown.
- Device code only in the block: the kernel, `__device__` functions (not `__host__ __device__`: \
`__host__` is removed), `#define`s, `constexpr` values, `__device__` / `__constant__` variables \
and types with `__device__` members. Host code (`main`, a launcher, host objects or variables) \
is dropped unjudged. Rejected: host-only preprocessor branches (`#ifndef __CUDA_ARCH__`, \
`NV_IS_HOST`; test `#if __CUDA_ARCH__ >= N` only), assembler section directives, \
`__attribute__((constructor))`, namespace-scope `asm`, host pragmas, and invisible or \
bidirectional Unicode characters.

Reply with a short explanation, then the COMPLETE kernel in ONE ```cuda block: any \
`__device__` helpers, `#define`s and `#include`s it needs come before it in that block."""

STRATEGY_HINTS = (
    "Start from the most promising idea for the bottleneck stated below.",
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
MAX_ERRORS_WITH_CODE = 3  # compile errors shown with the candidate's lines around them
CODE_CONTEXT_LINES = 2  # lines of the candidate above and below an error

# Compile errors whose cure is not obvious from NVRTC's words: (pattern, what to do).
TOOLCHAIN_ADVICE: tuple[tuple[str, str], ...] = (
    (r"<cub/cub\.cuh> is not supported when compiling with NVRTC",
     "NVRTC refuses CUB's umbrella header: include the specific header, e.g. "
     "<cub/block/block_reduce.cuh> or <cub/warp/warp_reduce.cuh>."),
    (r'namespace "cub" has no member "(Max|Min|Sum)"',
     "CCCL 3 removed cub::Max/Min/Sum: use cuda::maximum<>{}, cuda::minimum<>{} or "
     "cuda::std::plus<>{} (#include <cuda/functional>)."),
    (r"cannot open source file",
     "Only CUDA toolkit / CCCL headers and the file's own includes exist for the judge."),
    (r"identifier \"\w+\" is undefined",
     "Define every helper the kernel calls in the same code block, before the kernel."),
)  # fmt: skip


@dataclass(frozen=True)
class FileContext:
    """What of the kernel's file the model needs to write a drop-in replacement."""

    includes: tuple[str, ...] = ()  # device-side includes only: host-only ones are left out
    defines: tuple[str, ...] = ()
    helpers: tuple[str, ...] = ()  # `__device__` functions and other device code outside kernels
    launch_sites: tuple[str, ...] = ()  # the host statements that launch the kernel


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
    tolerances: tuple[float, float] | None = None  # (rtol, atol) of the outputs
    atol_relative: bool = False  # atol is the type's default: times min(1, mean |expected|)
    floor: Floor | None = None  # the timed case's roofline (`baseline_floor`)
    peaks_measured: bool = False  # the floor's compute peak was measured, not a datasheet rate
    baseline_profile: str | None = None  # Nsight Compute's view of the original, where it ran
    launch: str = ""  # the run's launch rule for the prompt (`fsr.launch.LaunchRule.prompt_text`)
    launch_free: bool = False  # a candidate may choose its own launch (a `@cuda-llm launch` block)


@dataclass(frozen=True)
class Attempt:
    """An earlier candidate as feedback: its outcome and, for correct ones, its resources."""

    outcome: CandidateOutcome
    resources: Resources | None = None


# ---------------------------------------------------------------------------------------------
# What the run measures once


def file_context(text: str, kernel: Kernel) -> FileContext:
    """Device-side includes, defines, `__device__` helpers and the launch statements of
    `kernel` in `text` (the statement alone: allocations and copies around it are host noise)."""
    found = outline(text)
    lines = text.split("\n")
    helpers = tuple(text[start:end].strip() for start, end in found.device_functions)
    launch_sites = tuple(lines[line].strip() for line in found.launch_lines(kernel.name))
    includes = tuple(line for line in found.includes if not _host_only_include(line))
    return FileContext(includes, found.defines, helpers, launch_sites)


def _host_only_include(directive: str) -> bool:
    name = re.search(r"[<\"]([^>\"]+)[>\"]", directive)
    return name is not None and (is_host_only(name.group(1)) or name.group(1) == "cuda_runtime.h")


def baseline_floor(spec: TestSpec, device: DeviceFacts) -> tuple[Floor | None, bool]:
    """The timed case's floor at the measured copy bandwidth and the device's peak, and whether
    that peak was measured; (None, False) when the cases cannot be evaluated."""
    try:
        case = spec.cases()[-1]
    except Exception:  # the baseline ran, so this is not expected: the floor is an extra
        return None, False
    peaks = device_peaks(device)
    floor = kernel_floor(
        spec, case, device.copy_bandwidth_gbs, peaks.fp32_gflops, peaks.bf16_gflops
    )
    return floor, peaks.measured


# ---------------------------------------------------------------------------------------------
# Sections


def _fmt_bytes(value: float) -> str:
    if value >= 1 << 30:
        return f"{value / (1 << 30):.0f} GiB"
    if value >= 1 << 20:
        return f"{value / (1 << 20):.0f} MiB"
    if value >= 1 << 10:
        return f"{value / (1 << 10):.0f} KiB"
    return f"{value:.0f} B"


def _fmt_si(value: float, unit: str) -> str:
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def device_section(device: DeviceFacts | None) -> str:
    if device is None:
        return ""
    major, minor = device.compute_capability
    figures = arch_figures(device)
    memory = (
        f"- memory: {_fmt_bytes(device.memory_bytes)}, {device.memory_bus_width}-bit bus at "
        f"{device.memory_clock_khz / 1000:.0f} MHz"
    )
    if device.copy_bandwidth_gbs:
        memory += f"; measured copy bandwidth {device.copy_bandwidth_gbs:.0f} GB/s"
    per_sm = f"{device.registers_per_sm} registers, {_fmt_bytes(device.shared_per_sm)} shared"
    if figures is not None:
        per_sm = (
            f"{figures.threads_per_sm} threads, {figures.blocks_per_sm} blocks, {per_sm} "
            f"(of {_fmt_bytes(figures.l1_shared_per_sm)} L1/shared)"
        )
    lines = [
        f"- {device.name}, compute capability {major}.{minor} ({device.arch}), "
        f"{device.sm_count} SMs at {device.clock_khz / 1000:.0f} MHz",
        f"- per SM: {per_sm}",
        f"- per block: {device.max_threads_per_block} threads, {device.registers_per_block} "
        f"registers (at most {MAX_REGISTERS_PER_THREAD} per thread), "
        f"{_fmt_bytes(device.shared_per_block)} shared "
        f"({_fmt_bytes(device.shared_per_block_optin)} opt-in)",
        f"- L2 cache: {_fmt_bytes(device.l2_bytes)}",
        memory,
    ]
    peaks = device_peaks(device)
    if peaks.fp32_gflops:
        bf16 = f", BF16 tensor {peaks.bf16_gflops / 1000:.0f} TFLOP/s" if peaks.bf16_gflops else ""
        source = "measured" if peaks.measured else "datasheet rate at this clock"
        lines.append(f"- peak: FP32 {peaks.fp32_gflops / 1000:.1f} TFLOP/s{bf16} ({source})")
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


def roofline_class(floor: Floor | None, ms: float | None) -> Bottleneck | None:
    """The bottleneck class from the roofline when no profiler ran: within BUSY_PCT of the
    floor, its bound; further away, latency (too little in flight, too many instructions)."""
    if floor is None or floor.bound is None:
        return None
    pct = percent_of_floor(floor.ms, ms)
    if pct is None:
        return None
    if pct < BUSY_PCT:
        return "memory-latency-bound"
    return "memory-bandwidth-bound" if floor.bound == "memory" else "compute-bound"


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
    lines.extend(_roofline_lines(task))
    text = "## The original kernel's figures\n" + "\n".join(lines)
    if task.baseline_profile:
        text += f"\n\nNsight Compute on the original:\n{task.baseline_profile.strip()}"
    return text


def _roofline_lines(task: TaskContext) -> list[str]:
    floor = task.floor
    if floor is None or floor.ms is None:
        return []
    lines = []
    if floor.memory_ms is not None:
        lines.append(
            f"- bytes moved (buffers read + written once): {_fmt_si(floor.bytes, 'B')}: "
            f"{floor.memory_ms:.4f} ms at the copy bandwidth"
        )
    if floor.flops is not None and floor.compute_ms is not None:
        source = "measured" if task.peaks_measured else "datasheet"
        lines.append(
            f"- FLOPs: {_fmt_si(floor.flops, 'FLOP')}: {floor.compute_ms:.4f} ms at the "
            f"{source} peak"
        )
    elif floor.flops is None:
        lines.append("- FLOPs: not given by the spec (the floor counts memory only)")
    pct = percent_of_floor(floor.ms, task.baseline_ms)
    if pct is not None:
        lines.append(
            f"- floor: {floor.ms:.4f} ms ({floor.bound}-bound); the original runs at "
            f"{pct:.{0 if pct >= 10 else 1}f}% of it"
        )
    if not task.baseline_profile:
        bottleneck = roofline_class(floor, task.baseline_ms)
        if bottleneck is not None:
            lines.append(f"- bottleneck (from the roofline): {bottleneck}. {ADVICE[bottleneck]}")
    return lines


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
            "The host launches it as:\n```cuda\n" + "\n".join(context.launch_sites) + "\n```"
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
    if task.tolerances is not None:
        rtol, atol = task.tolerances
        shown = (
            f"{atol:g} x min(1, the output's mean |expected|)"
            if task.atol_relative
            else (f"{atol:g}")
        )
        lines.append(f"- outputs match when |got - expected| <= {shown} + {rtol:g} * |expected|")
        if rtol or atol:  # the scale-aware floor (evaluate.compare; off for exact specs)
            lines.append(
                f"  or, for floating-point outputs, within {SCALE_ULPS} x 2^-24 of the output's "
                "largest |expected| (+1 ulp): summing in another order (accumulators, split-K, "
                "tree, shuffle or atomic reductions) passes; lower precision (tf32, bf16 or half "
                "inputs or sums) or dropped terms do not"
            )
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


def toolchain_advice(log: str) -> list[str]:
    """What to do about the errors in `log` that NVRTC's words do not make obvious."""
    return [advice for pattern, advice in TOOLCHAIN_ADVICE if re.search(pattern, log)]


_FILE_POSITION = re.compile(r"^line \d+:\d+: ")
_CANDIDATE_LINE = re.compile(r" \(line (\d+) of the candidate\)$")


def compile_feedback(log: str, source: str) -> str:
    """A compile log as the next request sees it: each error with the lines of the candidate's
    own code around it (the file's line numbers mean nothing to a fresh request), then advice."""
    code_lines = source.split("\n")
    shown: list[str] = []
    with_code = 0
    for line in trim_log(log).splitlines():
        at = _CANDIDATE_LINE.search(line)
        message = _FILE_POSITION.sub("", _CANDIDATE_LINE.sub("", line))
        if at is None or with_code >= MAX_ERRORS_WITH_CODE:
            shown.append(message)
            continue
        with_code += 1
        number = int(at.group(1))
        first = max(1, number - CODE_CONTEXT_LINES)
        last = min(len(code_lines), number + CODE_CONTEXT_LINES)
        excerpt = [
            f"{'>' if n == number else ' '} {code_lines[n - 1]}" for n in range(first, last + 1)
        ]
        shown.append(message + ("\n" + "\n".join(excerpt) if excerpt else ""))
    text = "```\n" + "\n".join(shown) + "\n```"
    advice = toolchain_advice(log)
    return text + ("\nWhat to do: " + " ".join(advice) if advice else "")


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
            + _launch_and_tuning(o)
            + _changed(o).lstrip(" ")
            + f"```cuda\n{o.source.strip()}\n```"
        )
    return "\n\n".join(parts)


def _changed(o: CandidateOutcome) -> str:
    """What was dropped from the reply or rewritten before it was judged (`o.changed`), for the
    model to leave out next time: the kernel is judged without it."""
    if not o.changed:
        return ""
    return f" (Your reply was changed before it was judged: {o.changed}.)\n"


def _launch_and_tuning(o: CandidateOutcome) -> str:
    """A candidate's own launch (its block is not in its code) and what tuning it found."""
    lines = []
    if o.launch is not None:
        lines.append(f"Its launch: {o.launch.describe()}.")
    if o.tuning is not None:
        lines.append(o.tuning.feedback)
    return "".join(line + "\n" for line in lines)


def failures_section(failures: Sequence[Attempt]) -> str:
    """The judge's rejections of earlier candidates. Replies without a usable kernel
    (`llm_error`: no code block, truncation, refusal) are the endpoint's trouble, not mistakes
    in CUDA to avoid: they are left out."""
    judged = sorted(
        (a for a in failures if a.outcome.status != "llm_error"),
        key=lambda a: (a.outcome.round, a.outcome.index),
    )
    if not judged:
        return ""
    parts = ["## Earlier candidates that were rejected (do not repeat these mistakes)"]
    for attempt in judged[-MAX_FAILURES_SHOWN:]:
        o = attempt.outcome
        if o.status == "compile_error":
            detail = "compile error:\n" + compile_feedback(o.message, o.source)
        elif o.status == "slower":
            ms = f"{o.ms:.4f} ms" if o.ms is not None else "slower"
            speed = f", {o.speedup:.2f}x" if o.speedup is not None else ""
            used = resources_text(attempt.resources)
            detail = f"correct but slower than the original ({ms}{speed}); {used}"
            if o.tuning is not None:
                detail += f". {o.tuning.feedback}"
        else:
            detail = f"{o.status}: {o.message.strip()}"
        parts.append(f"- {_attempt_title(attempt)}: {detail}{_changed(o).rstrip()}")
    return "\n".join(parts)


def profile_section(profile: str | None) -> str:
    return (
        f"## Profile of the current best kernel (Nsight Compute)\n{profile.strip()}"
        if profile
        else ""
    )


def task_section(
    task: TaskContext, round_: int, index: int, candidates: int, plan: Plan | None = None
) -> str:
    hint = (
        STRATEGY_HINTS[(index - 1) % len(STRATEGY_HINTS)] if candidates > 1 else STRATEGY_HINTS[0]
    )
    if plan is not None:
        hint = f"Implement this plan: {plan.text}"
    return (
        f"## Task\nRewrite the kernel `{task.kernel_name}` below to run faster on this GPU. "
        + (
            "Same name and signature"
            if task.launch_free
            else "Same name, signature and launch configuration"
        )
        + "; the full kernel in one ```cuda block.\n"
        f"This is round {round_}, candidate {index} of {candidates}. {hint}\n\n"
        f"```cuda\n{task.kernel_source.strip()}\n```"
        + (f"\n\n{task.launch}" if task.launch else "")
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
    plan: Plan | None = None,
) -> tuple[dict[str, str], ...]:
    """The chat messages for one candidate (a plan's coder when `plan` is given)."""
    sections = [
        task_section(task, round_, index, candidates, plan),
        context_section(task.file),
        spec_section(task),
        device_section(task.device),
        baseline_section(task),
        best_section(best),
        profile_section(profile),
        failures_section(failures),
    ]
    user = "\n\n".join(section for section in sections if section)
    return ({"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user})


# ---------------------------------------------------------------------------------------------
# The `plan` strategy (CUDAMaster): a planner, coders that follow its plans, a debugger


@dataclass(frozen=True)
class Plan:
    """One optimization the planner proposes: what to do, why here, what it should give."""

    technique: str
    why: str = ""
    expected: str = ""

    @property
    def text(self) -> str:
        parts = [self.technique.rstrip(".") + "."]
        if self.why:
            parts.append(f"Why: {self.why.rstrip('.')}.")
        if self.expected:
            parts.append(f"Expected: {self.expected.rstrip('.')}.")
        return " ".join(parts)


@dataclass(frozen=True)
class TriedPlan:
    """A plan of an earlier round and what became of its candidate."""

    round: int
    plan: Plan
    outcome: CandidateOutcome


PLANNER_SYSTEM = """\
You are an expert CUDA performance engineer planning how to speed up one CUDA kernel on a \
specific NVIDIA GPU. You do not write the kernel: other engineers implement each of your plans \
separately, and an automatic judge (NVRTC, CUDA 13, CCCL 3; same launch configuration; results \
within tolerance on hidden cases too) checks and times each one.

Reply with ONE ```json block: a list of distinct plans, each an object \
{"technique": "...", "why": "...", "expected": "..."}: the technique in one sentence, why it \
should help THIS kernel on THIS GPU (cite the figures), and the expected effect."""


def _tried_section(tried: Sequence[TriedPlan]) -> str:
    if not tried:
        return ""
    lines = ["## Plans already tried (do not repeat what failed; build on what worked)"]
    for t in tried:
        o = t.outcome
        if o.status in ("ok", "slower") and o.speedup is not None:
            result = f"{o.speedup:.2f}x the original's speed"
        else:
            result = f"{o.status}: {o.message.strip().splitlines()[0][:160] if o.message else ''}"
        lines.append(f"- round {t.round}: {t.plan.technique} -> {result}")
    return "\n".join(lines)


def planner_messages(
    task: TaskContext,
    *,
    round_: int,
    plans: int,
    tried: Sequence[TriedPlan] = (),
    best: Sequence[Attempt] = (),
    profile: str | None = None,
) -> tuple[dict[str, str], ...]:
    """The planner's request: the kernel, the GPU, the roofline and profile, what was tried."""
    ask = (
        f"## Task\nThis is round {round_}. Propose {plans} distinct plans to make the kernel "
        f"`{task.kernel_name}` faster, as a JSON list in one ```json block.\n\n"
        f"```cuda\n{task.kernel_source.strip()}\n```"
    )
    sections = [
        ask,
        context_section(task.file),
        spec_section(task),
        device_section(task.device),
        baseline_section(task),
        best_section(best[:1]),
        profile_section(profile),
        _tried_section(tried),
    ]
    user = "\n\n".join(section for section in sections if section)
    return ({"role": "system", "content": PLANNER_SYSTEM}, {"role": "user", "content": user})


def parse_plans(text: str, count: int) -> list[Plan]:
    """The plans in the planner's reply (a JSON list, fenced or not), at most `count`, distinct
    by technique; [] when there are none to read."""
    text = text.replace("\r\n", "\n")
    fenced = re.findall(r"```(?:json)?[ \t]*\n(.*?)```", text, re.DOTALL)
    for chunk in [*reversed(fenced), text]:
        start, end = chunk.find("["), chunk.rfind("]")
        if start < 0 or end <= start:
            continue
        try:
            data = json.loads(chunk[start : end + 1])
        except ValueError:
            continue
        if not isinstance(data, list):
            continue
        plans: list[Plan] = []
        for item in data:
            if isinstance(item, dict) and str(item.get("technique", "")).strip():
                plan = Plan(
                    " ".join(str(item["technique"]).split())[:300],
                    " ".join(str(item.get("why", "")).split())[:400],
                    " ".join(str(item.get("expected", "")).split())[:200],
                )
                if all(p.technique.lower() != plan.technique.lower() for p in plans):
                    plans.append(plan)
        if plans:
            return plans[:count]
    return []


def fallback_plans(count: int, have: int = 0) -> list[Plan]:
    """Plans from the FSR hints, for a planner that gave too few."""
    return [Plan(STRATEGY_HINTS[i % len(STRATEGY_HINTS)]) for i in range(have, count)]


def repair_messages(
    task: TaskContext,
    outcome: CandidateOutcome,
    *,
    attempt: int,
    attempts: int,
    plan: Plan | None = None,
) -> tuple[dict[str, str], ...]:
    """The debugger's request: the failing candidate's own code and what the judge found."""
    if outcome.status == "compile_error":
        failure = "It does not compile:\n" + compile_feedback(outcome.message, outcome.source)
    else:
        failure = f"The judge rejected it: {outcome.status}: {outcome.message.strip()}"
    goal = f" It implements this plan: {plan.text}" if plan is not None else ""
    ask = (
        f"## Task\nA rewrite of the kernel `{task.kernel_name}` failed.{goal} Fix it, keeping "
        "its optimization; reply with the complete fixed kernel in one ```cuda block.\n"
        f"This is round {outcome.round}, candidate {outcome.index}, repair {attempt} of "
        f"{attempts}.\n\n```cuda\n{outcome.source.strip()}\n```\n\n{failure}"
        f"{_changed(outcome).rstrip()}"
    )
    sections = [
        ask,
        "## The original kernel\n```cuda\n" + task.kernel_source.strip() + "\n```",
        context_section(task.file),
        spec_section(task),
    ]
    user = "\n\n".join(section for section in sections if section)
    return ({"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user})
