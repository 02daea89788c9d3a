"""Where `ncu` (Nsight Compute) is on PATH: what the next prompt says about a kernel's profile.

One capture per profile, by the profiler Profile uses (`evaluate.line_profile.NcuProfiler`: the
evaluator's one-shot worker on the timed case under `ncu`, cancellable). First choice (issue
[profile]): the kernel's top source lines with what ncu found on them (`line_profile_text`: the
line's text, its kinds, the figures), after the kernel summary; the top lines also travel in the
run's JSON and history (`ProfileText.lines`). Where ncu gives no line figures, the same capture's
raw page gives the kernel-level class instead (`kernel_class`): compute-bound,
memory-bandwidth-bound or memory-latency-bound (neither the SMs nor memory busy: too little in
flight), in the spirit of CUDAMaster, with only the metrics that matter for it. Best effort:
without ncu, without counter permissions, cancelled or on any failure the profile is skipped
(None).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from cuda_llm_lsp.evaluate.line_profile import (
    ProfileError,
    Profiler,
    ProfileUnavailable,
)
from cuda_llm_lsp.evaluate.ncu_source import (
    NcuOutputError,
    RawFinding,
    line_findings,
    parse_raw_page,
    parse_source_page,
    summary,
)
from cuda_llm_lsp.evaluate.types import KernelBinary
from cuda_llm_lsp.source.spec import TestSpec

log = logging.getLogger(__name__)

Bottleneck = Literal["compute-bound", "memory-bandwidth-bound", "memory-latency-bound"]

SM = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
MEMORY = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
DRAM = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
L1_HIT = "l1tex__t_sector_hit_rate.pct"
L2_HIT = "lts__t_sector_hit_rate.pct"
DURATION = "gpu__time_duration.sum"
CORE_METRICS = (SM, MEMORY, DRAM, DURATION)
METRICS = (*CORE_METRICS, OCCUPANCY, L1_HIT, L2_HIT)
BUSY_PCT = 60.0  # a unit this busy (of its peak) is the bottleneck

LABELS = {
    SM: "SM throughput",
    MEMORY: "memory throughput",
    DRAM: "DRAM bandwidth",
    OCCUPANCY: "achieved occupancy",
    L1_HIT: "L1 hit rate",
    L2_HIT: "L2 hit rate",
}
RELEVANT: dict[str, tuple[str, ...]] = {
    "memory-bandwidth-bound": (DRAM, MEMORY, L2_HIT, L1_HIT),
    "compute-bound": (SM, OCCUPANCY),
    "memory-latency-bound": (OCCUPANCY, SM, MEMORY, L1_HIT, L2_HIT),
}
ADVICE = {
    "memory-bandwidth-bound": "Memory traffic is the limit: move fewer bytes (reuse through "
    "shared memory or registers, wider coalesced loads, avoid re-reading data).",
    "compute-bound": "The SMs are busy: do less work per element (cheaper instructions, fewer "
    "index computations, exploit structure).",
    "memory-latency-bound": "Neither compute nor memory is near its peak: the kernel waits on "
    "latency. Put more independent work in flight (more threads or more elements per thread, "
    "ILP, prefetching, fewer synchronizations).",
}


@dataclass(frozen=True)
class Profile:
    bottleneck: Bottleneck
    metrics: dict[str, float]

    def summary(self) -> str:
        lines = [f"Bottleneck: {self.bottleneck}. {ADVICE[self.bottleneck]}"]
        for name in RELEVANT[self.bottleneck]:
            if name in self.metrics:
                lines.append(f"- {LABELS[name]}: {self.metrics[name]:.1f}%")
        if DURATION in self.metrics:
            lines.append(f"- kernel duration (ncu): {self.metrics[DURATION] / 1000:.2f} us")
        return "\n".join(lines)


def classify(metrics: dict[str, float]) -> Bottleneck:
    """Compute-bound, memory-bandwidth-bound or memory-latency-bound from throughput figures."""
    sm = metrics.get(SM, 0.0)
    memory = max(metrics.get(MEMORY, 0.0), metrics.get(DRAM, 0.0))
    if memory >= BUSY_PCT and memory >= sm:
        return "memory-bandwidth-bound"
    if sm >= BUSY_PCT:
        return "compute-bound"
    return "memory-latency-bound"


#: the DRAM figure as newer ncu versions name it in the SpeedOfLight section
GPU_DRAM = "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"


def kernel_metrics(raw: dict[str, str]) -> dict[str, float]:
    """The class's metrics of a raw page (`evaluate.ncu_source.parse_raw_page`)."""
    values: dict[str, float] = {}
    for name in METRICS:
        found = raw.get(name) or (raw.get(GPU_DRAM) if name == DRAM else None)
        try:
            values[name] = float((found or "").replace(",", ""))
        except ValueError:
            continue
    return values


def kernel_class(raw: dict[str, str]) -> Profile | None:
    """The kernel-level profile of a raw page, None when it has none of the class's figures."""
    values = kernel_metrics(raw)
    return Profile(classify(values), values) if values else None


PROMPT_LINES = 5  # the top lines a prompt shows


class ProfileText(str):
    """The prompt's profile text, carrying the top lines it names (`lines`, JSON-ready) so the
    loop can keep them in its result and history. A `str`: prompts use it as any profile text."""

    lines: tuple[dict[str, Any], ...] = ()

    @classmethod
    def make(cls, text: str, lines: list[dict[str, Any]]) -> ProfileText:
        made = cls(text)
        made.lines = tuple(lines)
        return made


def line_profile_text(
    binary: KernelBinary, spec: TestSpec, spec_dir: Path | None, profiler: Profiler
) -> str | None:
    """From one capture by `profiler`: the kernel summary and its top lines (`ProfileText`);
    where ncu gave no line figures, the kernel-level class; else None (no ncu, no permission, a
    cancel...)."""
    try:
        captured = profiler.capture(binary, spec, spec_dir)
    except (ProfileUnavailable, ProfileError) as exc:
        log.info("profile skipped: %s", exc)
        return None
    raw = parse_raw_page(captured.raw_page)
    try:
        instructions = parse_source_page(captured.source_page)
    except NcuOutputError as exc:
        log.info("no line figures (%s): the kernel-level class stands in", exc)
        found = kernel_class(raw)
        return found.summary() if found else None
    return line_profile_note(summary(raw).line(), line_findings(instructions), binary)


def line_profile_note(
    summary_line: str, findings: list[RawFinding], binary: KernelBinary
) -> ProfileText:
    """The prompt text for `findings` of `binary`: lines inside its kernel text first by kind
    (a problem before a mere stall hotspot), then by stall share; at most PROMPT_LINES."""
    kernel_lines = binary.kernel_source.split("\n")
    ranked = sorted(findings, key=lambda f: (f.kinds == ("stall_hotspot",), -f.stall_share))
    top: list[dict[str, Any]] = []
    for found in ranked[:PROMPT_LINES]:
        row = found.line - 1 - binary.kernel_line
        inside = 0 <= row < len(kernel_lines) and not found.path.endswith((".cuh", ".h", ".hpp"))
        top.append(
            {
                "line": found.line,
                "kernel_line": row + 1 if inside else None,
                "text": kernel_lines[row].strip() if inside else "",
                "kinds": list(found.kinds),
                "stall_share": found.stall_share,
                "figure": _figure(found),
            }
        )
    out = [f"Kernel: {summary_line}"]
    if top:
        out.append("Hot source lines (Nsight Compute per-line figures):")
    for item in top:
        where = (
            f"kernel line {item['kernel_line']} `{item['text']}`"
            if item["kernel_line"]
            else f"file line {item['line']} (outside the kernel)"
        )
        out.append(f"- {where}: {item['figure']}")
    return ProfileText.make("\n".join(out), top)


def _figure(found: RawFinding) -> str:
    """'uncoalesced (16.8 M L2 sectors, 8.0x the ideal); 30% of warp stalls (long_sb)'."""
    m = found.metrics
    parts = []
    if "uncoalesced" in found.kinds:
        ideal = float(m.get("global_sectors_ideal", 0) or 0)
        sectors = float(m.get("global_sectors", 0) or 0)
        ratio = f", {sectors / ideal:.1f}x the ideal" if ideal else ""
        parts.append(f"uncoalesced global access ({sectors:,.0f} L2 sectors{ratio})")
    if "bank_conflict" in found.kinds:
        parts.append(f"{float(m.get('bank_conflict_ways', 0)):.0f}-way shared-memory bank conflict")
    if "local_memory" in found.kinds:
        parts.append(
            f"local memory ({float(m.get('local_loads', 0)):,.0f} loads, "
            f"{float(m.get('local_stores', 0)):,.0f} stores: a spill or a run-time-indexed array)"
        )
    if "divergent_branch" in found.kinds:
        parts.append(
            f"divergent branch ({float(m.get('threads_at_branch', 0)):.0f} threads arrive, "
            f"{float(m.get('threads_after_branch', 0)):.0f} go on together)"
        )
    stall = f"{found.stall_share:.0%} of warp stalls"
    if "main_stall" in m:
        stall += f", mostly {m['main_stall']}"
    parts.append(stall)
    return "; ".join(parts)
