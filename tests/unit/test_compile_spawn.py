"""Compile processes outlive the thread that happened to start them: PR_SET_PDEATHSIG fires when
the forking *thread* ends, and a tuning run compiles from a short-lived thread pool (its processes
died with SIGKILL when the pool's threads ended, and the next compiles were reported as crashes)."""

from __future__ import annotations

import os
import signal
import threading
import time

from cuda_llm_lsp.compile.isolated import CompilePool


def test_a_compile_process_started_from_an_ended_thread_stays_alive() -> None:
    pool = CompilePool(size=2)
    try:

        def start_then_end() -> None:  # as a tuning run's compile thread does
            pool.warm()
            time.sleep(2.0)  # the children are up and have asked for the signal

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
        pool.warm()
        time.sleep(2.0)  # the child has started and set its signal handling
        (worker,) = pool._idle
        os.kill(worker.proc.pid, signal.SIGINT)
        time.sleep(0.5)
        assert worker.proc.poll() is None
    finally:
        pool.close()
