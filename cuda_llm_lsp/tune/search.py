"""`tune_kernel`: the fastest correct configuration of a kernel's tunables, within a budget.

Each configuration chosen by `space` is checked against the device's launch limits, compiled
(`-DNAME=value`, NVRTC in the compile processes, through the compile cache: `build_binary`) in a
thread pool of `workers` so compiles overlap each other and the evaluation, then judged and timed
by `Evaluator.evaluate` against the default configuration: every case of the spec (correctness
against the default as the oracle, outputs poisoned, guards, a second run), the timed case with
the L2 flushed and the two kernels interleaved, with the configuration's own launch
(`candidate_spec`). The finalists (the fastest few correct ones) are evaluated again on new
inputs (a fresh seed) and re-timed; the best is the fastest finalist that passes again. Hidden
generalisation cases come with `evaluate` once the evaluator runs them. Only the `Evaluator`
protocol is used, so the recorded evaluator drives the CPU tests.

The time budget covers the search: no configuration starts after it; the finalists are
re-checked after it. `cancel` (a `CancelToken`) stops between configurations; a caller that
also calls `evaluator.cancel()` interrupts the one in flight. Either way the measured part is
returned, marked `stopped`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import replace
from pathlib import Path
from typing import Protocol

from cuda_llm_lsp.cancel import CancelToken
from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.evaluate.candidate import CandidateRejected, build_binary
from cuda_llm_lsp.evaluate.types import (
    DeviceFacts,
    EvalResult,
    EvaluationCancelled,
    Evaluator,
    KernelBinary,
)
from cuda_llm_lsp.source.spec import TestSpec
from cuda_llm_lsp.source.spec.cases import evaluate_cases
from cuda_llm_lsp.source.spec.tunables import Tunables, describe
from cuda_llm_lsp.source.templates import template_constants
from cuda_llm_lsp.tune.space import Key, Space
from cuda_llm_lsp.tune.types import (
    Measured,
    Stopped,
    TuneError,
    TuneOptions,
    TuneProgress,
    TuneRequest,
    TuneResult,
)

__all__ = [
    "Measured",
    "TuneError",
    "TuneOptions",
    "TuneProgress",
    "TuneRequest",
    "TuneResult",
    "tune_kernel",
]

Builder = Callable[[dict[str, int]], KernelBinary | CandidateRejected]


class Compile(Protocol):
    """`build_binary`'s signature (the FSR loop's `Toolchain.build` too)."""

    def __call__(
        self,
        file_text: str,
        path: Path | None,
        kernel_name: str,
        settings: Settings,
        /,
        *,
        kernel_source: str | None = None,
        instance: str | None = None,
        spec: TestSpec | None = None,
        arch: str | None = None,
    ) -> KernelBinary | CandidateRejected: ...


def binary_builder(
    request: TuneRequest, arch: str | None, *, compile: Compile = build_binary
) -> Builder:
    """Compile the request's kernel (a candidate's `kernel_source` spliced in) with a
    configuration's `-D`s for `arch`, as the spec's instance, by `compile` (`build_binary`:
    NVRTC in a compile process, the compile cache in this one; the FSR loop passes its
    toolchain's). The binary carries its text and `defines`."""

    def build(config: dict[str, int]) -> KernelBinary | CandidateRejected:
        defines = Tunables.compile_defines(config)
        settings = replace(request.settings, defines=(*request.settings.defines, *defines))
        built = compile(
            request.file_text,
            request.path,
            request.kernel,
            settings,
            kernel_source=request.kernel_source,
            spec=request.spec,
            arch=arch,
        )
        if isinstance(built, CandidateRejected):
            return built
        source = request.kernel_source if request.kernel_source is not None else request.file_text
        return replace(built, kernel_source=source, defines=defines)

    return build


def launch_problem(spec: TestSpec, facts: DeviceFacts) -> str | None:
    """Why this configuration's launch cannot run on the device, or None."""
    cases, problems = evaluate_cases(spec)
    if problems:
        return problems[0].message
    for case in cases:
        threads = case.block[0] * case.block[1] * case.block[2]
        if threads > facts.max_threads_per_block:
            return (
                f"block has {threads} threads in case {case.index}; this GPU allows "
                f"{facts.max_threads_per_block}"
            )
        if case.smem > facts.shared_per_block_optin:
            return (
                f"smem is {case.smem} bytes in case {case.index}; this GPU allows "
                f"{facts.shared_per_block_optin} per block"
            )
    return None


def tune_kernel(
    request: TuneRequest,
    evaluator: Evaluator,
    options: TuneOptions | None = None,
    *,
    build: Builder | None = None,
    on_progress: Callable[[TuneProgress], None] | None = None,
    on_planned: Callable[[int], None] | None = None,
    cancel: CancelToken | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> TuneResult:
    """Search the request's tunables (see the module docstring). `on_planned` hears, once the
    strategy is chosen and before anything is measured, how many configurations are planned
    (`TuneProgress.planned`); `on_progress` each measured one. Raises `TuneError` when the
    spec has no tunables or the default does not build, and `BaselineFailed` from the evaluator
    when the default configuration fails its own spec."""
    options = options or TuneOptions()
    tunables = request.tuning.tunables
    if tunables is None:
        raise TuneError(f"{request.kernel}'s spec declares no tunables (tune.NAME = [values])")
    facts = evaluator.device_facts()
    run = _Run(
        request,
        evaluator,
        options,
        build or binary_builder(request, facts.arch),
        facts,
        on_progress,
        cancel or CancelToken(),
        clock,
    )
    try:
        return run.search(tunables, on_planned)
    finally:
        run.pool.shutdown(wait=False, cancel_futures=True)


class _Run:
    def __init__(
        self,
        request: TuneRequest,
        evaluator: Evaluator,
        options: TuneOptions,
        build: Builder,
        facts: DeviceFacts,
        on_progress: Callable[[TuneProgress], None] | None,
        cancel: CancelToken,
        clock: Callable[[], float],
    ) -> None:
        self.request = request
        self.spec = request.spec  # the oracle's
        self.tuned = request.tuning  # whose configurations are tried
        self.evaluator = evaluator
        self.options = options
        self.build = build
        self.facts = facts
        self.on_progress = on_progress
        self.cancel = cancel
        self.clock = clock
        self.start = clock()
        self.pool = ThreadPoolExecutor(max(1, options.workers), thread_name_prefix="tune-compile")
        self.results: dict[Key, Measured] = {}
        self.order: list[Key] = []
        self.stopped: Stopped | None = None
        self.baseline: KernelBinary | None = None
        self.planned = options.max_points

    def search(self, tunables: Tunables, on_planned: Callable[[int], None] | None) -> TuneResult:
        constants = template_constants(self.tuned.template_args)
        space = Space(tunables, constants)
        default = dict(tunables.default)
        self.baseline = self.request.baseline
        if self.baseline is None:
            built = self.build(default)
            if isinstance(built, CandidateRejected):
                raise TuneError(
                    f"the default configuration ({describe(default)}) does not "
                    f"build: {built.message}"
                )
            self.baseline = built
        strategy, planned = space.strategy(self.options.max_points)
        if strategy == "exhaustive":
            self.planned = len(planned)
        if on_planned is not None:
            on_planned(self.planned)
        if strategy == "exhaustive":
            self.measure(space, planned)
        else:
            self.refine(space, default)
        self.recheck_finalists(space)
        measured = tuple(self.results[k] for k in self.order)
        finalists = [m for m in measured if m.finalist and m.status == "ok"]
        best = max(finalists, key=lambda m: m.speedup or 0, default=None)
        return TuneResult(
            self.request.kernel,
            strategy,
            tunables.space_size,
            default,
            measured,
            best,
            self.stopped,
            self.clock() - self.start,
        )

    # --- strategies ------------------------------------------------------------------------

    def refine(self, space: Space, default: dict[str, int]) -> None:
        """Random sample, then greedy hill climbs from the best starts (module `space`)."""
        rng = random.Random(self.options.seed)
        count = max(1, int(self.options.max_points * self.options.sample_fraction))
        first = [default] if space.allows(space.key(default)) else []
        first += space.sample(count - len(first), rng, {space.key(default)})
        self.measure(space, first)
        climbed: set[Key] = set()
        while not self.stopped and len(self.results) < self.options.max_points:
            starts = [k for k in self._ok_fastest_first() if k not in climbed]
            if not starts:
                break
            current = starts[0]
            climbed.add(current)
            while not self.stopped:
                room = self.options.max_points - len(self.results)
                fresh = [k for k in space.neighbours(current) if k not in self.results][:room]
                if not fresh:
                    break
                self.measure(space, [space.config(k) for k in fresh])
                better = [k for k in space.neighbours(current) if self._faster(k, current)]
                if not better:
                    break
                current = max(better, key=lambda k: self.results[k].speedup or 0)
                climbed.add(current)

    def recheck_finalists(self, space: Space) -> None:
        if self.stopped == "cancelled":
            return
        for key in self._ok_fastest_first()[: self.options.finalists]:
            config = space.config(key)
            assert self.baseline is not None
            binary = self.build(config)
            if isinstance(binary, CandidateRejected):  # built before: only a cache loss
                continue
            result = self._evaluate(config, binary, seed=None)
            if result is None:
                return
            self.results[key] = replace(_measured(config, result), finalist=True)

    # --- measuring -------------------------------------------------------------------------

    def measure(self, space: Space, configs: Sequence[dict[str, int]]) -> None:
        """Compile `configs` in the pool and evaluate each as its compile finishes."""
        futures: dict[Future[KernelBinary | CandidateRejected], dict[str, int]] = {}
        for config in configs:
            key = space.key(config)
            if key in self.results:
                continue
            problem = launch_problem(self.tuned.with_configuration(config), self.facts)
            if problem is not None:
                self._record(key, Measured(config, "launch_error", problem))
                continue
            futures[self.pool.submit(self.build, config)] = config
        for future in as_completed(futures):
            if self._should_stop():
                for other in futures:
                    other.cancel()
                return
            config = futures[future]
            binary = future.result()
            key = space.key(config)
            if isinstance(binary, CandidateRejected):
                self._record(key, Measured(config, binary.status, binary.message))
                continue
            result = self._evaluate(config, binary, seed=self.options.seed)
            if result is None:
                return
            self._record(key, _measured(config, result))

    def _evaluate(
        self, config: dict[str, int], binary: KernelBinary, seed: int | None
    ) -> EvalResult | None:
        assert self.baseline is not None
        try:
            return self.evaluator.evaluate(
                self.baseline,
                binary,
                self.spec,
                spec_dir=self._spec_dir(),
                seed=seed,
                candidate_spec=self.tuned.with_configuration(config),
            )
        except EvaluationCancelled:
            self.stopped = "cancelled"
            return None

    def _spec_dir(self) -> Path | None:
        path = self.request.path
        return Path(path).parent if path is not None else None

    def _should_stop(self) -> bool:
        if self.cancel.cancelled:
            self.stopped = "cancelled"
        elif self.stopped is None and self.clock() - self.start > self.options.budget_s:
            self.stopped = "budget"
        return self.stopped is not None

    def _record(self, key: Key, measured: Measured) -> None:
        self.results[key] = measured
        self.order.append(key)
        if self.on_progress is not None:
            self.on_progress(TuneProgress(len(self.results), self.planned, measured))

    def _ok_fastest_first(self) -> list[Key]:
        ok = [k for k in self.order if self.results[k].status == "ok"]
        return sorted(ok, key=lambda k: -(self.results[k].speedup or 0))

    def _faster(self, key: Key, than: Key) -> bool:
        a, b = self.results.get(key), self.results.get(than)
        return bool(a and b and a.status == "ok" and (a.speedup or 0) > (b.speedup or 0))


def _measured(config: dict[str, int], result: EvalResult) -> Measured:
    timing = result.candidate
    return Measured(
        config,
        result.status,
        result.message,
        ms=timing.median_ms if timing else None,
        spread_pct=timing.spread_pct if timing else None,
        speedup=result.speedup,
    )
