"""The evaluation rules, the worker protocol, restarts and cancel, on a CPU test double.

The worker process runs for real (framing, watchdogs, restarts); only `cuda.bindings.driver` is
replaced by `tests/unit/fake_cuda_driver.py`, whose planted kernels mirror the GPU tests'.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from cuda_llm_lsp.evaluate import timing
from cuda_llm_lsp.evaluate.format import summary_line
from cuda_llm_lsp.evaluate.gpu import GpuEvaluator
from cuda_llm_lsp.evaluate.inputs import case_sources
from cuda_llm_lsp.evaluate.launch import bytes_moved, case_launch
from cuda_llm_lsp.evaluate.protocol import Checks, LoadReply, RunReply, RunRequest
from cuda_llm_lsp.evaluate.types import (
    BaselineFailed,
    EvaluationCancelled,
    KernelBinary,
    NoGpuError,
)
from cuda_llm_lsp.evaluate.worker import DRIVER_ENV, CudaError
from cuda_llm_lsp.source.kernels import find_kernels
from cuda_llm_lsp.source.spec import TestSpec, parse_spec
from tests.unit.fake_cuda_driver import cubin

SOURCE = """
/* @cuda-llm
sizes.n = [1, 100, 1000, 5000]
grid = "cdiv(n, 256)"
block = 256
args.x = "float32[n]"
args.y = "out float32[n]"
args.n = "n"
*/
extern "C" __global__ void twice(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
"""


@pytest.fixture(scope="module")
def spec() -> TestSpec:
    kernel = find_kernels(SOURCE)[0]
    parsed, problems = parse_spec(kernel, SOURCE)
    assert parsed is not None, problems
    return parsed


def fake_gpu(tmp_path_factory: pytest.TempPathFactory, plan: timing.Plan) -> Iterator[GpuEvaluator]:
    mp = pytest.MonkeyPatch()
    mp.setenv(DRIVER_ENV, "tests.unit.fake_cuda_driver")
    root = str(Path(__file__).resolve().parents[2])  # the worker imports the double from here
    mp.setenv("PYTHONPATH", os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    ev = GpuEvaluator(launch_timeout_s=0.5, plan=plan, cache_dir=tmp_path_factory.mktemp("c"))
    yield ev
    ev.close()
    mp.undo()


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GpuEvaluator]:
    yield from fake_gpu(tmp_path_factory, timing.Plan(budget_s=0.3, batch=5))


def binary(name: str) -> KernelBinary:
    return KernelBinary(source_name="twice", entry=name, cubin=cubin(name), arch="sm_90")


BASE = binary("twice")


def test_device_facts_are_queried_and_copy_bandwidth_measured(evaluator: GpuEvaluator) -> None:
    facts = evaluator.device_facts()
    assert facts.arch == "sm_90" and facts.sm_count == 132
    assert facts.copy_bandwidth_gbs == pytest.approx(3000, rel=0.01)
    assert "Fake H100" in facts.name


def test_a_stable_kernel_is_timed_to_the_minimum_samples(
    tmp_path_factory: pytest.TempPathFactory, spec: TestSpec
) -> None:
    """Timing stops once the median is stable, never before `MIN_SAMPLES`. The budget is only a
    ceiling for unstable kernels: a generous one here, so a loaded machine (which hit 0.3 s
    after 10 samples) cannot cut the run short; the fake kernels are stable, so it stops at
    the minimum all the same."""
    for ev in fake_gpu(tmp_path_factory, timing.Plan(budget_s=60.0, batch=5)):
        r = ev.evaluate(BASE, binary("fast"), spec, seed=7)
        assert r.status == "ok" and r.candidate is not None, r.message
        assert timing.MIN_SAMPLES <= r.candidate.samples < timing.MAX_SAMPLES


def test_correct_faster_candidate_is_ok_with_speedup(
    evaluator: GpuEvaluator, spec: TestSpec
) -> None:
    r = evaluator.evaluate(BASE, binary("fast"), spec, seed=7)
    assert r.status == "ok", r.message
    assert r.seed == 7 and r.cases_passed == 4
    assert r.baseline and r.candidate
    assert r.speedup == pytest.approx(4.0, rel=0.01)
    assert r.bytes_moved == bytes_moved(spec, spec.cases()[-1]) == 2 * 4 * 5000
    assert r.fraction_of_peak is not None
    line = summary_line("twice", r)
    assert re.match(r"twice: \d+\.\d µs ±\d\.\d% · \d+ GB/s \(\d+% of copy peak\)", line), line
    assert "4.00x vs original" in line
    assert line.endswith("4/4 cases pass")


def test_seed_is_fresh_per_call_and_recorded(evaluator: GpuEvaluator, spec: TestSpec) -> None:
    a = evaluator.evaluate(BASE, binary("fast"), spec)
    b = evaluator.evaluate(BASE, binary("fast"), spec)
    assert a.seed != b.seed


@pytest.mark.parametrize(
    ("kernel", "status", "needle"),
    [
        ("nothing", "unwritten_output", "case 0 (n=1): y[0] was never written"),
        ("skip_last", "unwritten_output", "y[0] was never written (the last element)"),
        ("past_end", "out_of_bounds", "y[1] past the end (y has 1 elements)"),
        ("racy", "nondeterministic", "y[7]"),
        ("caching", "stale_after_timing", "a run on new input values in the same buffers"),
        ("pointer_cache", "stale_after_timing", "timed launches (outputs poisoned before each"),
        ("pointer_replay", "stale_after_timing", "a run on new input values in the same buffers"),
        ("counter_cache", "stale_after_timing", "y[0] was never written: 5000 of 5000"),
        ("past_end_late", "out_of_bounds", "timed launches (outputs poisoned before each"),
        # the guards of every copy the timed launches rotate over are checked, not the first's
        ("past_end_one_place", "out_of_bounds", "timed launches (outputs poisoned before each"),
        ("modifies_input", "input_modified", "modified its input x: x[0] was"),
        ("modifies_input_past_end", "out_of_bounds", "y[1] past the end"),
        ("fault_when_timed", "fault", "while timing: cuEventRecord: CUDA error 700"),
        ("half", "wrong_output", "elements differ"),
        ("illegal", "fault", "illegal memory access"),
        ("trap", "fault", "unspecified launch failure"),
        ("hang", "timeout", "did not finish within 0.5 s"),
        ("launch_bounds", "launch_error", "too many resources"),
    ],
)
def test_planted_candidate_gets_its_status_and_the_worker_carries_on(
    evaluator: GpuEvaluator, spec: TestSpec, kernel: str, status: str, needle: str
) -> None:
    r = evaluator.evaluate(BASE, binary(kernel), spec)
    assert r.status == status, r.message
    assert needle in r.message
    assert r.speedup is None
    after = evaluator.evaluate(BASE, binary("fast"), spec)
    assert after.status == "ok", after.message


def test_a_failure_while_timing_marks_the_timed_case(
    evaluator: GpuEvaluator, spec: TestSpec
) -> None:
    r = evaluator.evaluate(BASE, binary("fault_when_timed"), spec)
    assert r.status == "fault", r.message
    assert [c.status for c in r.cases] == ["ok", "ok", "ok", "fault"]
    assert "cuEventRecord" in r.cases[-1].message
    assert evaluator.evaluate(BASE, binary("fast"), spec).status == "ok"  # restarted


def test_faults_restart_the_worker(evaluator: GpuEvaluator, spec: TestSpec) -> None:
    before = evaluator.restarts
    assert evaluator.evaluate(BASE, binary("illegal"), spec).status == "fault"
    assert evaluator.evaluate(BASE, binary("fast"), spec).status == "ok"
    assert evaluator.restarts == before + 1


def test_launch_errors_keep_the_worker(evaluator: GpuEvaluator, spec: TestSpec) -> None:
    evaluator.evaluate(BASE, binary("fast"), spec)
    before = evaluator.restarts
    assert evaluator.evaluate(BASE, binary("launch_bounds"), spec).status == "launch_error"
    assert evaluator.evaluate(BASE, binary("fast"), spec).status == "ok"
    assert evaluator.restarts == before


def test_unloadable_cubin_is_a_launch_error(evaluator: GpuEvaluator, spec: TestSpec) -> None:
    bad = KernelBinary("twice", "twice", b"not a cubin", "sm_90")
    r = evaluator.evaluate(BASE, bad, spec)
    assert r.status == "launch_error" and "cannot load" in r.message


def test_broken_oracle_raises_instead_of_blaming_the_candidate(
    evaluator: GpuEvaluator, spec: TestSpec
) -> None:
    with pytest.raises(BaselineFailed, match="original kernel"):
        evaluator.evaluate(binary("nothing"), binary("fast"), spec)


def test_benchmark_reports_every_case_and_timing(evaluator: GpuEvaluator, spec: TestSpec) -> None:
    r = evaluator.benchmark(BASE, spec, seed=3)
    assert r.status == "ok", r.message
    assert [c.status for c in r.cases] == ["ok"] * 4
    assert r.baseline and r.baseline.median_ms == pytest.approx(0.04, rel=0.01)
    assert r.bandwidth_gbs == pytest.approx(40000 / 0.04e-3 / 1e9, rel=0.01)
    bad = evaluator.benchmark(binary("skip_last"), spec)
    assert bad.status == "unwritten_output"
    assert [c.status for c in bad.cases] == ["unwritten_output"] * 4


@pytest.mark.parametrize(
    ("kernel", "status", "needle"),
    [
        ("illegal", "fault", "illegal memory access"),
        ("trap", "fault", "unspecified launch failure"),
        ("hang", "timeout", "did not finish within 0.5 s"),
    ],
)
def test_benchmark_stops_at_a_fault_or_hang_and_the_worker_carries_on(
    evaluator: GpuEvaluator, spec: TestSpec, kernel: str, status: str, needle: str
) -> None:
    r = evaluator.benchmark(binary(kernel), spec)
    assert r.status == status and needle in r.message, r.message
    assert [c.status for c in r.cases] == [status]  # the restarted worker has no kernel loaded
    assert evaluator.benchmark(BASE, spec).status == "ok"


def test_benchmark_calls_a_second_run_that_differs_nondeterministic(
    evaluator: GpuEvaluator, spec: TestSpec
) -> None:
    r = evaluator.benchmark(binary("racy"), spec)
    assert r.status == "nondeterministic", r.message
    assert "y[7]" in r.message


def kept_runs(evaluator: GpuEvaluator, spec: TestSpec) -> list[str]:
    """The runs the evaluator's worker still keeps in its host memory (of those an evaluation
    keeps): a run compared against one it does not keep is an error."""
    loaded = evaluator._worker.load(BASE)
    assert isinstance(loaded, LoadReply), loaded
    case = spec.cases()[0]
    launch = case_launch(spec, case, case_sources(spec, case, 1), loaded.key)
    kept = []
    for name in ("oracle", "first", "reference 0", "reference 1", "reference 2"):
        request = RunRequest(launch, 5.0, checks=Checks(("y",), against=(name,)))
        try:
            evaluator._worker.call(request, RunReply, 30)
        except RuntimeError as exc:
            assert f"no run kept as {name!r}" in str(exc)
            continue
        kept.append(name)
    return kept


@pytest.mark.parametrize(
    ("call", "status"),
    [
        ("evaluate fast", "ok"),
        ("evaluate skip_last", "unwritten_output"),  # fails a case: never timed
        ("benchmark twice", "ok"),
        ("benchmark skip_last", "unwritten_output"),  # every case fails: never timed
    ],
)
def test_no_kept_run_outlives_its_evaluation(
    evaluator: GpuEvaluator, spec: TestSpec, call: str, status: str
) -> None:
    """The worker keeps the oracle's, the first run's and the reference sets' outputs in host
    memory for one evaluation only (not several copies of the timed case's outputs per idle
    worker until the next one)."""
    what, name = call.split()
    if what == "evaluate":
        r = evaluator.evaluate(BASE, binary(name), spec, seed=4)
    else:
        r = evaluator.benchmark(binary(name), spec, seed=4)
    assert r.status == status, r.message
    assert kept_runs(evaluator, spec) == []


def test_count_zero_input_buffers_are_fine(evaluator: GpuEvaluator) -> None:
    source = SOURCE.replace("[1, 100, 1000, 5000]", "[0, 100]")
    spec = _spec_of(source.replace('"cdiv(n, 256)"', "1"))  # a grid must not be 0
    r = evaluator.evaluate(BASE, binary("fast"), spec)
    assert r.status == "ok", r.message
    b = evaluator.benchmark(BASE, spec)
    assert b.status == "ok", b.message
    assert [c.sizes for c in b.cases] == [{"n": 0}, {"n": 100}]


def test_cancel_kills_the_call_in_flight(evaluator: GpuEvaluator, spec: TestSpec) -> None:
    slow = GpuEvaluator(launch_timeout_s=30.0, plan=evaluator.plan, cache_dir=evaluator._cache_dir)
    try:
        slow.device_facts()
        timer = threading.Timer(0.5, slow.cancel)
        timer.start()
        started = time.monotonic()
        with pytest.raises(EvaluationCancelled):
            slow.evaluate(BASE, binary("hang"), spec)
        assert time.monotonic() - started < 5
        assert slow.evaluate(BASE, binary("fast"), spec).status == "ok"  # restarted
    finally:
        slow.close()


def test_no_gpu_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(DRIVER_ENV, "no_such_driver_module_for_test")
    ev = GpuEvaluator(cache_dir=tmp_path)
    with pytest.raises(NoGpuError, match="no CUDA driver"):
        ev.device_facts()
    with pytest.raises(NoGpuError):  # remembered, no second process
        ev.benchmark(BASE, None)  # type: ignore[arg-type]


def _spec_of(source: str) -> TestSpec:
    parsed, problems = parse_spec(find_kernels(source)[0], source)
    assert parsed is not None, problems
    return parsed


def test_float64_outputs_are_repoisoned_by_copy_and_a_pointer_cache_is_caught(
    evaluator: GpuEvaluator,
) -> None:
    """float64's poison has no memset: the worker copies it from a poisoned buffer."""
    spec = _spec_of(SOURCE.replace("float32", "float64").replace("float*", "double*"))
    base = KernelBinary("twice", "twice64", cubin("twice64"), "sm_90")
    ok = evaluator.evaluate(base, base, spec)
    assert ok.status == "ok", ok.message
    cached = KernelBinary("twice", "pointer_cache64", cubin("pointer_cache64"), "sm_90")
    r = evaluator.evaluate(base, cached, spec)
    assert r.status == "stale_after_timing", r.message
    assert "y[0] was never written" in r.message


def test_inout_buffers_are_restored_before_every_timed_launch_and_checked(
    evaluator: GpuEvaluator,
) -> None:
    """An inout buffer gets new initial values before every timed launch; sampled launches are
    compared like outputs, and the guards after all of them (issue 11: it was reset only for a
    recheck, and never compared after the timing)."""
    spec = _spec_of(SOURCE.replace('"out float32[n]"', '"inout float32[n]"'))
    base = KernelBinary("twice", "accumulate", cubin("accumulate"), "sm_90")
    fast = KernelBinary("twice", "accumulate_fast", cubin("accumulate_fast"), "sm_90")
    r = evaluator.evaluate(base, fast, spec)
    assert r.status == "ok", r.message
    assert r.speedup == pytest.approx(4.0, rel=0.01)
    # the guard bands are checked after all the timed launches
    late = KernelBinary("twice", "accumulate_past_end_late", cubin("accumulate_past_end_late"), "")
    r = evaluator.evaluate(base, late, spec)
    assert r.status == "out_of_bounds", r.message
    assert "timed launches (outputs poisoned before each" in r.message
    assert "one wrote outside its buffers" in r.message and "past the end" in r.message


class _Recorder:
    """A driver double that records the order of what the timing loop enqueues."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.t = 0.0

    def cuEventCreate(self, flags: int) -> tuple[int, list[float]]:
        return (0, [0.0])

    def cuEventRecord(self, ev: list[float], stream: object) -> tuple[int]:
        self.log.append("event")
        ev[0] = self.t
        return (0,)

    def cuEventElapsedTime(self, a: list[float], b: list[float]) -> tuple[int, float]:
        return (0, b[0] - a[0])

    def cuEventDestroy(self, ev: object) -> tuple[int]:
        return (0,)


def _check(result: tuple[object, ...], where: str) -> object:
    if int(result[0]) != 0:  # type: ignore[call-overload]
        raise CudaError(int(result[0]), where)  # type: ignore[call-overload]
    return result[1] if len(result) > 1 else None


def test_timing_errors_raise_the_workers_cuda_error() -> None:
    """A failing event call must reach the worker as its CudaError (-> fault, restart)."""

    class Failing(_Recorder):
        def cuEventRecord(self, ev: list[float], stream: object) -> tuple[int]:
            return (700,)

    plan = timing.Plan(min_samples=3, max_samples=4, budget_s=0.05, warmup=1, warmup_s=0, batch=2)
    with pytest.raises(CudaError, match="cuEventRecord: CUDA error 700"):
        timing.time_interleaved(
            Failing(), "s", [lambda: None], lambda: None, lambda: None, plan, check=_check
        )


def test_timing_loop_order_keeps_poison_and_flush_outside_the_timed_region() -> None:
    rec = _Recorder()

    def launch(name: str) -> None:
        rec.log.append(name)
        rec.t += 1.0

    plan = timing.Plan(min_samples=3, max_samples=4, budget_s=0.05, warmup=1, warmup_s=0, batch=2)
    samples = timing.time_interleaved(
        rec,
        "stream",
        [lambda: launch("A"), lambda: launch("B")],
        lambda: rec.log.append("flush"),
        lambda: rec.log.append("sync"),
        plan,
        check=_check,
        prepare=[lambda _t: rec.log.append("poisonA"), lambda _t: rec.log.append("poisonB")],
    )
    assert [len(s) for s in samples] == [4, 4] and set(samples[0]) == {1.0}
    timed = rec.log[rec.log.index("event") - 2 :]
    for name in ("A", "B"):
        at = [i for i, x in enumerate(timed) if x == name]
        assert len(at) == 4
        for i in at:  # poison, flush, start event, the launch alone, end event
            assert timed[i - 3 : i + 2] == [f"poison{name}", "flush", "event", name, "event"]
    warm = rec.log[: rec.log.index("event") - 2]
    assert warm[:3] == ["poisonA", "flush", "A"]


def test_a_candidate_runs_with_its_own_launch_and_the_oracle_with_the_original(
    evaluator: GpuEvaluator, spec: TestSpec
) -> None:
    """`candidate_spec` (a tuned configuration, a launch block): same sizes and buffers, its own
    grid; with the original's launch the same kernel leaves half of y unwritten."""
    own = replace(spec, grid=("cdiv(n, 128)",))
    r = evaluator.evaluate(BASE, binary("covers_launch"), spec, seed=3)
    assert r.status == "unwritten_output", r.message
    r = evaluator.evaluate(BASE, binary("covers_launch"), spec, seed=3, candidate_spec=own)
    assert r.status == "ok", r.message
    assert r.cases_passed == 4 and r.speedup == pytest.approx(4.0, rel=0.01)
