"""`JobEvaluator`: one editor job's handle on the server's shared GPU evaluator.

The state hands one to each optimize or benchmark job; the job's cancel stops only its own GPU
work, never another job's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from cuda_llm_lsp.evaluate.types import EvaluationCancelled, Evaluator


class JobEvaluator:
    """One job's view of the shared GPU evaluator: its cancels stop only its own GPU work.

    The evaluator has one worker per GPU and its `cancel` kills whatever runs on it; with
    several kernels optimizing at once, cancelling one job must not cost another its run.
    Calls pass one at a time through `gate`, so a cancel reaches the worker only while this
    job's call is the one running.

    `cancel` is the evaluator protocol's: the FSR loop uses it to interrupt the candidate on
    the GPU when a budget runs out, then goes on (re-validating its winner), so it stops only
    the call in flight. `cancel_job` is the job's cancel: every later call is refused too.
    """

    def __init__(self, inner: Evaluator, gate: threading.Lock) -> None:
        self.inner, self.gate = inner, gate
        self._cancelled = threading.Event()
        self._running = 0  # the id of the call on the GPU, 0 when none
        self._calls = 0
        self._state = threading.Lock()

    def _call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        while not self.gate.acquire(timeout=0.02):  # waiting for another job's GPU call
            if self._cancelled.is_set():
                raise EvaluationCancelled("cancelled")
        try:
            with self._state:
                if self._cancelled.is_set():
                    raise EvaluationCancelled("cancelled")
                self._calls += 1
                self._running = self._calls
            try:
                result = method(*args, **kwargs)
            finally:
                with self._state:
                    self._running = 0
        finally:
            self.gate.release()
        if self._cancelled.is_set():
            raise EvaluationCancelled("cancelled")
        return result

    def device_facts(self) -> Any:
        return self._call(self.inner.device_facts)

    def benchmark(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(self.inner.benchmark, *args, **kwargs)

    def evaluate(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(self.inner.evaluate, *args, **kwargs)

    def cancel(self) -> None:
        """Interrupt this job's call in flight, if any; later calls run as usual."""
        with self._state:
            call = self._running
        if call:
            self.inner.cancel()
            # The worker clears a cancel when a call begins: repeat it once the call is under
            # way, but only if that same call is still the one running.
            threading.Timer(0.05, self._cancel_again, (call,)).start()

    def cancel_job(self) -> None:
        """The job is cancelled: interrupt the call in flight and refuse every later one."""
        with self._state:
            self._cancelled.set()
        self.cancel()

    def _cancel_again(self, call: int) -> None:
        with self._state:
            running = self._running == call
        if running:
            self.inner.cancel()

    def close(self) -> None:
        """The shared evaluator outlives jobs: the server closes it at shutdown."""
