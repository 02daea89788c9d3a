"""One editor job's handle on the server's shared GPU evaluator: `JobEvaluator` on one GPU,
`JobPool` on a `GpuPool` (`cudaLlm.gpus` / `cudaLlm.cluster`).

The state hands one to each optimize, benchmark or tune job; the job's cancel stops only its own
GPU work, never another job's.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from cuda_llm_lsp.evaluate.devices import Device, GpuId, GpuPool
from cuda_llm_lsp.evaluate.types import DeviceFacts, EvaluationCancelled, Evaluator

T = TypeVar("T")


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


class JobPool(GpuPool):
    """One job's view of the server's shared `GpuPool`: a pool itself, so the FSR loop judges
    the job's candidates in parallel and says which GPU judges each; its devices are the shared
    pool's, leased call by call, so jobs share the GPUs.

    A cancel reaches only the GPUs this job's calls hold: it is delivered while the call still
    holds its device (under `_state`, which the call takes to give the device back), so it can
    never hit another job's call on that GPU. `cancel_job` also stops the job's calls waiting
    for a device and refuses later ones.
    """

    def __init__(self, shared: GpuPool) -> None:
        super().__init__(lambda: shared.devices)
        self.shared = shared
        self._stopped = threading.Event()
        self._held: dict[int, Device] = {}  # this job's calls on a GPU: call id -> its device
        self._ids = itertools.count(1)
        self._state = threading.Lock()

    @property
    def devices(self) -> list[Device]:
        return self.shared.devices

    def device_facts(self) -> DeviceFacts:
        return self.shared.device_facts()  # read when the shared pool started

    def run(
        self,
        job: Callable[[Device], T],
        on_device: Callable[[GpuId], None] | None = None,
        *,
        stop: threading.Event | None = None,
    ) -> T:
        call = next(self._ids)

        def held(device: Device) -> T:
            with self._state:
                if self._stopped.is_set():
                    raise EvaluationCancelled("cancelled")
                self._held[call] = device
            try:
                return job(device)
            finally:
                with self._state:
                    self._held.pop(call, None)

        if self._stopped.is_set():
            raise EvaluationCancelled("cancelled")
        result = self.shared.run(held, on_device, stop=self._stopped)
        if self._stopped.is_set():
            raise EvaluationCancelled("cancelled")
        return result

    def cancel(self) -> None:
        """Interrupt this job's calls in flight, if any; later calls run as usual."""
        with self._state:
            calls = set(self._held)
            for device in self._held.values():
                device.evaluator.cancel()
        if calls:  # the worker clears a cancel when a call begins: repeat it once under way
            threading.Timer(0.05, self._cancel_again, (calls,)).start()

    def _cancel_again(self, calls: set[int]) -> None:
        with self._state:
            for call, device in self._held.items():
                if call in calls:
                    device.evaluator.cancel()

    def cancel_job(self) -> None:
        """The job is cancelled: its calls in flight and waiting stop, later ones are refused."""
        self._stopped.set()
        self.shared.wake()
        self.cancel()

    def close(self) -> None:
        """The shared pool outlives jobs: the server closes it."""


def job_view(shared: Evaluator, gate: threading.Lock) -> JobEvaluator | JobPool:
    """The job's handle on `shared`: a `JobPool` on a pool, else a `JobEvaluator` through the
    server's one-call-at-a-time `gate`."""
    return JobPool(shared) if isinstance(shared, GpuPool) else JobEvaluator(shared, gate)
