"""A Ray cluster on the CPU: a local cluster started here with 2 fake GPUs (`num_gpus=2`), one
actor per GPU, each running the real worker on the CUDA driver double. An optimize round over
the actors gives the statuses and the winner of a local run; an actor killed mid-run has its
candidate re-run on the other one, is restarted, and the run completes. A node lost mid-run
(a second raylet of a local multi-node cluster, removed) the same. A suite replayed with
`cuda-llm suite --cluster` (its kernels built by NVRTC, its candidates the double's variants)
gives every kernel the statuses and winner of the local run; with an actor killed mid-suite too.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cuda_llm_lsp.evaluate import ray_cluster, timing
from cuda_llm_lsp.evaluate.devices import GpuPool
from cuda_llm_lsp.evaluate.gpu import GpuEvaluator
from cuda_llm_lsp.fsr.types import CandidateStage, ProgressEvent
from cuda_llm_lsp.suite.runner import Progress, SuiteOptions, SuiteRunner, discover
from tests.support.fake_gpus import (
    PLANTED,
    SUITE_STATUSES,
    SUITE_WINNERS,
    driver_env,
    optimize_round,
    statuses,
    suite_rows,
    winner,
    write_suite,
)

ray = pytest.importorskip("ray", reason='Ray is an optional extra: pip install "cuda-llm-lsp[ray]"')

PLAN = timing.Plan(budget_s=0.3, batch=5)
pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def env() -> Iterator[dict[str, str]]:
    mp = pytest.MonkeyPatch()
    values = driver_env(2) | {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    for name, value in values.items():
        mp.setenv(name, value)
    mp.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    yield values
    mp.undo()


@pytest.fixture(scope="module")
def local_statuses(env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Any:
    with GpuEvaluator(0, plan=PLAN, cache_dir=tmp_path_factory.mktemp("facts")) as one:
        result = asyncio.run(optimize_round(one))
    assert statuses(result) == PLANTED and winner(result) == "fast", result.message
    return statuses(result), winner(result)


@pytest.fixture(scope="module")
def cluster(env: dict[str, str], local_statuses: Any) -> Iterator[None]:
    ray.init(
        num_cpus=2,
        num_gpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": env},
    )
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def suite(env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The small suite (tests/support/fake_gpus.py) run by the CLI on one local worker."""
    where = tmp_path_factory.mktemp("suite")
    directory, replay = write_suite(where)
    done = _suite_cli(where, directory, replay, "--gpus", "0")
    report = json.loads(done.stdout)
    rows = suite_rows(report)
    for kernel, (status, accepted, speedup, counted) in rows.items():
        assert status == "ok" and counted == SUITE_STATUSES[kernel], (kernel, rows, done.stderr)
        assert (speedup if accepted else None) == SUITE_WINNERS[kernel], (kernel, rows)
    assert "on gpu0" in done.stderr and "on gpu1" not in done.stderr, done.stderr
    return {"dir": directory, "replay": replay, "where": where, "rows": rows}


def _suite_cli(where: Path, directory: Path, replay: Path, *flags: str) -> Any:
    """`cuda-llm suite DIR --replay REPLAY FLAGS` in a child process, on the driver double."""
    out = where / f"out{len(list(where.glob('out*')))}"
    child = {k: v for k, v in os.environ.items() if k != "CUDA_LLM_EVALUATOR"}
    child |= {"CUDA_LLM_CACHE_DIR": str(where / "cache"), "CUDA_LLM_DATA_DIR": str(where / "data")}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cuda_llm_lsp.cli",
            "suite",
            str(directory),
            "--replay",
            str(replay),
            "--no-vendor",
            "--time-budget",
            "0.3",
            "--format",
            "json",
            "--out",
            str(out),
            *flags,
        ],
        env=child,
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def test_an_optimize_round_on_two_ray_actors_matches_the_local_run(
    cluster: None, local_statuses: Any
) -> None:
    pool = ray_cluster.ray_pool("auto", plan=PLAN)
    events: list[ProgressEvent] = []
    try:
        result = asyncio.run(optimize_round(pool, events))
        hosts = {d.gpu.host for d in pool.devices}
    finally:
        pool.close()
    assert (statuses(result), winner(result)) == local_statuses and result.accepted
    assert result.speedup == pytest.approx(4.0, rel=0.05)
    used = {c.gpu.split(" ")[0] for c in result.candidates if c.gpu}
    (host,) = hosts
    assert used == {f"{host}:gpu0", f"{host}:gpu1"}
    assert {e.gpu for e in events if isinstance(e, CandidateStage) and e.gpu} == used


def test_an_actor_killed_mid_run_has_its_candidate_rerun_and_comes_back(
    cluster: None, local_statuses: Any
) -> None:
    pool = ray_cluster.ray_pool("auto", plan=PLAN)
    killed: list[str] = []

    def kill_first(event: ProgressEvent) -> None:
        if isinstance(event, CandidateStage) and event.gpu and not killed:
            killed.append(event.gpu)
            actor = _device(pool, event.gpu).evaluator.actor  # type: ignore[attr-defined]
            threading.Timer(0.1, lambda: ray.kill(actor, no_restart=False)).start()

    events: list[ProgressEvent] = []
    try:
        result = asyncio.run(optimize_round(pool, _Both(events, kill_first)))  # type: ignore[arg-type]
        lost = _device(pool, killed[0]).evaluator
        assert lost.lost >= 1  # type: ignore[attr-defined]
        assert lost.device_facts().arch == "sm_90"  # restarted: it answers again
    finally:
        pool.close()
    assert (statuses(result), winner(result)) == local_statuses and result.accepted
    rerun = [e for e in events if isinstance(e, CandidateStage) and e.gpu]
    assert len(rerun) > len(PLANTED)  # the killed actor's candidate was given a GPU twice


def test_a_suite_over_two_ray_actors_matches_the_local_run(
    cluster: None, suite: dict[str, Any]
) -> None:
    """`cuda-llm suite --cluster ADDRESS`, as a user types it: the kernels spread over both
    actors, and each kernel's statuses and winner are the local run's."""
    address = ray.get_runtime_context().gcs_address
    done = _suite_cli(suite["where"], suite["dir"], suite["replay"], "--cluster", address)
    report = json.loads(done.stdout)
    assert suite_rows(report) == suite["rows"]
    assert any("spread over 2 GPUs" in note for note in report["notes"]), report["notes"]
    judged = {
        line.rsplit(" on ", 1)[1]
        for line in done.stderr.splitlines()
        if " candidate r" in line and " on " in line
    }
    assert len(judged) == 2 and all(g.endswith((":gpu0", ":gpu1")) for g in judged), done.stderr


def test_an_actor_killed_mid_suite_has_its_work_rerun_and_the_suite_completes(
    cluster: None, suite: dict[str, Any]
) -> None:
    """The objects the CLI builds for `--cluster` (a Ray pool, the suite runner): one actor is
    killed while it judges; its call runs again on an actor, and the rows are the local run's."""
    pool = ray_cluster.ray_pool("auto", plan=PLAN)
    options = SuiteOptions(
        directory=suite["dir"], optimize=True, replay_dir=suite["replay"], vendor=False
    )
    killed: list[str] = []

    def kill_a_busy_actor(progress: Progress) -> None:
        if progress.stage.startswith("candidate") and not killed:
            busy = [d for d in pool.devices if d not in pool._free]  # leased: judging now
            if busy:
                killed.append(busy[0].gpu.label)
                ray.kill(busy[0].evaluator.actor, no_restart=False)  # type: ignore[attr-defined]

    try:
        report = SuiteRunner(options, pool, kill_a_busy_actor).run(discover(suite["dir"]))
        lost = _device(pool, killed[0]).evaluator if killed else None
        assert lost is not None and lost.lost >= 1, killed  # its call was given another GPU
        assert lost.device_facts().arch == "sm_90"  # restarted: it answers again
    finally:
        pool.close()
    rows = suite_rows({"kernels": [vars(r) for r in report.rows]})
    assert rows == suite["rows"]


def test_a_lost_node_has_its_candidates_rerun_and_the_run_completes(
    env: dict[str, str], local_statuses: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ray.cluster_utils import Cluster

    monkeypatch.setattr(ray_cluster, "RESTART_TIMEOUT_S", 5.0)
    if ray.is_initialized():
        ray.shutdown()
    nodes = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 1})
    doomed = nodes.add_node(num_cpus=1, num_gpus=1)
    try:
        ray.init(address=nodes.address, log_to_driver=False, runtime_env={"env_vars": env})
        pool = ray_cluster.ray_pool("auto", plan=PLAN)
        assert pool.width == 2
        removed: list[str] = []

        def lose_node(event: ProgressEvent) -> None:
            if isinstance(event, CandidateStage) and event.gpu and not removed:
                removed.append(event.gpu)
                threading.Thread(target=nodes.remove_node, args=(doomed,)).start()

        events: list[ProgressEvent] = []
        try:
            result = asyncio.run(optimize_round(pool, _Both(events, lose_node)))  # type: ignore[arg-type]
            assert sum(d.evaluator.lost for d in pool.devices) >= 1  # type: ignore[attr-defined]
        finally:
            pool.close()
        assert (statuses(result), winner(result)) == local_statuses and result.accepted
        rerun = [e for e in events if isinstance(e, CandidateStage) and e.gpu]
        assert len(rerun) > len(PLANTED)  # the lost node's candidate was given a GPU twice
    finally:
        ray.shutdown()
        nodes.shutdown()


class _Both(list):  # type: ignore[type-arg]
    """A progress sink that keeps the events and calls `hook` on each (an `append`)."""

    def __init__(self, events: list[ProgressEvent], hook: Any) -> None:
        super().__init__()
        self.events, self.hook = events, hook

    def append(self, event: Any) -> None:
        self.events.append(event)
        self.hook(event)


def _device(pool: GpuPool, label: str) -> Any:
    return next(d for d in pool.devices if d.gpu.label == label)
