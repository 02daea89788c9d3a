"""`GpuEvaluator`: the `Evaluator` of a local GPU, composing the worker, launches and judge.

Kernel Tuner's split: the worker process (`process`, `worker`) is the backend that runs launches;
this module is the runner that decides what to run (cases, oracle, repeats, timing) and asks the
judge (`judge`, rules in docs/design.md) what each run shows. One worker process per GPU, started
lazily and reused across candidates; killed and restarted after a fault, a hang or a cancel (the
candidate gets that status; the next call gets a fresh context). All methods block; call them
from a thread. `cancel()` may come from any thread.

Evaluation stops at the first failing case. A correct candidate gets "ok" with its speedup
(whether it is "slower" is the FSR loop's call). If the ORACLE fails, `BaselineFailed` is raised:
no candidate is blamed for a broken reference.

Timing holes, and why each is closed (or what remains):
- Caching and replay across launches. Every timed launch gets inputs no launch had (the worker
  regenerates them with fresh keys, `inout` restored) and poisoned outputs, outside the timed
  region; one launch at a random position in each of the first batches runs on a reference set
  the original was run on first and is checked (outputs, inputs unchanged), every buffer's guards
  after the timing, the last launch for poison. A saved result never matches new inputs; a kernel
  that skips work leaves poison. Remains: skipping work on launches that are neither sampled nor
  the last is caught only with the probability of hitting a sampled one.
- The original's results: kept runs live in the worker's host memory and every released
  allocation is zeroed (docs/design.md says why this and not random pads or two processes); the
  original is timed on inputs of its own. Candidate modules are unloaded after each evaluation.
- Work on other streams, dynamic parallelism: candidates are compiled by NVRTC as a device-only
  unit without -rdc and without cudadevrt, so a device-side `<<<>>>`, `cudaLaunchDevice` (even
  declared by hand) or `cudaStreamCreateWithFlags` does not compile (compile_error; planted in
  tests/gpu/kernels.py). Candidates cannot run host code, so they cannot enqueue anything on
  another stream. (A user's own `nvrtc_flags` adding -rdc gives a cubin with unresolved externs,
  which fails to load: launch_error.)
- Work left running after the kernel returns: none can exist without child launches or streams
  (above); the end event is recorded on the same stream right after the launch, so it completes
  only after every block of the kernel has finished.
- L2 flush before every timed launch: `timing.time_interleaved` enqueues flush -> start event ->
  launch -> end event for every sample (warm-up included), the flush a read of a zeroed buffer
  of >= 2x the L2 (min 64 MiB; `device_checks`' `cl_flush`), which leaves L2 with clean lines
  (a memset left dirty ones, whose write-back the timed kernel paid); the CPU test double fails
  any launch recorded between events without a flush since the previous launch.
- Baseline and candidate interleaved: A B A B ... in the same process, stream and batch, the same
  flush and re-poison before each, until both medians are stable or the budget is spent.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import numpy as np
import platformdirs

from cuda_llm_lsp.cachefiles import write_json_atomic
from cuda_llm_lsp.cancel import CancelToken, relayed
from cuda_llm_lsp.evaluate import judge, timing
from cuda_llm_lsp.evaluate.captured import (
    CapturedDataError,
    captured_outputs,
    is_captured_case,
    with_captured_arguments,
)
from cuda_llm_lsp.evaluate.compare import OK, Finding
from cuda_llm_lsp.evaluate.counter import KIND_CODES, Generated
from cuda_llm_lsp.evaluate.inputs import InputError, case_sources
from cuda_llm_lsp.evaluate.judge import LaunchOutcome
from cuda_llm_lsp.evaluate.launch import bad_launch, bytes_moved, case_launch
from cuda_llm_lsp.evaluate.process import START_TIMEOUT_S, Worker
from cuda_llm_lsp.evaluate.protocol import (
    BandwidthReply,
    BandwidthRequest,
    Checks,
    FactsReply,
    FactsRequest,
    Failure,
    KeepRequest,
    Pong,
    RunReply,
    RunRequest,
    TimedKernel,
    TimeReply,
    TimeRequest,
)
from cuda_llm_lsp.evaluate.types import (
    BaselineFailed,
    CaseOutcome,
    DeviceFacts,
    EvalResult,
    KernelBinary,
    NoGpuError,
    Status,
)
from cuda_llm_lsp.source.spec import Case, InitSpec, TestSpec
from cuda_llm_lsp.source.spec.hidden import hidden_cases

Inputs = Mapping[str, np.ndarray | Generated]
# device_facts.json's read-modify-write (the evaluators of a pool measure at the same time)
_FACTS_CACHE_LOCK = threading.Lock()


def _not_reproduced(found: Finding) -> str:
    return (
        "the original kernel does not reproduce the captured outputs on the captured inputs "
        f"(is this the source the program was built from, and the spec's timed case the "
        f"captured launch?): {found.message}"
    )


def _read_facts_cache(path: Path) -> dict[str, Any]:
    try:
        stored = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return stored if isinstance(stored, dict) else {}


class GpuEvaluator:
    """The `Evaluator` for the local GPU `device` (see module docstring for the rules)."""

    def __init__(
        self,
        device: int = 0,
        *,
        launch_timeout_s: float = 5.0,
        plan: timing.Plan | None = None,
        cache_dir: Path | None = None,
    ) -> None:
        self.device = device
        self.launch_timeout_s = launch_timeout_s
        self.plan = plan or timing.Plan()
        self._cache_dir = cache_dir
        self._lock = threading.RLock()
        self._depth = 0  # calls of this thread in `_one_call` (they nest)
        self._worker = Worker(device)
        self._facts: DeviceFacts | None = None
        # seconds per phase of the last `evaluate` / `benchmark` (the worker's "inputs", "run",
        # "checks" of every run, and "timing"), for benchmarks/realistic_sizes.py
        self.phases: dict[str, float] = {}

    @property
    def restarts(self) -> int:
        """Worker processes started after the first (each after a fault, hang or cancel)."""
        return self._worker.restarts

    # --- device facts ------------------------------------------------------------------------
    @contextlib.contextmanager
    def _one_call(self, stop: CancelToken | None) -> Iterator[None]:
        """A call holds the worker: a cancel of an earlier call is forgotten as it begins (not
        inside a call: `device_facts` within `evaluate`), and `stop`'s reaches this call only,
        even one that came before it began."""
        with self._lock:
            if self._depth == 0:
                self._worker.cancelled.clear()
            self._depth += 1
            try:
                with relayed(stop, self.cancel):
                    yield
            finally:
                self._depth -= 1

    def device_facts(self) -> DeviceFacts:
        with self._one_call(None):
            if self._facts is None:
                self._facts = self._query_facts()
            return self._facts

    def _query_facts(self) -> DeviceFacts:
        reply = self._worker.call(FactsRequest(), FactsReply, START_TIMEOUT_S)
        if isinstance(reply, Failure):
            raise NoGpuError(reply.message)
        key = f"{reply.facts.name}|driver {reply.driver_version}|device {self.device}"
        cache = self._facts_cache_path()
        entry = _read_facts_cache(cache).get(key)
        bandwidth = entry.get("copy_bandwidth_gbs") if isinstance(entry, dict) else None
        if not isinstance(bandwidth, int | float):
            bw = self._worker.call(BandwidthRequest(), BandwidthReply, 120.0)
            bandwidth = float(bw.gbs) if isinstance(bw, BandwidthReply) else None
            if bandwidth:
                # the pool starts its workers at once: read again under the lock, or one
                # worker's write would drop the entries of those measured beside it
                with _FACTS_CACHE_LOCK:
                    stored = _read_facts_cache(cache)
                    stored[key] = {"copy_bandwidth_gbs": bandwidth, "measured": time.time()}
                    write_json_atomic(cache, stored, indent=1)
        return replace(reply.facts, copy_bandwidth_gbs=bandwidth)

    def _facts_cache_path(self) -> Path:
        if self._cache_dir is not None:
            return self._cache_dir / "device_facts.json"
        return Path(platformdirs.user_cache_dir("cuda-llm-lsp")) / "device_facts.json"

    # --- lifecycle ---------------------------------------------------------------------------
    def cancel(self) -> None:
        self._worker.cancel()

    def close(self) -> None:
        self._worker.close()

    def __enter__(self) -> GpuEvaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- runs --------------------------------------------------------------------------------
    def _run(
        self,
        key: str,
        spec: TestSpec,
        case: Case,
        inputs: Inputs,
        where: str,
        *,
        keep: str | None = None,
        against: tuple[str, ...] = (),
        fill: Mapping[str, Generated] | None = None,
        offsets: Mapping[str, int] | None = None,
        finite: bool = False,
    ) -> LaunchOutcome:
        """One launch, checked by the worker on the device: guards, inputs unchanged, outputs
        alone and against the runs kept as `against`; its outputs kept as `keep`. Outputs are
        poisoned with a poison drawn for this run, or pre-filled with `fill`'s values."""
        launch = case_launch(
            spec, case, inputs, key, poison=secrets.randbits(64), fill=fill, offsets=offsets
        )
        checks = Checks(
            _outputs(spec), spec.rtol, spec.atol, keep, against, finite, spec.atol_relative
        )
        hard = self.launch_timeout_s + 60.0 + launch.nbytes * 4 / 2e9
        request = RunRequest(launch, self.launch_timeout_s, checks=checks)
        reply = self._worker.call(request, RunReply, hard)
        if isinstance(reply, Failure):
            return judge.failed_launch(reply, where)
        for phase, seconds in reply.seconds.items():
            self.phases[phase] = self.phases.get(phase, 0.0) + seconds
        return judge.read_launch(spec, case, reply, where, keep)

    def _reproduces(
        self,
        key: str,
        spec: TestSpec,
        case: Case,
        inputs: Inputs,
        where: str,
        spec_dir: Path | None,
    ) -> Finding:
        """The kernel on the captured inputs against the outputs the program's launch left
        (`capture`): kept in the worker as a run of its own, compared there like any run."""
        names = tuple(name for name, _ in judge.output_args(spec))
        outputs = captured_outputs(spec, case, spec_dir, names)
        keep = KeepRequest(_CAPTURED, {n: a.tobytes() for n, a in outputs.items()})
        reply = self._worker.call(keep, Pong, START_TIMEOUT_S + 60.0)
        if isinstance(reply, Failure):
            return Finding(_final(_status(reply)), reply.message)
        run = self._run(key, spec, case, inputs, where, against=(_CAPTURED,))
        problem = judge.self_check(spec, run, where)
        if problem is not OK:
            return problem
        compared = run.checks.compared.get(_CAPTURED, {})
        missing = [n for n in names if n not in compared]
        if missing:
            return Finding(
                "wrong_output", f"{where}: {', '.join(missing)} could not be compared (size)"
            )
        captured = LaunchOutcome(None, "", RunReply(), OK, _CAPTURED)
        return judge.compare_outputs(spec, case, captured, run, where, what="captured")

    def _oracle(
        self, key: str, spec: TestSpec, case: Case, inputs: Inputs, where: str, keep: str
    ) -> LaunchOutcome:
        run = self._run(key, spec, case, inputs, where, keep=keep)
        problem = judge.self_check(spec, run, where)
        if problem is not OK:
            raise BaselineFailed(f"the original kernel fails its own spec: {problem.message}")
        return run

    def _time(
        self,
        keys: Sequence[str],
        spec: TestSpec,
        case: Case,
        inputs: Inputs,
        refs: Mapping[int, Sequence[tuple[Inputs, str]]] | None = None,
        launched: Mapping[int, tuple[TestSpec, Case]] | None = None,
    ) -> TimeReply | Failure:
        """Samples per kernel, each launch on inputs no launch has had (the worker makes them
        from `inputs`' descriptions with keys of its own); `refs[i]`: reference sets for kernel
        i's sampled launches (their inputs, and the kept oracle run on them); `launched[i]`:
        kernel i's own launch (its spec and case), else `spec`'s."""
        kernels = []
        outputs = _outputs(spec)
        for i, key in enumerate(keys):
            own_spec, own_case = (launched or {}).get(i, (spec, case))
            launch = case_launch(own_spec, own_case, inputs, key, poison=secrets.randbits(64))
            fresh = secrets.randbits(24)
            if refs and i in refs:
                sets = tuple(
                    (case_launch(own_spec, own_case, values, None).buffers, kept)
                    for values, kept in refs[i]
                )
                checks = Checks(outputs, spec.rtol, spec.atol, atol_relative=spec.atol_relative)
                kernels.append(TimedKernel(launch, fresh, sets, checks))
            else:
                kernels.append(TimedKernel(launch, fresh))
        plan = self.plan
        nbytes_total = sum(k.launch.nbytes for k in kernels)
        hard = (
            60.0
            + plan.budget_s * len(keys) * 2
            + self.launch_timeout_s * (plan.batch + 1) * 2 * len(keys)
            + nbytes_total * 8 * max(plan.placements, 1) / 2e9  # each copy filled and checked
        )
        request = TimeRequest(tuple(kernels), plan, self.launch_timeout_s)
        start = time.perf_counter()
        try:
            return self._worker.call(request, TimeReply, hard)
        finally:
            self.phases["timing"] = self.phases.get("timing", 0.0) + time.perf_counter() - start

    def _load(self, binary: KernelBinary) -> str | Failure:
        reply = self._worker.load(binary)
        return reply if isinstance(reply, Failure) else reply.key

    # --- evaluate ------------------------------------------------------------------------------
    def evaluate(
        self,
        baseline: KernelBinary,
        candidate: KernelBinary,
        spec: TestSpec,
        *,
        spec_dir: Path | None = None,
        seed: int | None = None,
        candidate_spec: TestSpec | None = None,
        stop: CancelToken | None = None,
    ) -> EvalResult:
        """The candidate against the baseline: every case on both, the oracle, then the timing.

        Long because it is the judge's order of events, each step an early return with its
        status (docs/design.md "Evaluation rules"); the rules themselves live in `judge`."""
        with self._one_call(stop):
            self.phases = {}
            seed = secrets.randbits(63) if seed is None else seed
            facts = self.device_facts()
            spec = _with_captured(spec, spec_dir)
            if candidate_spec is not None:
                candidate_spec = _with_captured(candidate_spec, spec_dir)
            cases = spec.cases()
            if candidate_spec is not None:  # its own launch, checked before anything runs
                static = candidate.resources.shared_bytes if candidate.resources else 0
                refused = bad_launch(candidate_spec, facts, seed, static_smem=static)
                if refused is not None:
                    return EvalResult("bad_launch", f"bad launch: {refused}", seed)
            # the candidate's own launch (same sizes and buffers, its grid/block/smem)
            own_spec = candidate_spec or spec
            own_cases = {c.index: c for c in own_spec.cases()} if candidate_spec else {}
            base_key = self._load(baseline)
            if isinstance(base_key, Failure):
                raise BaselineFailed(f"the original kernel cannot be loaded: {base_key.message}")
            cand_key = self._load(candidate)
            if isinstance(cand_key, Failure):
                return EvalResult(_status(cand_key), cand_key.message, seed)
            outcomes: list[CaseOutcome] = []

            def fail(case: Case, status: Status, message: str) -> EvalResult:
                outcomes.append(CaseOutcome(case.index, dict(case.sizes), status, message))
                return EvalResult(status, message, seed, tuple(outcomes))

            try:
                for case in cases:
                    where = f"case {case.index} ({case.describe()})"
                    inputs = case_sources(spec, case, seed, 0, spec_dir)
                    if is_captured_case(spec, case):
                        found = self._reproduces(base_key, spec, case, inputs, where, spec_dir)
                        if found is not OK:
                            raise BaselineFailed(_not_reproduced(found))
                    oracle = self._oracle(base_key, spec, case, inputs, where, _ORACLE)
                    own = own_cases.get(case.index, case)
                    first = self._run(
                        cand_key, own_spec, own, inputs, where, keep=_FIRST, against=(_ORACLE,)
                    )
                    problem = judge.first_run(spec, case, oracle, first, where)
                    if problem is OK:
                        second = self._run(
                            cand_key, own_spec, own, inputs, where, against=(_ORACLE, _FIRST)
                        )
                        problem = judge.second_run(spec, case, oracle, first, second, where)
                    if problem is OK and case is cases[-1]:
                        # outputs pre-filled with zeros, not poison: every element must be written
                        zeros = {n: Generated(KIND_CODES["zeros"]) for n in _outputs(spec)}
                        run = self._run(
                            cand_key, own_spec, own, inputs, where, fill=zeros, against=(_ORACLE,)
                        )
                        problem = judge.prefilled_run(spec, case, oracle, run, where, "zeros")
                    if problem is not OK:
                        return fail(case, _final(problem.status), problem.message)
                    outcomes.append(CaseOutcome(case.index, dict(case.sizes), "ok"))

                keys = self._hidden(
                    baseline,
                    candidate,
                    spec,
                    own_spec if candidate_spec else None,
                    seed,
                    spec_dir,
                    base_key,
                    cand_key,
                )
                if isinstance(keys, EvalResult):
                    return replace(keys, cases=(*outcomes, *keys.cases))
                base_key, cand_key = keys

                # timed on the last case's shape: every launch on inputs of its own; sampled
                # launches on reference sets the original is run on first (kept off the device)
                timed = cases[-1]
                where = f"case {timed.index} ({timed.describe()})"
                refs = []
                for r in range(_REFERENCE_SETS):
                    values = case_sources(spec, timed, seed, _REFERENCE_DRAW + r, spec_dir)
                    self._oracle(
                        base_key, spec, timed, values, where + ", reference set", f"{_REFERENCE}{r}"
                    )
                    refs.append((values, f"{_REFERENCE}{r}"))
                inputs = case_sources(spec, timed, seed, _TIMING_DRAW, spec_dir)
                reply = self._time(
                    [base_key, cand_key],
                    spec,
                    timed,
                    inputs,
                    {1: refs},
                    {1: (own_spec, own_cases.get(timed.index, timed))},
                )
            finally:
                self._worker.unload(candidate)  # no __device__ state into a later evaluation
            if isinstance(reply, Failure):
                message = f"while timing: {reply.message}"
                failed = CaseOutcome(timed.index, dict(timed.sizes), _status(reply), message)
                return EvalResult(_status(reply), message, seed, (*outcomes[:-1], failed))
            base_t, cand_t = (timing.summarize(s) for s in reply.samples)
            checked = reply.checks[1] if len(reply.checks) > 1 else None
            problem = judge.after_timing(spec, timed, checked, cand_t.samples, where)
            if problem is not OK:
                status = _final(problem.status)
                outcomes[-1] = CaseOutcome(timed.index, dict(timed.sizes), status, problem.message)
                return EvalResult(status, problem.message, seed, tuple(outcomes), base_t, cand_t)

            moved = bytes_moved(spec, timed)
            speedup = base_t.median_ms / cand_t.median_ms if cand_t.median_ms > 0 else None
            bw = moved / (cand_t.median_ms * 1e-3) / 1e9 if cand_t.median_ms > 0 else None
            peak = facts.copy_bandwidth_gbs
            message = (
                f"{len(outcomes)}/{len(cases)} cases pass; candidate {cand_t.median_ms:.4g} "
                f"ms vs original {base_t.median_ms:.4g} ms"
                + (f" ({speedup:.3g}x)" if speedup else "")
            )
            return EvalResult(
                "ok",
                message,
                seed,
                tuple(outcomes),
                base_t,
                cand_t,
                speedup,
                moved,
                bw,
                peak,
                bw / peak if bw and peak else None,
            )

    def _hidden(
        self,
        baseline: KernelBinary,
        candidate: KernelBinary,
        spec: TestSpec,
        own_spec: TestSpec | None,
        seed: int,
        spec_dir: Path | None,
        base_key: str,
        cand_key: str,
    ) -> tuple[str, str] | EvalResult:
        """The hidden generalisation cases (`source.spec.hidden`): the original first (a case it
        fails, or makes non-finite, is dropped), then the candidate with its outputs pre-filled
        with random values, against it. The keys to go on with (a fault of the original's
        restarts the worker), or the candidate's failure."""
        own_hidden = {(h.kind, h.what): h for h in hidden_cases(own_spec, seed)} if own_spec else {}
        for h in hidden_cases(spec, seed):
            case = h.case
            where = h.describe()
            variant = _with_inits(spec, h.init)
            inputs = case_sources(variant, case, seed, 0, spec_dir)
            oracle = self._run(
                base_key, spec, case, inputs, where, keep=_ORACLE, offsets=h.offsets, finite=True
            )
            nonfinite = any(oracle.checks.nonfinite.values())
            if judge.self_check(spec, oracle, where) is not OK or nonfinite:
                if oracle.status in ("fault", "timeout"):  # the worker was restarted
                    base, cand = self._load(baseline), self._load(candidate)
                    if isinstance(base, Failure) or isinstance(cand, Failure):
                        raise BaselineFailed(
                            "the kernels cannot be loaded again after the "
                            "original failed a hidden case"
                        )
                    base_key, cand_key = base, cand
                continue
            own = own_hidden.get((h.kind, h.what))
            cand_spec, cand_case = (own_spec, own.case) if own_spec and own else (spec, case)
            judged = spec
            if h.atol_scale != 1.0:  # large magnitudes: the tolerance scales with the terms
                judged = replace(spec, atol=spec.atol * h.atol_scale)
                cand_spec = replace(cand_spec, atol=cand_spec.atol * h.atol_scale)
            fill = {
                n: Generated(KIND_CODES["uniform"], -1.0, 1.0, key=secrets.randbits(64))
                for n in _outputs(spec)
            }
            run = self._run(
                cand_key,
                cand_spec,
                cand_case,
                inputs,
                where,
                against=(_ORACLE,),
                fill=fill,
                offsets=h.offsets,
            )
            problem = judge.hidden_run(judged, case, oracle, run, where)
            if problem is not OK:
                status = _final(problem.status)
                failed = CaseOutcome(case.index, dict(case.sizes), status, problem.message)
                return EvalResult(status, problem.message, seed, (failed,))
        return base_key, cand_key

    # --- benchmark -----------------------------------------------------------------------------
    def benchmark(
        self,
        kernel: KernelBinary,
        spec: TestSpec,
        *,
        spec_dir: Path | None = None,
        seed: int | None = None,
        stop: CancelToken | None = None,
    ) -> EvalResult:
        """The kernel alone: every case run twice (determinism, unwritten, guards, inputs
        unchanged), then the timed case's latency and bandwidth. Every case is reported."""
        with self._one_call(stop):
            self.phases = {}
            seed = secrets.randbits(63) if seed is None else seed
            facts = self.device_facts()
            spec = _with_captured(spec, spec_dir, outputs_needed=False)  # measured only
            cases = spec.cases()
            key = self._load(kernel)
            if isinstance(key, Failure):
                return EvalResult(_status(key), key.message, seed)
            outcomes: list[CaseOutcome] = []
            for case in cases:
                where = f"case {case.index} ({case.describe()})"
                inputs = case_sources(spec, case, seed, 0, spec_dir)
                first = self._run(key, spec, case, inputs, where, keep=_FIRST)
                problem = judge.self_check(spec, first, where)
                if problem is OK and is_captured_case(spec, case):
                    found = self._reproduces(key, spec, case, inputs, where, spec_dir)
                    if found is not OK:
                        problem = Finding(found.status or "wrong_output", _not_reproduced(found))
                if problem is OK:
                    second = self._run(
                        key, spec, case, inputs, where + ", second run", against=(_FIRST,)
                    )
                    problem = judge.repeat_alone(spec, case, first, second, where)
                status: Status = problem.status or "ok"
                outcomes.append(CaseOutcome(case.index, dict(case.sizes), status, problem.message))
                if status in ("timeout", "fault"):  # the worker was restarted without `key`
                    return EvalResult(status, problem.message, seed, tuple(outcomes))
            failed = [c for c in outcomes if c.status != "ok"]
            if any(c.status == "launch_error" for c in failed) or len(failed) == len(outcomes):
                self._worker.unload(kernel)  # no timing, which drops the kept runs: this does
                first_bad = failed[0]
                return EvalResult(first_bad.status, first_bad.message, seed, tuple(outcomes))
            timed = cases[-1]  # timed on the loop's last inputs (no second draw)
            reply = self._time([key], spec, timed, inputs)
            if isinstance(reply, Failure):
                message = f"while timing: {reply.message}"
                if outcomes[-1].status == "ok":
                    outcomes[-1] = replace(outcomes[-1], status=_status(reply), message=message)
                return EvalResult(_status(reply), message, seed, tuple(outcomes))
            t = timing.summarize(reply.samples[0])
            moved = bytes_moved(spec, timed)
            bw = moved / (t.median_ms * 1e-3) / 1e9 if t.median_ms > 0 else None
            peak = facts.copy_bandwidth_gbs
            status = failed[0].status if failed else "ok"
            message = (
                failed[0].message
                if failed
                else (f"{len(outcomes)}/{len(outcomes)} cases pass; {t.median_ms:.4g} ms")
            )
            return EvalResult(
                status,
                message,
                seed,
                tuple(outcomes),
                baseline=t,
                bytes_moved=moved,
                bandwidth_gbs=bw,
                copy_bandwidth_gbs=peak,
                fraction_of_peak=bw / peak if bw and peak else None,
            )


# the runs the worker keeps (in its host memory) for later runs to be compared with
_ORACLE, _FIRST, _REFERENCE, _CAPTURED = "oracle", "first", "reference ", "captured"
_REFERENCE_SETS = 3  # sampled timed launches: one in each of the first batches
_REFERENCE_DRAW, _TIMING_DRAW = 16, 8  # input draws of the timed case (the spec cases: 0)


def _with_inits(spec: TestSpec, inits: Mapping[str, InitSpec]) -> TestSpec:
    """`spec` with some pointers' `init` replaced (a hidden range case)."""
    if not inits:
        return spec
    args = tuple(replace(a, init=inits.get(a.name, a.init)) for a in spec.args)
    return replace(spec, args=args)


def _outputs(spec: TestSpec) -> tuple[str, ...]:
    return tuple(name for name, _ in judge.output_args(spec))


def _status(failure: Failure) -> Status:
    # a request's failure: launch_error, timeout or fault ("no_gpu" and "error" raise before)
    return cast(Status, failure.status)


def _final(status: Status | None) -> Status:
    assert status is not None  # the judge's problems carry their status
    return status


def _with_captured(
    spec: TestSpec, spec_dir: Path | None, *, outputs_needed: bool = True
) -> TestSpec:
    """The spec with its `"@captured"` arguments' bytes and buffers (an unreadable capture is
    the inputs' problem, as for any captured case)."""
    try:
        return with_captured_arguments(spec, spec_dir, outputs_needed=outputs_needed)
    except CapturedDataError as exc:
        raise InputError(str(exc)) from exc
