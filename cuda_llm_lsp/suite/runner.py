"""Run the suite: `bench` every kernel of every `.cu` file in a directory, optionally the FSR
loop (live endpoint or a recorded / hand-written replay), then vendor-library timings, the
device's peaks and the floor of each kernel; the result is a `SuiteReport` (see `report`).

One failing kernel never stops the others: its row says what went wrong. Only "no GPU"
(`NoGpuError`) ends the run, because nothing else could be measured either.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import re
import time
from collections import Counter
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.engine import (
    CandidateEvaluated,
    Event,
    GpuService,
    Refusal,
    benchmark_in_file,
    measures,
    optimize_in_file,
    tune_in_file,
)
from cuda_llm_lsp.engine.build import recorded_shape
from cuda_llm_lsp.engine.measures import Peaks
from cuda_llm_lsp.evaluate.types import DeviceFacts, EvalResult, Evaluator, NoGpuError
from cuda_llm_lsp.fsr.types import config_from_settings
from cuda_llm_lsp.source.kernels import Kernel, find_kernels
from cuda_llm_lsp.source.spec import SpecError, TestSpec, parse_spec
from cuda_llm_lsp.source.spec.launch import LaunchConfig
from cuda_llm_lsp.source.spec.tunables import describe
from cuda_llm_lsp.suite.report import KernelRow, SuiteReport
from cuda_llm_lsp.tune.types import TuneOptions

T = TypeVar("T")
SCENARIOS = ("Basic algebra", "LLM kernels", "Sparse", "Scientific")


@dataclass(frozen=True, kw_only=True)
class SuiteOptions:
    directory: Path
    kernels: tuple[str, ...] = ()  # only these kernel names (empty: all)
    optimize: bool = False
    replay_dir: Path | None = None  # recorded replies: DIR/<kernel>/ or DIR itself
    rounds: int | None = None  # FSR rounds / candidates (replay: taken from the recording)
    candidates: int | None = None
    sanitize: bool = False  # compute-sanitizer on each winner (slow on large cases)
    vendor: bool = True
    settings: Settings = field(default_factory=Settings)
    command: str = ""
    # Wall-clock seconds for the kernels; those not started by then are reported as skipped,
    # so a run with a hard time limit (a lent GPU, CI) still ends with a report.
    deadline_s: float | None = None
    # kernels whose spec declares tunables are tuned after the bench (tuned against untuned)
    tune: TuneOptions | None = None


@dataclass(frozen=True)
class SuiteKernel:
    path: Path
    text: str
    kernel: Kernel
    spec: TestSpec | None
    errors: tuple[SpecError, ...]
    scenario: str


@dataclass(frozen=True)
class Progress:
    """One step of the run, for the progress bar: `row` is set when a kernel is finished."""

    index: int  # 1-based
    total: int
    kernel: str
    stage: str  # "bench", "optimize", "candidate r1c2: ok, 0.2 ms", "done", "vendor", "peaks"
    row: KernelRow | None = None


def scenario_of(text: str) -> str:
    """The scenario named at the top of a suite file (`// Sparse: ...`), else "other"."""
    for line in text.splitlines()[:5]:
        m = re.match(r"\s*//\s*([^:]+):", line)
        if m and m.group(1).strip() in SCENARIOS:
            return m.group(1).strip()
    return "other"


def discover(directory: Path, names: tuple[str, ...] = ()) -> list[SuiteKernel]:
    """Every kernel (with or without a spec) of every `.cu` file under `directory`, sorted."""
    found: list[SuiteKernel] = []
    for path in sorted(directory.glob("*.cu")):
        text = path.read_text(encoding="utf-8", errors="replace")
        for kernel in find_kernels(text):
            if names and kernel.name not in names:
                continue
            spec, errors = parse_spec(kernel, text)
            found.append(SuiteKernel(path, text, kernel, spec, tuple(errors), scenario_of(text)))
    return found


def replay_dir_for(replay: Path, kernel: str) -> tuple[Path, int, int] | None:
    """Where the recording of `kernel` lives and its (rounds, candidates); None if absent."""
    for where in (replay / kernel, replay):
        shape = recorded_shape(where, kernel)
        if shape is not None:
            return where, *shape
    return None


def _base_row(item: SuiteKernel) -> KernelRow:
    spec = item.spec
    dtype = measures.dtype_label(spec) if spec else "-"
    return KernelRow(
        file=item.path.name,
        kernel=item.kernel.name,
        scenario=item.scenario,
        dtype=dtype,
        status="error",
        cases_total=spec.case_count if spec else 0,
    )


def _timing_ms(result: EvalResult) -> tuple[float | None, float | None]:
    t = result.timing
    return (t.median_ms, t.spread_pct) if t else (None, None)


def _sure(work: Coroutine[Any, Any, T]) -> T:
    """An action run to its end here; "no GPU" ends the suite (`NoGpuError`), nothing else."""
    outcome = asyncio.run(work)
    if isinstance(outcome, Refusal) and outcome.kind == "no_gpu":
        raise NoGpuError(outcome.message)
    return outcome


class SuiteRunner:
    """Runs the suite on one evaluator: one GPU worker reused for every kernel, or a `GpuPool`
    whose GPUs take kernels in parallel."""

    def __init__(
        self,
        options: SuiteOptions,
        evaluator: Evaluator,
        on_progress: Callable[[Progress], None] | None = None,
    ) -> None:
        self.options = options
        self.evaluator = evaluator
        self.gpus = GpuService(lambda: evaluator)  # the caller's evaluator, closed by the caller
        self.on_progress = on_progress or (lambda _p: None)
        self.facts: DeviceFacts | None = None

    def run(self, items: list[SuiteKernel] | None = None) -> SuiteReport:
        """Raises NoGpuError when there is no GPU; every other problem lands in a row.

        `items`: the kernels already `discover`ed from the options (found again when None)."""
        opts = self.options
        if items is None:
            items = discover(opts.directory, opts.kernels)
        self.facts = self.evaluator.device_facts()  # NoGpuError propagates: nothing to measure
        notes: list[str] = []
        total = len(items)
        started = time.monotonic()

        def one(i: int, item: SuiteKernel) -> KernelRow:
            if opts.deadline_s is not None and time.monotonic() - started > opts.deadline_s:
                row = replace(
                    _base_row(item),
                    status="skipped",
                    message=f"not run: the suite's deadline of {opts.deadline_s:g} s was reached",
                )
                self.on_progress(Progress(i, total, item.kernel.name, "done", row))
                return row
            self.on_progress(Progress(i, total, item.kernel.name, "bench"))
            try:
                row = self.run_kernel(item, i, total)
            except NoGpuError:
                raise
            except Exception as exc:  # one broken kernel never stops the suite
                row = replace(
                    _base_row(item), status="error", message=f"{type(exc).__name__}: {exc}"
                )
            self.on_progress(Progress(i, total, item.kernel.name, "done", row))
            return row

        # several GPUs (a `GpuPool`): as many kernels at once, each call on one GPU of the pool
        width = getattr(self.evaluator, "width", 1)
        if width > 1:
            notes.append(f"kernels spread over {width} GPUs; each speedup is measured on one GPU")
            with concurrent.futures.ThreadPoolExecutor(width, "suite-kernel") as pool:
                futures = [pool.submit(one, i, item) for i, item in enumerate(items, 1)]
                try:
                    rows = [f.result() for f in futures]
                except NoGpuError:
                    for f in futures:
                        f.cancel()
                    raise
        else:
            rows = [one(i, item) for i, item in enumerate(items, 1)]

        peaks = self._peaks(notes)
        rows = [self._with_floor(row, item, peaks) for row, item in zip(rows, items, strict=True)]
        if opts.vendor:
            self.on_progress(Progress(total, total, "vendor libraries", "vendor"))
            rows = self._with_vendor(rows, items, notes)
        if opts.optimize and not opts.sanitize:
            notes.append("winners were not run under compute-sanitizer (use --sanitize)")
        if opts.optimize:
            notes.append(f"launch policy (--launch): {opts.settings.launch}")
        facts = self.facts
        return SuiteReport(
            rows=tuple(rows),
            device=f"{facts.name} ({facts.arch}, {facts.sm_count} SMs)",
            command=opts.command,
            created=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            optimize=opts.optimize,
            copy_bandwidth_gbs=facts.copy_bandwidth_gbs,
            peak_fp32_gflops=peaks.fp32_gflops if peaks else None,
            peak_bf16_gflops=peaks.bf16_gflops if peaks else None,
            peaks_source=peaks.source if peaks else "",
            notes=tuple(notes),
        )

    # -- one kernel -------------------------------------------------------------------------

    def run_kernel(self, item: SuiteKernel, index: int, total: int) -> KernelRow:
        row = _base_row(item)
        if item.spec is None:
            if item.errors:
                shown = "; ".join(f"line {e.span.start.line + 1}: {e.message}" for e in item.errors)
                return replace(row, status="spec_error", message=shown)
            return replace(row, status="skipped", message="no test spec")
        if self.options.optimize:
            recording = None
            if self.options.replay_dir is not None:
                recording = replay_dir_for(self.options.replay_dir, item.kernel.name)
            if self.options.replay_dir is None or recording is not None:
                self.on_progress(Progress(index, total, item.kernel.name, "optimize"))
                optimized = self._optimize(item, row, recording, index, total)
                if optimized is not None:
                    return optimized
        benched = self._bench(item, row)
        if self.options.tune is not None and item.spec.tunables is not None:
            self.on_progress(Progress(index, total, item.kernel.name, "tune"))
            return self._tune(item, benched, self.options.tune)
        return benched

    def _tune(self, item: SuiteKernel, row: KernelRow, options: TuneOptions) -> KernelRow:
        """The kernel's tunables searched (tune/): the best configuration against the untuned
        default, both measured in the same runs."""
        outcome = _sure(
            tune_in_file(
                item.text, item.path, item.kernel.name, self.options.settings, self.gpus, options
            )
        )
        if isinstance(outcome, Refusal):
            return replace(row, tuned=True, tuned_note=outcome.message)
        result = outcome.result
        best, default = result.best, result.default_result
        if best is None:
            return replace(row, tuned=True, tuned_note="no configuration passed its checks")
        return replace(
            row,
            tuned=True,
            tuned_config=describe(best.config),
            untuned_ms=default.ms if default else None,
            tuned_ms=best.ms,
            tuned_speedup=best.speedup,
            tuned_points=len(result.measured),
            tuned_spread=result.spread,
        )

    def _bench(self, item: SuiteKernel, row: KernelRow) -> KernelRow:
        outcome = _sure(
            benchmark_in_file(
                item.text, item.path, item.kernel.name, self.options.settings, self.gpus
            )
        )
        if isinstance(outcome, Refusal):
            return replace(row, status=outcome.status, message=outcome.message)
        result = outcome.result
        ms, spread = _timing_ms(result)
        return replace(
            row,
            status=result.status,
            message=result.message,
            cases_passed=result.cases_passed,
            cases_total=len(result.cases) or row.cases_total,
            baseline_ms=ms,
            baseline_spread_pct=spread,
            best_ms=ms,
            speedup=1.0 if ms else None,
        )

    def _optimize(
        self,
        item: SuiteKernel,
        row: KernelRow,
        recording: tuple[Path, int, int] | None,
        index: int = 0,
        total: int = 0,
    ) -> KernelRow | None:
        """The FSR loop's row; None when the loop could not even measure the baseline."""
        opts = self.options
        overrides: dict[str, object] = {"sanitize_winner": opts.sanitize, "profile": False}
        if recording is not None:
            where, rounds, candidates = recording
            overrides.update(
                replay_dir=str(where), rounds=rounds, candidates=candidates, patience=rounds
            )
        else:
            overrides.update(rounds=opts.rounds, candidates=opts.candidates)
        config = config_from_settings(opts.settings, **overrides)
        name = item.kernel.name

        def on_event(event: Event) -> None:
            if isinstance(event, CandidateEvaluated):
                o = event.outcome
                ms = f", {o.ms:.4g} ms" if o.ms else ""
                gpu = f" on {o.gpu.split(' ')[0]}" if o.gpu else ""  # a pool: which GPU judged it
                stage = f"candidate r{o.round}c{o.index}: {o.status}{ms}{gpu}"
                self.on_progress(Progress(index, total, name, stage))

        outcome = _sure(
            optimize_in_file(
                item.text, item.path, name, opts.settings, config, self.gpus, on_event=on_event
            )
        )
        if isinstance(outcome, Refusal):
            return None  # the plain bench reports the kernel's own problem
        result = outcome.result
        base = result.baseline_result
        if result.error and (base is None or base.status != "ok"):
            return None  # the plain bench reports the baseline's own problem
        statuses = Counter(str(c.status) for c in result.candidates)
        base_ms, base_spread = _timing_ms(base) if base is not None else (None, None)
        baseline_ms = result.baseline_ms or base_ms
        accepted = bool(result.accepted)
        best_ms = result.best_ms if accepted else baseline_ms
        speedup = result.speedup if accepted else (1.0 if baseline_ms else None)
        cases_total = len(base.cases) if base is not None else row.cases_total
        cases_passed = base.cases_passed if base is not None else 0
        best = result.best_result
        if accepted and best is not None and best.cases:
            cases_total, cases_passed = len(best.cases), best.cases_passed
        # the winner's own launch block (`--launch free`, or `auto` where the sites allow it)
        own = result.best_launch if accepted else None
        assert item.spec is not None
        return replace(
            row,
            status="ok"
            if cases_passed == cases_total and cases_total
            else (base.status if base is not None else "error"),
            message=str(result.message),
            cases_passed=cases_passed,
            cases_total=cases_total,
            baseline_ms=baseline_ms,
            baseline_spread_pct=base_spread,
            best_ms=best_ms,
            speedup=speedup,
            optimized=True,
            accepted=accepted,
            candidates=len(result.candidates),
            candidate_statuses=dict(statuses),
            launch=own.describe() if own else "",
            original_launch=LaunchConfig.of_spec(item.spec).describe() if own else "",
        )

    # -- device-wide figures ----------------------------------------------------------------

    def _peaks(self, notes: list[str]) -> Peaks | None:
        self.on_progress(Progress(0, 0, "device peaks", "peaks"))
        assert self.facts is not None
        try:
            found = measures.device_peaks(self.facts, self.evaluator)
        except NoGpuError:
            raise
        except Exception as exc:
            notes.append(f"peaks not measured: {type(exc).__name__}: {exc}")
            return None
        if found.note:
            notes.append(found.note)
        return found

    def _with_floor(self, row: KernelRow, item: SuiteKernel, peaks: Peaks | None) -> KernelRow:
        spec = item.spec
        if spec is None or self.facts is None:
            return row
        f = measures.kernel_floor(spec, self.facts, peaks)
        if f is None:
            return row
        return replace(
            row,
            bytes=f.bytes,
            flops=f.flops,
            floor_ms=f.ms,
            bound=f.bound,
            pct_of_floor_baseline=measures.percent_of_floor(f.ms, row.baseline_ms),
            pct_of_floor_best=measures.percent_of_floor(f.ms, row.best_ms),
        )

    def _with_vendor(
        self, rows: list[KernelRow], items: list[SuiteKernel], notes: list[str]
    ) -> list[KernelRow]:
        jobs = [
            job
            for item in items
            if item.spec and (job := measures.vendor_job(str(item.path), item.kernel.name))
        ]
        if not jobs:
            return rows
        started = time.monotonic()
        results, problem = measures.vendor_times(jobs, self.facts.l2_bytes if self.facts else 0)
        if problem:
            notes.append(f"vendor libraries: {problem}")
        notes.append(f"vendor timings took {time.monotonic() - started:.0f} s")
        out = []
        for row in rows:
            found = results.get(row.kernel)
            if found is None:
                out.append(row)
            elif found.ms is not None:
                out.append(replace(row, vendor=found.library, vendor_ms=found.ms))
            else:
                out.append(replace(row, vendor=found.library, vendor_note=found.note))
        return out
