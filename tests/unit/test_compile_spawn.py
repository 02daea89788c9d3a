"""Compile processes outlive the thread that happened to start them: PR_SET_PDEATHSIG fires when
the forking *thread* ends, and a tuning run compiles from a short-lived thread pool (its processes
died with SIGKILL when the pool's threads ended, and the next compiles were reported as crashes)."""

from __future__ import annotations

import os
import signal
import threading
import time

from cuda_llm_lsp.compile.device_unit import build_device_unit
from cuda_llm_lsp.compile.isolated import CompilePool
from cuda_llm_lsp.compile.types import CompileOptions


def _answered(pool: CompilePool) -> None:
    """One compile answered: the child has set up its signals (it does so before serving), a
    readiness that no fixed sleep gives on a loaded machine (was: `sleep(2.0)`)."""
    unit = build_device_unit("__global__ void k(float* x) { x[0] = 1.0f; }\n", None, ())
    assert pool.compile(unit, CompileOptions(arch="sm_90"), ("k",), timeout_s=60).ok


def test_a_compile_process_started_from_an_ended_thread_stays_alive() -> None:
    pool = CompilePool(size=2)
    try:

        def start_then_end() -> None:  # as a tuning run's compile thread does
            pool.warm()
            both = [threading.Thread(target=_answered, args=(pool,)) for _ in range(2)]
            for thread in both:  # at once: one compile per child, each up and signals set
                thread.start()
            for thread in both:
                thread.join()

        starter = threading.Thread(target=start_then_end)
        starter.start()
        starter.join()
        time.sleep(1.0)  # the signal, had it been sent, has been delivered by now
        assert len(pool._idle) == 2
        assert all(worker.proc.poll() is None for worker in pool._idle)
    finally:
        pool.close()


def test_ctrl_c_in_the_terminal_does_not_kill_a_compile_process() -> None:
    """Ctrl-C reaches the whole foreground process group; the parent (cuda-llm tune, check)
    decides what stops, and a killed compile would be cached as a compiler crash."""
    pool = CompilePool(size=1)
    try:
        _answered(pool)  # the child has started and set its signal handling
        (worker,) = pool._idle
        os.kill(worker.proc.pid, signal.SIGINT)
        time.sleep(0.5)
        assert worker.proc.poll() is None
    finally:
        pool.close()
