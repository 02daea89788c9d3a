"""The GPU worker started early (`cuda-llm bench`): adopted by the evaluator, killed when nobody
adopts it, never started where no local GPU would answer."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_llm_lsp.evaluate import worker_start
from cuda_llm_lsp.evaluate.process import WorkerProcess

ROOT = Path(__file__).resolve().parents[2]
FAKE = "tests.unit.fake_cuda_driver"


@pytest.fixture
def fake_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_LLM_LSP_DRIVER", FAKE)
    monkeypatch.delenv(worker_start.EVALUATOR_ENV, raising=False)
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    monkeypatch.setenv("PYTHONPATH", path)


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"  # exited, not yet reaped


def test_the_first_worker_process_of_the_device_is_the_early_one(fake_driver: None) -> None:
    assert worker_start.start_early(0)
    early = worker_start._early[0]
    worker = WorkerProcess(0)
    try:
        assert worker.pid == early.pid
        assert 0 not in worker_start._early  # adopted once: a restart spawns a fresh one
        second = WorkerProcess(0)
        try:
            assert second.pid != early.pid
        finally:
            second.kill()
    finally:
        worker.kill()


def test_a_dead_early_worker_is_not_adopted(fake_driver: None) -> None:
    assert worker_start.start_early(0)
    early = worker_start._early[0]
    early.kill()
    early.wait(timeout=10)
    worker = WorkerProcess(0)
    try:
        assert worker.pid != early.pid and worker.alive()
    finally:
        worker.kill()


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc (Linux)")
def test_an_early_worker_nobody_adopts_is_killed_at_exit(fake_driver: None) -> None:
    code = (
        "from cuda_llm_lsp.evaluate import worker_start\n"
        "assert worker_start.start_early(0)\n"
        "print(worker_start._early[0].pid, flush=True)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr
    # gone as its parent exits, not later: it would have read EOF or seen its parent go (1 s
    # poll) only after its own start-up (a CUDA context on a real GPU)
    assert _gone(int(out.stdout.split()[0]))


def test_no_early_worker_where_no_local_gpu_would_answer(
    fake_driver: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(worker_start.EVALUATOR_ENV, "recorded:/nowhere.json")
    assert not worker_start.start_early(0)
    monkeypatch.delenv(worker_start.EVALUATOR_ENV)
    monkeypatch.setenv("CUDA_LLM_LSP_DRIVER", "no_such_driver_module")
    assert not worker_start.start_early(0)
    assert not worker_start._early
