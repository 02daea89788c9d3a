"""Nsight Compute's source page and raw page, read into per-line findings and a kernel summary.

Input is what `ncu --import R --page source --csv --print-source cuda,sass` prints for a kernel
built with `-lineinfo` (per source file: a `"File Path"` row, then per line a row with the line
number followed by its SASS instructions, each with the SourceCounters metrics), and the raw
page (`--page raw --csv`) for the summary. ncu cannot open NVRTC's source, but keys every
figure by the file path and line the cubin's line table names, which is all we need.

Findings are computed from the instructions, not from ncu's line totals, so that each figure
is explained by the instructions behind it:
- `uncoalesced`: global L2 sectors above the ideal (`L2 Theoretical Sectors Global Excessive`),
  with their share of all the kernel's global sectors;
- `bank_conflict`: shared-memory accesses with an N-way conflict (N >= 2): wavefronts against
  the ideal one per access;
- `local_memory`: executed local loads/stores (a register spill or a per-thread array indexed
  at run time);
- `divergent_branch`: a conditional branch after which fewer threads of a warp go on together
  than arrived (average threads of the fall-through instruction against the branch's): a warp
  that takes both paths; a branch uniform per warp keeps its threads;
- `stall_hotspot`: a line holding a large share of the kernel's warp-stall samples, with the
  reason most of them give.
Pure functions over text: the profiler (`evaluate.line_profile`) runs ncu, tests feed captures.
"""

from __future__ import annotations

import csv
import io
import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

STALL_SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"
THREADS = "Avg. Threads Executed"
SPACE = "Address Space"
OPERATION = "Access Operation"
NWAY = "L1 Conflicts Shared N-Way"
SECTORS = "L2 Theoretical Sectors Global"
SECTORS_IDEAL = "L2 Theoretical Sectors Global Ideal"
SECTORS_EXCESSIVE = "L2 Theoretical Sectors Global Excessive"

UNCOALESCED_MIN_RATIO = 0.5  # excess sectors at least half the ideal...
UNCOALESCED_MIN_SHARE = 0.05  # ...and 5% of the kernel's global sectors
BANK_CONFLICT_MIN_WAYS = 2.0
DIVERGENCE_MIN_LOSS = 0.1  # a tenth of the arriving threads leave at the branch
HOTSPOT_MIN_SHARE = 0.10
HOTSPOT_MAX_LINES = 3

_CONDITIONAL_BRANCH = re.compile(r"^\s*@!?U?P\w+\s+(?:BRA|BRX|JMP|JMX)\b")

STALL_REASONS: dict[str, str] = {
    "long_sb": "waiting for global/local memory (long scoreboard)",
    "lg": "the global/local memory queue is full (LG throttle)",
    "mio": "the shared-memory/special-function queue is full (MIO throttle)",
    "short_sb": "waiting for shared memory or a special function (short scoreboard)",
    "barrier": "waiting at __syncthreads (barrier)",
    "math": "the math pipe is busy (math throttle)",
    "wait": "fixed-latency dependencies (wait)",
    "drain": "stores draining at exit (drain)",
    "imc": "constant-cache misses (IMC)",
    "tex": "the texture pipe is busy (tex throttle)",
    "branch_resolving": "resolving branches",
    "dispatch": "dispatch stalls",
    "membar": "memory barriers",
    "no_inst": "instruction-cache misses (no instruction)",
    "not_selected": "eligible but not selected (plenty of ready warps)",
    "selected": "issuing (selected)",
    "sleep": "sleeping",
    "misc": "miscellaneous",
}
STALL_ADVICE: dict[str, str] = {
    "long_sb": "put more independent loads in flight (more work per thread, prefetch) or "
    "reuse data through shared memory",
    "lg": "issue fewer, wider memory instructions (vector loads, coalesced access)",
    "mio": "issue fewer shared-memory instructions (wider accesses, fewer conflicts)",
    "short_sb": "avoid shared-memory bank conflicts and long chains of special functions",
    "barrier": "balance the work before each __syncthreads or synchronise less often",
    "math": "use cheaper instructions or fewer of them",
    "drain": "the kernel's stores are the cost: make them coalesced and write less",
    "imc": "keep constant-memory reads uniform across a warp",
    "not_selected": "the line is busy, not blocked: do less work there (fewer or cheaper "
    "instructions)",
    "selected": "the line is busy, not blocked: do less work there (fewer or cheaper instructions)",
    "wait": "the line is busy with dependent arithmetic: do less work there or interleave "
    "independent work",
}
ADVICE: dict[str, str] = {
    "uncoalesced": "make consecutive threads touch consecutive addresses (stage the data "
    "through shared memory, or swap the index order).",
    "bank_conflict": "pad the shared array (e.g. [32][33]) or swizzle the index so the threads "
    "of a warp hit different banks.",
    "local_memory": "index per-thread arrays only with compile-time constants (unrolled loops), "
    "or keep the data in registers or shared memory; check for register spills.",
    "divergent_branch": "make the condition the same for all 32 threads of a warp (branch on "
    "the warp index, or regroup the data) or compute both sides without branching.",
}


class NcuOutputError(ValueError):
    """The text is not a source page ncu printed (no `Line No` header, no instruction)."""


@dataclass(frozen=True)
class Instruction:
    path: str  # the file as the cubin's line table names it
    line: int  # 1-based
    address: int
    sass: str
    values: dict[str, str]

    def number(self, column: str) -> float:
        return _number(self.values.get(column, ""))


@dataclass(frozen=True)
class RawFinding:
    """The findings of one line of one file, before it is placed in the user's files."""

    path: str
    line: int
    kinds: tuple[str, ...]
    stall_share: float
    message: str
    metrics: dict[str, float | str]


@dataclass(frozen=True)
class Summary:
    device: str
    duration_us: float | None
    achieved_occupancy_pct: float | None
    theoretical_occupancy_pct: float | None
    occupancy_limiter: str | None  # the launch limit with fewest blocks per SM; "none" at 100%
    sm_throughput_pct: float | None
    dram_throughput_pct: float | None
    memory_throughput_pct: float | None
    bound: str  # "memory-bound" | "memory-bound (L1/L2)" | "compute-bound" | "latency-bound"
    arithmetic_intensity: float | None = None  # FLOP per DRAM byte, where ncu counted FLOPs
    limits: dict[str, float] = field(default_factory=dict)

    def line(self) -> str:
        """'12.3 µs · occupancy 78% of 100% (warps) · SM 7% · DRAM 13% of peak · memory-bound'."""
        parts = []
        if self.duration_us is not None:
            parts.append(f"{self.duration_us:.1f} µs")
        if self.achieved_occupancy_pct is not None:
            occ = f"occupancy {self.achieved_occupancy_pct:.0f}%"
            if self.theoretical_occupancy_pct is not None:
                occ += f" of {self.theoretical_occupancy_pct:.0f}% theoretical"
            if self.occupancy_limiter and self.occupancy_limiter != "none":
                occ += f" (limited by {self.occupancy_limiter})"
            parts.append(occ)
        if self.sm_throughput_pct is not None:
            parts.append(f"SM {self.sm_throughput_pct:.0f}%")
        if self.dram_throughput_pct is not None:
            parts.append(f"DRAM {self.dram_throughput_pct:.0f}% of peak")
        bound = self.bound
        if self.arithmetic_intensity:
            bound += f" ({self.arithmetic_intensity:.2f} FLOP/byte)"
        parts.append(bound)
        return " · ".join(parts)


def parse_source_page(text: str) -> list[Instruction]:
    """The SASS instructions of a `--page source --print-source cuda,sass` CSV, with their line."""
    header: list[str] | None = None
    path = ""
    line: int | None = None
    found: list[Instruction] = []
    for row in csv.reader(io.StringIO(text)):
        if not row:
            continue
        if row[0] == "File Path" and len(row) >= 2:
            path, line = row[1], None
            continue
        if row[0] == "Line No":
            header = row
            continue
        if header is None or len(row) != len(header):
            continue
        if row[0].strip():
            line = int(row[0]) if row[0].strip().isdigit() else None
            continue
        address = row[2].strip()
        if line is None or not address.startswith("0x"):
            continue  # "..." rows: instructions shown under another line
        values = {name: value for name, value in zip(header[4:], row[4:], strict=False)}
        found.append(Instruction(path, line, int(address, 16), row[3].strip(), values))
    if header is None:
        raise NcuOutputError("no source page in the ncu output (no 'Line No' header)")
    if not found:
        raise NcuOutputError("the ncu source page has no instructions with line information")
    return found


def parse_raw_page(text: str) -> dict[str, str]:
    """Metric -> value (as printed) of the first kernel in a `--page raw --csv` output."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return {}
    rows = [r for r in csv.reader(io.StringIO("\n".join(lines[start:]))) if r]
    if len(rows) < 2:
        return {}
    header = rows[0]
    data = next((r for r in rows[1:] if r and r[0] != ""), None)
    return dict(zip(header, data, strict=False)) if data else {}


def line_findings(instructions: list[Instruction]) -> list[RawFinding]:
    """Per (file, line): the problems its instructions show; lines with none are left out.

    Long because it reads ncu's source page line by line, one branch per finding kind, in
    the order the page gives them."""
    by_line: dict[tuple[str, int], list[Instruction]] = {}
    for ins in instructions:
        by_line.setdefault((ins.path, ins.line), []).append(ins)
    total_samples = sum(i.number(STALL_SAMPLES) for i in instructions)
    total_sectors = sum(i.number(SECTORS) for i in instructions)
    divergent = _divergent_branches(instructions)
    hot = _hot_lines(by_line, total_samples)
    found: list[RawFinding] = []
    for (path, line), group in by_line.items():
        samples = sum(i.number(STALL_SAMPLES) for i in group)
        share = samples / total_samples if total_samples else 0.0
        kinds: list[str] = []
        notes: list[str] = []
        metrics: dict[str, float | str] = {"stall_samples": samples}
        sectors = sum(i.number(SECTORS) for i in group)
        ideal = sum(i.number(SECTORS_IDEAL) for i in group)
        excessive = sum(i.number(SECTORS_EXCESSIVE) for i in group)
        if (
            excessive > 0
            and excessive >= UNCOALESCED_MIN_RATIO * ideal
            and total_sectors
            and excessive / total_sectors >= UNCOALESCED_MIN_SHARE
        ):
            kinds.append("uncoalesced")
            metrics |= {
                "global_sectors": sectors,
                "global_sectors_ideal": ideal,
                "global_sectors_excessive": excessive,
                "excessive_share": round(excessive / total_sectors, 4),
            }
            ratio = f" ({sectors / ideal:.1f}× the ideal)" if ideal else ""
            notes.append(
                f"uncoalesced global access: {_count(sectors)} L2 sectors where "
                f"{_count(ideal)} would do{ratio}, the excess is "
                f"{excessive / total_sectors:.0%} of the kernel's global sectors: "
                + ADVICE["uncoalesced"]
            )
        shared = [i for i in group if "Shared" in i.values.get(SPACE, "") and i.number(EXECUTED)]
        ways = max((i.number(NWAY) for i in shared), default=0.0)
        if ways >= BANK_CONFLICT_MIN_WAYS:
            wavefronts = sum(i.number(EXECUTED) * max(i.number(NWAY), 1.0) for i in shared)
            accesses = sum(i.number(EXECUTED) for i in shared)
            kinds.append("bank_conflict")
            metrics |= {
                "bank_conflict_ways": ways,
                "shared_wavefronts": wavefronts,
                "shared_wavefronts_ideal": accesses,
            }
            notes.append(
                f"shared-memory bank conflict: {ways:.0f}-way, {_count(wavefronts)} wavefronts "
                f"where {_count(accesses)} would do: " + ADVICE["bank_conflict"]
            )
        local = [i for i in group if "Local" in i.values.get(SPACE, "") and i.number(EXECUTED)]
        if local:
            loads = sum((_executed(i) for i in local if "Load" in i.values.get(OPERATION, "")), 0.0)
            stores = sum(
                (_executed(i) for i in local if "Store" in i.values.get(OPERATION, "")), 0.0
            )
            kinds.append("local_memory")
            metrics |= {"local_loads": loads, "local_stores": stores}
            notes.append(
                f"local memory: {_count(loads)} loads and {_count(stores)} stores executed (warp "
                "instructions) for a spill or a per-thread array indexed at run time: "
                + ADVICE["local_memory"]
            )
        branch = divergent.get((path, line))
        if branch is not None:
            before, after = branch
            kinds.append("divergent_branch")
            metrics |= {
                "threads_at_branch": round(before, 2),
                "threads_after_branch": round(after, 2),
            }
            notes.append(
                f"divergent branch: warps arrive with {before:.1f} active threads on average and "
                f"go on with {after:.1f}: " + ADVICE["divergent_branch"]
            )
        if (path, line) in hot:
            reason = _main_stall(group)
            kinds.append("stall_hotspot")
            metrics["main_stall"] = reason
            what = STALL_REASONS.get(reason, reason.replace("_", " "))
            advice = STALL_ADVICE.get(reason)
            notes.append(
                f"stall hotspot: {share:.0%} of the kernel's warp-stall samples, mostly {what}"
                + (f": {advice}." if advice else ".")
            )
        if kinds:
            found.append(
                RawFinding(path, line, tuple(kinds), round(share, 4), " ".join(notes), metrics)
            )
    found.sort(key=lambda f: (-f.stall_share, f.path, f.line))
    return found


def _executed(ins: Instruction) -> float:
    return ins.number(EXECUTED)


def _hot_lines(
    by_line: dict[tuple[str, int], list[Instruction]], total: float
) -> set[tuple[str, int]]:
    if not total:
        return set()
    shares = sorted(
        ((sum(i.number(STALL_SAMPLES) for i in g) / total, key) for key, g in by_line.items()),
        reverse=True,
    )
    return {key for share, key in shares[:HOTSPOT_MAX_LINES] if share >= HOTSPOT_MIN_SHARE}


def _main_stall(group: Iterable[Instruction]) -> str:
    totals: dict[str, float] = {}
    for ins in group:
        for name, value in ins.values.items():
            if name.startswith("stall_") and not name.endswith("(Not Issued)"):
                totals[name] = totals.get(name, 0.0) + _number(value)
    if not totals or max(totals.values()) <= 0:
        return "none"
    return max(totals, key=lambda n: totals[n]).removeprefix("stall_")


def _divergent_branches(
    instructions: list[Instruction],
) -> dict[tuple[str, int], tuple[float, float]]:
    """(path, line) -> (threads arriving, threads going on) of its most divergent branch."""
    by_address = {i.address: i for i in instructions}
    ordered = sorted(by_address)
    following = dict(itertools.pairwise(ordered))
    found: dict[tuple[str, int], tuple[float, float]] = {}
    for ins in instructions:
        if not _CONDITIONAL_BRANCH.match(ins.sass) or ins.number(EXECUTED) <= 0:
            continue
        after = by_address.get(following.get(ins.address, -1))
        if after is None or after.number(EXECUTED) <= 0:
            continue  # every warp took the branch
        before_threads, after_threads = ins.number(THREADS), after.number(THREADS)
        if before_threads <= 0 or after_threads >= before_threads * (1 - DIVERGENCE_MIN_LOSS):
            continue
        key = (ins.path, ins.line)
        if key not in found or after_threads / before_threads < found[key][1] / found[key][0]:
            found[key] = (before_threads, after_threads)
    return found


# --- the kernel summary from the raw page ------------------------------------------------------

_LIMITS = {
    "launch__occupancy_limit_registers": "registers",
    "launch__occupancy_limit_shared_mem": "shared memory",
    "launch__occupancy_limit_warps": "block size (warps)",
    "launch__occupancy_limit_blocks": "blocks per SM",
    "launch__occupancy_limit_barriers": "barriers",
}
_FLOP_METRICS = {
    "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum": 1,
    "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum": 1,
    "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 2,
    "smsp__sass_thread_inst_executed_op_dadd_pred_on.sum": 1,
    "smsp__sass_thread_inst_executed_op_dmul_pred_on.sum": 1,
    "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum": 2,
    "smsp__sass_thread_inst_executed_op_hadd_pred_on.sum": 1,
    "smsp__sass_thread_inst_executed_op_hmul_pred_on.sum": 1,
    "smsp__sass_thread_inst_executed_op_hfma_pred_on.sum": 2,
}
FLOP_METRICS = tuple(_FLOP_METRICS)  # what the profiler asks ncu for, beyond the sections
BUSY_PCT = 60.0  # a unit this busy (of its peak) is the bound


def summary(raw: dict[str, str]) -> Summary:
    """Occupancy and its limiter, SM/DRAM throughput, and where the kernel sits on the roofline."""

    def get(*names: str) -> float | None:
        for name in names:
            if name in raw and raw[name].strip() not in ("", "n/a", "-"):
                value = _number(raw[name])
                return value
        return None

    limits = {label: v for m, label in _LIMITS.items() if (v := get(m)) is not None}
    theoretical = get("sm__maximum_warps_per_active_cycle_pct")
    limiter = min(limits, key=lambda k: limits[k]) if limits else None
    if theoretical is not None and theoretical >= 99.5:
        limiter = "none"  # every warp slot can be filled: nothing in the launch limits it
    sm = get("sm__throughput.avg.pct_of_peak_sustained_elapsed")
    dram = get(
        "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
        "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    )
    memory = get("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed")
    busiest_memory = max(memory or 0.0, dram or 0.0)
    if busiest_memory >= BUSY_PCT and busiest_memory >= (sm or 0.0):
        bound = "memory-bound" if (dram or 0.0) >= BUSY_PCT else "memory-bound (L1/L2)"
    elif (sm or 0.0) >= BUSY_PCT:
        bound = "compute-bound"
    else:
        bound = "latency-bound"
    flops = None
    if any(m in raw for m in _FLOP_METRICS):
        flops = sum(w * (get(m) or 0.0) for m, w in _FLOP_METRICS.items())
    dram_bytes = get("dram__bytes.sum")
    if dram_bytes is None:
        read, write = get("dram__bytes_read.sum"), get("dram__bytes_write.sum")
        dram_bytes = (
            (read or 0.0) + (write or 0.0) if read is not None or write is not None else None
        )
    intensity = flops / dram_bytes if flops is not None and dram_bytes else None
    duration = get("gpu__time_duration.sum")
    return Summary(
        device=raw.get("device__attribute_display_name", "").strip() or "unknown GPU",
        duration_us=duration / 1000 if duration is not None else None,
        achieved_occupancy_pct=get("sm__warps_active.avg.pct_of_peak_sustained_active"),
        theoretical_occupancy_pct=theoretical,
        occupancy_limiter=limiter,
        sm_throughput_pct=sm,
        dram_throughput_pct=dram,
        memory_throughput_pct=memory,
        bound=bound,
        arithmetic_intensity=round(intensity, 4) if intensity is not None else None,
        limits=limits,
    )


def _number(text: str) -> float:
    """'14,680,064' -> 14680064.0; '-', '' and anything else unreadable -> 0."""
    cleaned = text.strip().replace(",", "")
    try:
        return float(cleaned)
    except ValueError:
        return 0.0


def _count(value: float) -> str:
    """4194304 -> '4.19 M', 131072 -> '131 K', 12 -> '12'."""
    if value >= 1e6:
        return f"{value / 1e6:.2f} M"
    if value >= 1e4:
        return f"{value / 1e3:.0f} K"
    return f"{value:.0f}"
