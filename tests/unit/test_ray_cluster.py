"""A Ray cluster on the CPU: a local cluster started here with 2 fake GPUs (`num_gpus=2`), one
actor per GPU, each running the real worker on the CUDA driver double. An optimize round over
the actors gives the statuses and the winner of a local run; an actor killed mid-run has its
candidate re-run on the other one, is restarted, and the run completes. A node lost mid-run
(a second raylet of a local multi-node cluster, removed) the same.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from cuda_llm_lsp.evaluate import ray_cluster, timing
from cuda_llm_lsp.evaluate.devices import GpuPool
from cuda_llm_lsp.evaluate.gpu import GpuEvaluator
from cuda_llm_lsp.fsr.types import CandidateStage, ProgressEvent
from tests.support.fake_gpus import PLANTED, driver_env, optimize_round, statuses, winner

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
    ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": env})  # fmt: skip
    yield
    ray.shutdown()


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
