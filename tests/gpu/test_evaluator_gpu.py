"""The evaluator on a real GPU: every status of the contract from a planted candidate, the
worker carrying on after each, a correct faster candidate accepted, timing that agrees with an
independent measurement, the >48 KiB shared-memory path, the sanitizer pass and `cuda-llm bench`.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.evaluate import timing
from cuda_llm_lsp.evaluate.candidate import CandidateRejected, build_binary
from cuda_llm_lsp.evaluate.format import summary_line
from cuda_llm_lsp.evaluate.gpu import GpuEvaluator
from cuda_llm_lsp.evaluate.sanitizer import run_sanitizer, sanitizer_path
from cuda_llm_lsp.evaluate.types import EvalResult, EvaluationCancelled, KernelBinary
from cuda_llm_lsp.source.kernels import find_kernels
from cuda_llm_lsp.source.spec import TestSpec, parse_spec
from tests.gpu import kernels as K

pytestmark = pytest.mark.gpu


def spec_of(source: str) -> TestSpec:
    spec, problems = parse_spec(find_kernels(source)[0], source)
    assert spec is not None, problems
    return spec


@pytest.fixture(scope="module")
def evaluator() -> GpuEvaluator:
    ev = GpuEvaluator(launch_timeout_s=3.0)
    yield ev
    ev.close()


@pytest.fixture(scope="module")
def arch(evaluator: GpuEvaluator) -> str:
    return evaluator.device_facts().arch


def build(source: str, name: str, arch: str, candidate: str | None = None):
    return build_binary(source, None, name, Settings(), kernel_source=candidate, arch=arch)


@pytest.fixture(scope="module")
def base(arch: str) -> KernelBinary:
    b = build(K.TWICE, "twice", arch)
    assert isinstance(b, KernelBinary), b
    return b


def judge(evaluator: GpuEvaluator, base: KernelBinary, arch: str, candidate: str) -> EvalResult:
    binary = build(K.TWICE, "twice", arch, candidate)
    if isinstance(binary, CandidateRejected):
        return EvalResult(binary.status, binary.message, 0)
    return evaluator.evaluate(base, binary, spec_of(K.TWICE))


def test_device_facts(evaluator: GpuEvaluator) -> None:
    facts = evaluator.device_facts()
    print(facts)
    assert facts.sm_count > 0 and facts.l2_bytes > 0
    assert facts.copy_bandwidth_gbs and facts.copy_bandwidth_gbs > 100


def test_correct_faster_candidate_is_accepted(
    evaluator: GpuEvaluator, base: KernelBinary, arch: str
) -> None:
    r = judge(evaluator, base, arch, K.FAST)
    print(summary_line("twice", r), r.baseline, r.candidate)
    assert r.status == "ok", r.message
    assert r.speedup is not None and r.speedup > 1.5
    assert r.cases_passed == 4
    assert r.fraction_of_peak is not None and r.fraction_of_peak > 0.05


# outputs poisoned and new inputs before every timed launch: a launch that skips its work leaves
# poison (issue 11: the timed launches no longer reuse the first runs' inputs)
LAST_TIMED = "timed launches (outputs poisoned before each, new input values before each)"
# a sampled timed launch, on a reference set written into the very buffers it was timed on
SAME_BUFFERS = "a run on new input values in the same buffers is wrong"
CAUGHT_BY = {
    "caches_across_launches": SAME_BUFFERS,
    "skips_work_for_the_same_output_pointer": LAST_TIMED,
    "replays_its_result_for_the_same_output_pointer": SAME_BUFFERS,
    "computes_only_on_its_first_launches": LAST_TIMED,
    "launches_a_child_kernel": "device-side kernel launch could not be processed",
    "declares_the_device_launch_api_itself": "Unresolved extern function 'cudaLaunchDevice'",
    "creates_a_device_side_stream": "cudaStreamCreateWithFlags",
}


@pytest.mark.parametrize("name", list(K.PLANTED))
def test_planted_candidate_gets_its_status_and_the_worker_carries_on(
    evaluator: GpuEvaluator, base: KernelBinary, arch: str, name: str
) -> None:
    source, statuses = K.PLANTED[name]
    r = judge(evaluator, base, arch, source)
    print(f"{name}: {r.status}: {r.message}")
    assert r.status in statuses, r.message
    assert r.message
    if name == "hangs":  # the worker's own per-launch watchdog answered, not the parent's
        assert "did not finish within 3 s" in r.message
    if name in CAUGHT_BY:  # which check on the timed buffers caught the cache
        assert CAUGHT_BY[name] in r.message
    after = judge(evaluator, base, arch, K.FAST)
    assert after.status == "ok", after.message


def test_workers_were_restarted_after_faults_and_hangs(evaluator: GpuEvaluator) -> None:
    assert evaluator.restarts >= 3  # hang, illegal address, trap


def test_cancel_stops_a_hanging_kernel_at_once(
    evaluator: GpuEvaluator, base: KernelBinary, arch: str
) -> None:
    slow = GpuEvaluator(launch_timeout_s=60.0)
    try:
        slow.device_facts()
        hang = build(K.TWICE, "twice", arch, K.PLANTED["hangs"][0])
        assert isinstance(hang, KernelBinary)
        timer = threading.Timer(1.0, slow.cancel)
        timer.start()
        started = time.monotonic()
        with pytest.raises(EvaluationCancelled):
            slow.evaluate(base, hang, spec_of(K.TWICE))
        assert time.monotonic() - started < 10
        fast = build(K.TWICE, "twice", arch, K.FAST)
        assert slow.evaluate(base, fast, spec_of(K.TWICE)).status == "ok"
    finally:
        slow.close()


def test_more_than_48k_dynamic_shared_memory(evaluator: GpuEvaluator, arch: str) -> None:
    spec = spec_of(K.STAGED)
    base = build(K.STAGED, "staged", arch)
    assert isinstance(base, KernelBinary), base
    ok = build(K.STAGED, "staged", arch, K.STAGED_OK)
    assert isinstance(ok, KernelBinary), ok
    assert evaluator.evaluate(base, ok, spec).status == "ok"
    hog = build(K.STAGED, "staged", arch, K.TOO_MUCH_SHARED)
    assert isinstance(hog, KernelBinary), hog
    r = evaluator.evaluate(base, hog, spec)
    print(r.message)
    assert r.status == "launch_error", r.message
    assert evaluator.evaluate(base, ok, spec).status == "ok"


def test_timing_agrees_with_cupy_events(evaluator: GpuEvaluator, base: KernelBinary) -> None:
    cp = pytest.importorskip("cupy")
    spec = spec_of(K.TWICE)
    ours = evaluator.benchmark(base, spec)
    assert ours.status == "ok" and ours.baseline is not None
    case = spec.cases()[-1]
    n = case.sizes["n"]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.cubin"
        path.write_bytes(base.cubin)
        fn = cp.RawModule(path=str(path)).get_function(base.entry)
    x = cp.asarray(np.random.default_rng(0).uniform(-1, 1, n).astype(np.float32))
    y = cp.empty(n, dtype=cp.float32)
    l2 = cp.cuda.runtime.getDeviceProperties(0)["l2CacheSize"]
    # flushed by a read, as the evaluator does: a fill leaves dirty lines whose write-back the
    # timed kernel pays (6 % of softmax_rows' time on the H200, docs/design.md "Timing")
    flush = cp.zeros(max(2 * l2, 64 << 20) // 8, dtype=cp.int64)
    start, end = cp.cuda.Event(), cp.cuda.Event()
    samples = []
    for i in range(300):
        flush.sum()
        start.record()
        fn(case.grid, case.block, (x, y, np.int32(n)))
        end.record()
        end.synchronize()
        if i >= 5:
            samples.append(cp.cuda.get_elapsed_time(start, end))
    theirs = timing.median(samples)
    print(f"evaluator {ours.baseline.median_ms:.5f} ms, CuPy events {theirs:.5f} ms")
    assert abs(ours.baseline.median_ms - theirs) / theirs < 0.05


@pytest.mark.skipif(sanitizer_path() is None, reason="compute-sanitizer is not on PATH")
def test_sanitizer_passes_a_clean_kernel_and_flags_races_and_bad_reads(arch: str) -> None:
    spec = spec_of(K.TWICE)
    fast = build(K.TWICE, "twice", arch, K.FAST)
    racy = build(K.TWICE, "twice", arch, K.PLANTED["races_on_shared_memory"][0])
    oob = build(K.TWICE, "twice", arch, K.READS_OUT_OF_BOUNDS)
    assert all(isinstance(b, KernelBinary) for b in (fast, racy, oob))
    clean = run_sanitizer(fast, spec)
    print(clean.message)
    assert clean.status == "ok", clean.sanitizer_report
    race = run_sanitizer(racy, spec, tools=("racecheck",))
    print(race.message, race.sanitizer_report)
    assert race.status == "sanitizer" and race.sanitizer_report
    bad = run_sanitizer(oob, spec, tools=("memcheck",))
    print(bad.message, bad.sanitizer_report)
    assert bad.status == "sanitizer"


def test_bench_cli(tmp_path: Path) -> None:
    source = tmp_path / "twice.cu"
    source.write_text(K.TWICE)
    cmd = [sys.executable, "-m", "cuda_llm_lsp.cli", "bench", str(source)]
    text = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    print(text.stdout, text.stderr)
    assert text.returncode == 0, text.stderr
    assert re.search(
        r"twice: [\d.]+ (ms|µs) ±[\d.]+% · \d+ GB/s \(\d+% of copy peak\) · 4/4 cases pass",
        text.stdout,
    )
    js = subprocess.run([*cmd, "--format", "json"], capture_output=True, text=True, timeout=300)
    assert js.returncode == 0, js.stderr
    report = json.loads(js.stdout)["kernels"][0]
    assert report["status"] == "ok" and report["median_ms"] > 0 and len(report["cases"]) == 4
