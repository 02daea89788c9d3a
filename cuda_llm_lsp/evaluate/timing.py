"""Kernel timing: the statistics (pure, CPU-testable) and the event loop the worker runs.

Method (docs/design.md, evaluation rules): CUDA events around each launch; warm-up launches first;
an L2 flush (a read of a buffer at least twice the L2: a write would leave dirty lines for the
timed kernel to write back) before EVERY timed launch, outside the timed region; several kernels
interleaved (A B A B ...) so drift in clocks or temperature hits them alike; batches of launches
until the median is stable or the time budget is spent.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from cuda_llm_lsp.evaluate.types import Timing

MIN_SAMPLES = 30
MAX_SAMPLES = 3000
TARGET_REL_CI = 0.003  # half-width of the median's ~95% confidence interval, relative
BUDGET_S = 1.5  # per kernel
WARMUP = 3  # launches of each kernel at least ...
WARMUP_S = 0.05  # ... and for at least this long: the clocks ramp up from idle
BATCH = 10
# copies of a timed kernel's buffers its launches rotate over: where buffers land in memory moves
# a small kernel's time by ~1 % between placements (benchmarks/timing_placement.py), so one
# placement per run made two runs disagree by as much; the median over several averages it
PLACEMENTS = 4


def _sorted(samples: Sequence[float]) -> list[float]:
    return sorted(float(s) for s in samples)


def median(samples: Sequence[float]) -> float:
    s = _sorted(samples)
    if not s:
        raise ValueError("no samples")
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def quantile(samples: Sequence[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default method)."""
    s = _sorted(samples)
    if not s:
        raise ValueError("no samples")
    pos = q * (len(s) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def median_ci_rel(samples: Sequence[float]) -> float:
    """Relative half-width of a distribution-free ~95% confidence interval of the median.

    Uses the order statistics at ranks n/2 ± 1.96·√n/2 (binomial normal approximation).
    """
    s = _sorted(samples)
    n = len(s)
    if n < 3:
        return math.inf
    half = 1.96 * math.sqrt(n) / 2
    lo = max(0, math.floor(n / 2 - half))
    hi = min(n - 1, math.ceil(n / 2 + half))
    m = median(s)
    if m <= 0:
        return math.inf
    return (s[hi] - s[lo]) / (2 * m)


def is_stable(
    samples: Sequence[float], *, min_samples: int = MIN_SAMPLES, target: float = TARGET_REL_CI
) -> bool:
    return len(samples) >= min_samples and median_ci_rel(samples) < target


def summarize(samples: Sequence[float]) -> Timing:
    m = median(samples)
    iqr = quantile(samples, 0.75) - quantile(samples, 0.25)
    return Timing(
        median_ms=m,
        spread_pct=100.0 * iqr / m if m > 0 else 0.0,
        min_ms=min(samples),
        max_ms=max(samples),
        samples=len(samples),
    )


@dataclass(frozen=True)
class Plan:
    """How long to keep timing."""

    min_samples: int = MIN_SAMPLES
    max_samples: int = MAX_SAMPLES
    target_rel_ci: float = TARGET_REL_CI
    budget_s: float = BUDGET_S  # per kernel
    warmup: int = WARMUP
    warmup_s: float = WARMUP_S
    batch: int = BATCH
    placements: int = PLACEMENTS  # at most; fewer where the copies would be large (worker)


def done(per_kernel: Sequence[Sequence[float]], elapsed_s: float, plan: Plan) -> bool:
    """Stop when every kernel's median is stable, or at the sample cap, or past the budget."""
    if not per_kernel or not per_kernel[0]:
        return False
    if len(per_kernel[0]) >= plan.max_samples:
        return True
    if elapsed_s >= plan.budget_s * len(per_kernel) and len(per_kernel[0]) >= 3:
        return True
    return all(
        is_stable(s, min_samples=plan.min_samples, target=plan.target_rel_ci) for s in per_kernel
    )


def _nothing(timed: bool) -> None:
    pass


def time_interleaved(
    driver: Any,
    stream: Any,
    launches: Sequence[Callable[[], None]],
    flush: Callable[[], None],
    sync: Callable[[], None],
    plan: Plan,
    *,
    check: Callable[[Any, str], Any],
    prepare: Sequence[Callable[[bool], None]] | None = None,
    after: Sequence[Callable[[bool], None]] | None = None,
) -> list[list[float]]:
    """Milliseconds per launch for each of `launches`, interleaved, with an L2 flush before each.

    `launches[k]()` enqueues kernel k on `stream`; `flush()` enqueues the L2 flush; `sync()`
    waits for the stream (with the worker's watchdog) and raises on any CUDA error.
    `check(result, where)` is the worker's: a driver call's error becomes its CudaError (a fault).
    `prepare[k](timed)` (optional) enqueues work to do before each launch of kernel k (new
    inputs, `inout` restored, outputs re-poisoned): before the flush, so it neither sits in the
    timed region nor warms the L2. `after[k](timed)` enqueues work after each launch (after its
    end event: a snapshot of a sampled launch's buffers). `timed` is False for warm-up launches.
    """
    before = list(prepare) if prepare is not None else [_nothing] * len(launches)
    behind = list(after) if after is not None else [_nothing] * len(launches)

    warm_start = time.perf_counter()
    rounds = 0
    while rounds < plan.warmup or time.perf_counter() - warm_start < plan.warmup_s:
        for launch, prep, post in zip(launches, before, behind, strict=True):
            prep(False)
            flush()
            launch()
            post(False)
        rounds += 1
        if rounds % plan.batch == 0 or rounds == plan.warmup:
            sync()
    sync()
    k = len(launches)
    events = [
        [
            (
                check(driver.cuEventCreate(0), "cuEventCreate"),
                check(driver.cuEventCreate(0), "cuEventCreate"),
            )
            for _ in range(k)
        ]
        for _ in range(plan.batch)
    ]
    samples: list[list[float]] = [[] for _ in range(k)]
    start = time.perf_counter()
    try:
        while not done(samples, time.perf_counter() - start, plan):
            for row in events:
                for (ev_start, ev_end), launch, prep, post in zip(
                    row, launches, before, behind, strict=True
                ):
                    prep(True)
                    flush()
                    check(driver.cuEventRecord(ev_start, stream), "cuEventRecord")
                    launch()
                    check(driver.cuEventRecord(ev_end, stream), "cuEventRecord")
                    post(True)
            sync()
            for row in events:
                for j, (ev_start, ev_end) in enumerate(row):
                    ms = check(driver.cuEventElapsedTime(ev_start, ev_end), "cuEventElapsedTime")
                    samples[j].append(float(ms))
    finally:
        for row in events:
            for pair in row:
                for ev in pair:
                    driver.cuEventDestroy(ev)
    return samples
