"""Several GPUs without Ray: a `GpuPool` of local workers on 2 fake devices (the CUDA driver
double, `CUDA_LLM_FAKE_DEVICES=2`), the FSR round judged across them, the suite spread over them.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from cuda_llm_lsp.cancel import relayed
from cuda_llm_lsp.config import settings_from_mapping
from cuda_llm_lsp.evaluate import timing
from cuda_llm_lsp.evaluate.devices import (
    LOST_REST_MAX_S,
    LOST_REST_S,
    Device,
    DeviceLost,
    GpuId,
    GpuPool,
    count_local_gpus,
    local_devices,
    parse_gpus,
)
from cuda_llm_lsp.evaluate.gpu import GpuEvaluator
from cuda_llm_lsp.evaluate.protocol import BandwidthReply, FactsReply, FactsRequest
from cuda_llm_lsp.evaluate.ray_cluster import ray_pool
from cuda_llm_lsp.evaluate.recorded import RecordedEvaluator
from cuda_llm_lsp.evaluate.types import DeviceFacts, EvalResult, EvaluationCancelled
from cuda_llm_lsp.fsr.types import CandidateStage, ProgressEvent
from cuda_llm_lsp.suite.runner import SuiteOptions, SuiteRunner, discover
from tests.support.fake_gpus import PLANTED, driver_env, optimize_round, statuses, winner

ROOT = Path(__file__).resolve().parents[2]
PLAN = timing.Plan(budget_s=0.3, batch=5)


@pytest.fixture(scope="module")
def two_gpus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    mp = pytest.MonkeyPatch()
    for name, value in driver_env(2).items():
        mp.setenv(name, value)
    mp.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    yield tmp_path_factory.mktemp("facts")
    mp.undo()


def test_gpus_setting_is_all_or_numbers() -> None:
    assert parse_gpus("all") is None and parse_gpus(None) is None
    assert parse_gpus("0,2") == (0, 2) and parse_gpus(" 1 3 1") == (1, 3)
    for bad in ("", "gpu0", "0,-1", "1.5", "999"):
        if bad == "":
            continue  # empty: all
        with pytest.raises(ValueError, match="gpus"):
            parse_gpus(bad)
    settings, problems = settings_from_mapping({"cudaLlm": {"gpus": [0, 1], "cluster": "auto"}})
    assert settings.gpus == "0,1" and settings.cluster == "auto" and problems == []
    settings, problems = settings_from_mapping({"gpus": "first"})
    assert settings.gpus == "all" and "cudaLlm.gpus" in problems[0]


def test_the_driver_double_pretends_two_gpus(two_gpus: Path) -> None:
    assert count_local_gpus() == 2


def test_an_optimize_round_over_two_gpus_matches_one_gpu(two_gpus: Path) -> None:
    """Every candidate gets the status one GPU gives it, the same winner, a same-GPU speedup;
    the round's candidates went to both GPUs, and progress said which one judged what."""
    with GpuEvaluator(0, plan=PLAN, cache_dir=two_gpus) as one:
        single = asyncio.run(optimize_round(one))
    assert statuses(single) == PLANTED and winner(single) == "fast", single.message

    timed: list[Timed] = []

    def devices() -> list[Device]:
        made = local_devices("all", plan=PLAN, cache_dir=two_gpus)
        timed.extend(Timed(d.evaluator) for d in made)
        return [Device(d.gpu, t) for d, t in zip(made, timed, strict=True)]  # type: ignore[misc]

    pool = GpuPool(devices)
    events: list[ProgressEvent] = []
    try:
        started = time.monotonic()
        several = asyncio.run(optimize_round(pool, events))
        took = time.monotonic() - started
    finally:
        pool.close()
    assert statuses(several) == statuses(single)
    assert winner(several) == winner(single) and several.accepted
    assert several.speedup == pytest.approx(4.0, rel=0.05)  # baseline and candidate: one GPU
    used = {c.gpu.split(" ")[0] for c in several.candidates if c.gpu}
    assert used == {"gpu0", "gpu1"}, [c.gpu for c in several.candidates]
    said = [e for e in events if isinstance(e, CandidateStage) and e.gpu]
    assert {e.gpu for e in said} == {"gpu0", "gpu1"} and len(said) >= len(PLANTED)
    assert several.best_result is not None and several.best_result.gpu.startswith("gpu")
    spans = sorted(span for d in timed for span in d.spans)  # type: ignore[attr-defined]
    ends = list(itertools.accumulate((end for _, end in spans), max))
    together = sum(1 for i in range(1, len(spans)) if spans[i][0] < ends[i - 1])
    assert together >= 1, spans  # candidates judged while another one was (one GPU: none)
    print(f"2-GPU round: {took:.1f} s")


class Timed:
    """A device's evaluator, the wall-clock span of each `evaluate` noted."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.spans: list[tuple[float, float]] = []

    def evaluate(self, *args: Any, **kwargs: Any) -> EvalResult:
        start = time.monotonic()
        try:
            result: EvalResult = self.inner.evaluate(*args, **kwargs)
            return result
        finally:
            self.spans.append((start, time.monotonic()))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_evaluate_many_keeps_the_order_and_labels_each_result(two_gpus: Path) -> None:
    from tests.support.fake_gpus import DoubleToolchain

    toolchain = DoubleToolchain()
    spec = toolchain.spec
    assert spec is not None
    base = _binary("twice")
    names = ["fast", "nothing", "past_end", "fast"]
    with GpuPool(lambda: local_devices("0,1", plan=PLAN, cache_dir=two_gpus)) as pool:
        results = pool.evaluate_many(base, [_binary(n) for n in names], spec, seeds=[1, 2, 3, 4])
        assert pool.width == 2
    assert [r.status for r in results] == ["ok", "unwritten_output", "out_of_bounds", "ok"]
    assert all(r.gpu.startswith(("gpu0 (Fake", "gpu1 (Fake")) for r in results)
    assert results[0].speedup == pytest.approx(4.0, rel=0.05)


def _binary(name: str) -> Any:
    from cuda_llm_lsp.evaluate.types import KernelBinary
    from tests.unit.fake_cuda_driver import cubin

    return KernelBinary(source_name="twice", entry=name, cubin=cubin(name), arch="sm_90")


# --- the pool's rules, with stand-in devices ---------------------------------------------------
FACTS = DeviceFacts(
    name="Stand-in",
    compute_capability=(9, 0),
    arch="sm_90",
    sm_count=1,
    max_threads_per_block=1024,
    shared_per_block=0,
    shared_per_block_optin=0,
    shared_per_sm=0,
    registers_per_block=0,
    registers_per_sm=0,
    l2_bytes=0,
    memory_bytes=0,
    clock_khz=0,
    memory_clock_khz=0,
    memory_bus_width=0,
)


class StandIn:
    """An evaluator that answers "ok" after `delay_s`, or loses its host `lose` times first."""

    def __init__(self, arch: str = "sm_90", lose: int = 0, delay_s: float = 0.0) -> None:
        self.arch, self.lose, self.delay_s = arch, lose, delay_s
        self.calls = 0
        self.cancelled = threading.Event()

    def device_facts(self) -> DeviceFacts:
        from dataclasses import replace

        return replace(FACTS, arch=self.arch)

    def evaluate(self, *args: Any, **kwargs: Any) -> EvalResult:
        self.calls += 1
        if self.lose > 0:
            self.lose -= 1
            raise DeviceLost("the actor died")
        with relayed(kwargs.get("stop"), self.cancel):  # this call's own token
            if self.cancelled.wait(self.delay_s):
                raise EvaluationCancelled("cancelled")
        return EvalResult("ok", "fine", seed=kwargs.get("seed") or 0, speedup=2.0)

    benchmark = evaluate

    def cancel(self) -> None:
        self.cancelled.set()

    def close(self) -> None:
        pass


def test_a_lost_device_has_its_call_run_on_another() -> None:
    lost, steady = StandIn(lose=1), StandIn()
    pool = GpuPool(lambda: [Device(GpuId(0), lost), Device(GpuId(1), steady)])
    heard: list[str] = []
    result = pool.evaluate(None, None, None, seed=5, on_device=lambda g: heard.append(g.label))  # type: ignore[arg-type]
    assert result.status == "ok" and result.seed == 5
    # given gpu0 first (free list order), lost there, re-run on gpu1
    assert heard == ["gpu0", "gpu1"] and lost.calls == 1 and steady.calls == 1
    assert result.gpu == "gpu1 (Stand-in)"
    assert pool.evaluate(None, None, None).status == "ok"  # type: ignore[arg-type]


def test_the_pools_facts_outlive_a_lost_first_gpu() -> None:
    """The FSR baseline reads the facts: a first worker lost mid-run must not fail it."""
    first = StandIn()
    pool = GpuPool(lambda: [Device(GpuId(0), first), Device(GpuId(1), StandIn())])
    assert pool.device_facts().arch == "sm_90"

    def lost() -> DeviceFacts:
        raise DeviceLost("the actor died")

    first.device_facts = lost  # type: ignore[method-assign]
    assert pool.device_facts().arch == "sm_90"


def test_gpus_measured_at_once_all_keep_their_bandwidth_in_the_facts_cache(
    tmp_path: Path,
) -> None:
    """The pool starts its workers in parallel, each measuring its copy bandwidth and writing
    device_facts.json: no worker's write may drop the entries of the others."""

    class Measures:  # a worker that answers the facts, and the bandwidth after a while
        def __init__(self) -> None:
            self.cancelled = threading.Event()

        def call(self, request: object, answer: type, timeout_s: float) -> object:
            if isinstance(request, FactsRequest):
                return FactsReply(FACTS, 12080)
            time.sleep(0.2)  # every worker has read the cache before any writes it
            return BandwidthReply(3000.0, 1 << 20)

        def close(self) -> None:
            pass

    def made() -> list[Device]:
        devices = []
        for i in range(4):
            evaluator = GpuEvaluator(i, cache_dir=tmp_path)
            evaluator._worker = Measures()  # type: ignore[assignment]
            devices.append(Device(GpuId(i), evaluator))
        return devices

    assert GpuPool(made).width == 4
    stored = json.loads((tmp_path / "device_facts.json").read_text())
    assert sorted(stored) == [f"Stand-in|driver 12080|device {i}" for i in range(4)]


def test_a_gpu_of_another_arch_is_left_out_with_the_reason() -> None:
    pool = GpuPool(lambda: [Device(GpuId(0), StandIn()), Device(GpuId(1), StandIn("sm_80"))])
    assert pool.width == 1 and "gpu1" in pool.left_out[0] and "sm_80" in pool.left_out[0]


def test_calls_run_in_parallel_one_per_gpu_and_cancel_stops_the_waiting_ones() -> None:
    a, b = StandIn(delay_s=0.5), StandIn(delay_s=0.5)
    pool = GpuPool(lambda: [Device(GpuId(0), a), Device(GpuId(1), b)])
    started = time.monotonic()
    results = pool.evaluate_many(None, [None] * 4, None)  # type: ignore[arg-type,list-item]
    took = time.monotonic() - started
    assert [r.status for r in results] == ["ok"] * 4 and a.calls == b.calls == 2
    assert 0.9 <= took < 1.8  # two at a time: 2 x 0.5 s, not 4 x 0.5 s
    slow = GpuPool(lambda: [Device(GpuId(0), StandIn(delay_s=30))])
    errors: list[BaseException] = []

    def call() -> None:
        try:
            slow.evaluate(None, None, None)  # type: ignore[arg-type]
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=call) for _ in range(2)]  # one runs, one waits
    for t in threads:
        t.start()
    time.sleep(0.3)
    slow.cancel()
    for t in threads:
        t.join(5)
    assert len(errors) == 2 and all(isinstance(e, EvaluationCancelled) for e in errors)


def test_cancel_reaches_only_the_devices_in_use() -> None:
    """A budget-end cancel must not kill idle workers (each would pay a restart: a new process,
    CUDA context and modules, on its next call)."""
    busy, idle = StandIn(delay_s=30), StandIn()
    pool = GpuPool(lambda: [Device(GpuId(0), busy), Device(GpuId(1), idle)])
    errors: list[BaseException] = []

    def call() -> None:
        try:
            pool.evaluate(None, None, None)  # type: ignore[arg-type]
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=call)
    thread.start()
    time.sleep(0.3)
    pool.cancel()
    thread.join(5)
    assert len(errors) == 1 and isinstance(errors[0], EvaluationCancelled)
    assert busy.cancelled.is_set() and not idle.cancelled.is_set()


def test_a_device_lost_again_and_again_rests_longer_each_time() -> None:
    """A GPU gone for good is not tried (holding its call up while it fails) every
    LOST_REST_S: its rest doubles with each loss in a row, up to a cap, and is reset once it
    answers again."""
    gone = StandIn(lose=1000)
    first = Device(GpuId(0), gone)
    pool = GpuPool(lambda: [first, Device(GpuId(1), StandIn())])

    def rest_after_a_call() -> float:
        assert pool.evaluate(None, None, None).status == "ok"  # type: ignore[arg-type]
        rest = pool._resting[id(first)] - time.monotonic()
        pool._resting[id(first)] = 0.0  # the rest is over: the next call tries it first
        return rest / LOST_REST_S

    rests = [rest_after_a_call() for _ in range(7)]
    assert gone.calls == 7
    cap = LOST_REST_MAX_S / LOST_REST_S
    assert [round(r, 1) for r in rests] == [min(2.0**n, cap) for n in range(7)]
    gone.lose = 0
    assert pool.evaluate(None, None, None).gpu == "gpu0 (Stand-in)"  # type: ignore[arg-type]
    assert pool.evaluate(None, None, None).gpu == "gpu1 (Stand-in)"  # type: ignore[arg-type]
    gone.lose = 1  # (the free list's order: gpu0 is tried first again)
    assert round(rest_after_a_call(), 1) == 1.0  # back: the count starts again


def test_an_editor_jobs_cancel_stops_only_its_own_calls_on_the_shared_pool() -> None:
    """The language server's `JobPool`: two jobs judge on one shared pool at once; one job's
    cancel stops its call in flight and its calls waiting for a GPU, the other job's goes on."""
    from cuda_llm_lsp.engine.job_view import GpuGate, JobPool, job_view

    a, b = StandIn(delay_s=1.0), StandIn(delay_s=1.0)
    shared = GpuPool(lambda: [Device(GpuId(0), a), Device(GpuId(1), b)])
    first, second = job_view(shared, GpuGate()), job_view(shared, GpuGate())
    assert isinstance(first, JobPool) and isinstance(second, GpuPool)  # the FSR lane's test
    outcomes: dict[str, Any] = {}

    def call(name: str, job: Any) -> None:
        try:
            outcomes[name] = job.evaluate(None, None, None).status
        except EvaluationCancelled:
            outcomes[name] = "cancelled"

    threads = [
        threading.Thread(target=call, args=("first", first)),
        threading.Thread(target=call, args=("second", second)),
        threading.Thread(target=call, args=("first, waiting", first)),
    ]
    for t in threads:
        t.start()
        time.sleep(0.1)
    first.token.cancel()
    for t in threads:
        t.join(5)
    assert outcomes == {"first": "cancelled", "second": "ok", "first, waiting": "cancelled"}
    assert a.calls == b.calls == 1  # the waiting call never reached a GPU
    with pytest.raises(EvaluationCancelled):
        first.evaluate(None, None, None)  # type: ignore[arg-type]
    a.cancelled.clear()  # as a worker clears a cancel when its next call begins
    assert second.evaluate(None, None, None).status == "ok"  # type: ignore[arg-type]


def test_ray_actors_that_do_not_start_share_one_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """`ray_devices` waits for every actor at once, up to CONNECT_TIMEOUT_S in all (not that
    long for each in turn); the late ones are killed and left out."""
    from cuda_llm_lsp.evaluate import ray_cluster

    class Ref:
        def __init__(self, index: int) -> None:
            self.index = index

    class Actor:
        def __init__(self, index: int) -> None:
            self.index = index
            self.identity = self  # actor.identity.remote()

        def remote(self) -> Ref:
            return Ref(self.index)

    class FakeRay:
        def __init__(self) -> None:
            self.made = 0
            self.waits: list[tuple[int, int, float]] = []
            self.killed: list[int] = []

        def cluster_resources(self) -> dict[str, float]:
            return {"GPU": 3}

        def remote(self, **options: Any) -> Any:  # ray.remote(...)(GpuActor).remote(...)
            return lambda cls: SimpleNamespace(remote=self.make)

        def make(self, *args: Any) -> Actor:
            self.made += 1
            return Actor(self.made - 1)

        def wait(self, refs: list[Ref], *, num_returns: int, timeout: float) -> Any:
            self.waits.append((len(refs), num_returns, timeout))
            ready = [r for r in refs if r.index != 1]  # actor 1 never answers
            return ready, [r for r in refs if r not in ready]

        def get(self, ref: Ref, timeout: float | None = None) -> tuple[int, str, int]:
            return ref.index, "node", 100 + ref.index

        def kill(self, actor: Actor, *, no_restart: bool) -> None:
            self.killed.append(actor.index)

    fake = FakeRay()
    monkeypatch.setattr(ray_cluster, "connect", lambda address: fake)
    devices = ray_cluster.ray_devices("ray://nowhere:1")
    assert [d.gpu.label for d in devices] == ["node:gpu0", "node:gpu2"]
    assert fake.waits == [(3, 3, ray_cluster.CONNECT_TIMEOUT_S)] and fake.killed == [1]


# --- the suite spreads its kernels ---------------------------------------------------------------
SUITE = ROOT / "benchmarks" / "suite"
RECORDING = ROOT / "benchmarks" / "recordings" / "hand-written"
OUTCOMES = {
    "baseline": {"ms": 1.0, "spread_pct": 0.5},
    "candidates": [
        {"contains": "DELIBERATELY WRONG", "status": "out_of_bounds", "message": "out past end"},
        {"contains": "16x16 shared-memory tile", "status": "ok", "ms": 0.2},
        {"contains": "classic shared-memory tiling", "status": "ok", "ms": 0.4},
    ],
}
KERNELS = ("transpose_f32", "matmul_f32", "vector_add_f32")


def test_the_suite_spreads_its_kernels_over_the_gpus_with_the_same_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_LLM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CUDA_LLM_DATA_DIR", str(tmp_path / "data"))
    recording = tmp_path / "outcomes.json"
    recording.write_text(json.dumps(OUTCOMES))
    options = SuiteOptions(
        directory=SUITE, kernels=KERNELS, optimize=True, replay_dir=RECORDING, vendor=False
    )
    items = discover(SUITE, KERNELS)
    one = SuiteRunner(options, RecordedEvaluator(recording)).run(items)
    devices = [Device(GpuId(i), RecordedEvaluator(recording)) for i in range(2)]
    with GpuPool(lambda: devices) as pool:
        two = SuiteRunner(options, pool).run(items)

    def rows(report: Any) -> list[tuple[Any, ...]]:
        return [
            (r.kernel, r.status, r.accepted, r.speedup, r.candidate_statuses) for r in report.rows
        ]

    assert rows(two) == rows(one) and [r.kernel for r in two.rows] == [i.kernel.name for i in items]
    assert any("spread over 2 GPUs" in n for n in two.notes)
    assert all(d.evaluator.calls for d in devices), "both GPUs took kernels"  # type: ignore[attr-defined]


# --- Ray is optional ------------------------------------------------------------------------------
def test_without_ray_a_cluster_is_a_clear_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a)
    )
    with pytest.raises(ValueError, match=r'pip install "cuda-llm-lsp\[ray\]"'):
        ray_pool("auto")


def test_importing_the_package_never_imports_ray(tmp_path: Path) -> None:
    import subprocess
    import sys

    code = (
        "import sys, cuda_llm_lsp.cli, cuda_llm_lsp.engine, cuda_llm_lsp.lsp.app, "
        "cuda_llm_lsp.evaluate.ray_cluster; print('ray' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "False", done.stderr


# --- the CLI: flags and progress -----------------------------------------------------------------
def test_bad_gpus_and_cluster_flags_are_usage_errors(tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.support.fsr_fakes import SAXPY_FILE

    source = tmp_path / "saxpy.cu"
    source.write_text(SAXPY_FILE)
    env = {k: v for k, v in os.environ.items() if k != "CUDA_LLM_EVALUATOR"}
    env["CUDA_LLM_DATA_DIR"] = str(tmp_path / "data")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cuda_llm_lsp.cli",
            "optimize",
            str(source),
            "--kernel",
            "saxpy",
            "--gpus",
            "first",
            "--format",
            "json",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "gpus must be 'all' or a list of GPU numbers" in done.stderr
    assert json.loads(done.stdout)["exit_code"] == 2


def test_the_progress_table_says_which_gpu_judges_what() -> None:
    import io

    from cuda_llm_lsp.cli.optimize import Display
    from cuda_llm_lsp.fsr.types import RoundStarted

    out = io.StringIO()
    display = Display(out, live=False)
    display(RoundStarted(1, 1))
    display(CandidateStage(1, 2, "evaluating"))
    display(CandidateStage(1, 2, "evaluating", gpu="node-a:gpu1"))
    assert display.cells[(1, 2)] == "timing node-a:gpu1"
    assert "  1.2 on node-a:gpu1" in out.getvalue().splitlines()
