"""One use case's handle on a shared GPU evaluator: `JobEvaluator` on one GPU, `JobPool` on a
`GpuPool` (`cudaLlm.gpus` / `cudaLlm.cluster`).

The GPU service (`gpu_service`) hands one out with each lease; the lease's `CancelToken` is the
job's cancel: it stops only this job's GPU work, never another job's, and refuses its later
calls. The stop itself (signals to worker processes, locks) runs on a thread of its own, so a
cancel from the language server's event loop never waits on a GPU worker.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from cuda_llm_lsp.cancel import CancelToken
from cuda_llm_lsp.evaluate.devices import Device, GpuId, GpuPool
from cuda_llm_lsp.evaluate.types import (
    DeviceFacts,
    EvalResult,
    EvaluationCancelled,
    Evaluator,
    KernelBinary,
)
from cuda_llm_lsp.source.spec import TestSpec

T = TypeVar("T")
log = logging.getLogger(__name__)


class GpuGate:
    """One job's call at a time on the one GPU worker. A job waiting here leaves as soon as its
    token is cancelled: the cancel wakes the waiters (`wake`), nobody polls."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._busy = False

    def enter(self, stop: CancelToken) -> bool:
        """Take the GPU; False, without it, once `stop` is cancelled."""
        with self._cond:
            while self._busy and not stop.cancelled:
                self._cond.wait()
            if stop.cancelled:
                return False
            self._busy = True
            return True

    def leave(self) -> None:
        with self._cond:
            self._busy = False
            self._cond.notify_all()

    def wake(self) -> None:
        """Waiters look at their tokens again (one was cancelled)."""
        with self._cond:
            self._cond.notify_all()


def in_thread(call: Callable[[], None], name: str) -> None:
    """`call` on a thread of its own: stopping GPU work reaches worker processes (signalled,
    locks taken) that must not stall whoever cancels (the server's event loop, a signal)."""

    def run() -> None:
        try:
            call()
        except Exception:
            log.exception("%s failed", name)

    threading.Thread(target=run, name=name, daemon=True).start()


class JobEvaluator:
    """One job's view of the shared GPU evaluator: its cancels stop only its own GPU work.

    The evaluator has one worker per GPU and its `cancel` kills whatever runs on it; with
    several kernels optimizing at once, cancelling one job must not cost another its run.
    Calls pass one at a time through `gate`, so a cancel reaches the worker only while this
    job's call is the one running.

    The worker clears a cancel when a call begins, so a cancel that lands just as a call starts
    is sent once more 50 ms later, only if that same call still runs.

    `cancel` is the evaluator protocol's: the FSR loop uses it to interrupt the candidate on
    the GPU when a budget runs out, then goes on (re-validating its winner), so it stops only
    the call in flight. The job's cancel is its `token`: every later call is refused too.
    """

    def __init__(self, inner: Evaluator, gate: GpuGate, token: CancelToken | None = None) -> None:
        self.inner, self.gate = inner, gate
        self.token = token or CancelToken()
        self._running = 0  # the id of the call on the GPU, 0 when none
        self._calls = 0
        self._state = threading.Lock()
        self.token.on_cancel(self._stop)

    def _call(self, method: Callable[[], T]) -> T:
        if not self.gate.enter(self.token):  # another job's GPU call runs: wait, cancellable
            raise EvaluationCancelled("cancelled")
        try:
            with self._state:
                if self.token.cancelled:
                    raise EvaluationCancelled("cancelled")
                self._calls += 1
                self._running = self._calls
            try:
                result = method()
            finally:
                with self._state:
                    self._running = 0
        finally:
            self.gate.leave()
        if self.token.cancelled:
            raise EvaluationCancelled("cancelled")
        return result

    def device_facts(self) -> DeviceFacts:
        return self._call(self.inner.device_facts)

    def benchmark(
        self,
        kernel: KernelBinary,
        spec: TestSpec,
        *,
        spec_dir: Path | None = None,
        seed: int | None = None,
    ) -> EvalResult:
        return self._call(lambda: self.inner.benchmark(kernel, spec, spec_dir=spec_dir, seed=seed))

    def evaluate(
        self,
        baseline: KernelBinary,
        candidate: KernelBinary,
        spec: TestSpec,
        *,
        spec_dir: Path | None = None,
        seed: int | None = None,
        candidate_spec: TestSpec | None = None,
    ) -> EvalResult:
        return self._call(
            lambda: self.inner.evaluate(
                baseline,
                candidate,
                spec,
                spec_dir=spec_dir,
                seed=seed,
                candidate_spec=candidate_spec,
            )
        )

    def cancel(self) -> None:
        """Interrupt this job's call in flight, if any; later calls run as usual."""
        with self._state:
            call = self._running
        if call:
            self.inner.cancel()
            # The worker clears a cancel when a call begins: repeat it once the call is under
            # way, but only if that same call is still the one running.
            threading.Timer(0.05, self._cancel_again, (call,)).start()

    def _stop(self) -> None:  # the token's callback: off the cancelling thread
        in_thread(self._stop_now, "cuda-llm-cancel")

    def _stop_now(self) -> None:
        self.gate.wake()
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
    never hit another job's call on that GPU. Its `token`'s cancel also stops the job's calls
    waiting for a device and refuses later ones.
    """

    def __init__(self, shared: GpuPool, token: CancelToken | None = None) -> None:
        super().__init__(lambda: shared.devices)
        self.shared = shared
        self.token = token or CancelToken()
        self._held: dict[int, Device] = {}  # this job's calls on a GPU: call id -> its device
        self._ids = itertools.count(1)
        self._state = threading.Lock()
        self.token.on_cancel(lambda: in_thread(self._stop_now, "cuda-llm-cancel"))

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
        stop: CancelToken | None = None,
    ) -> T:
        call = next(self._ids)

        def held(device: Device) -> T:
            with self._state:
                if self.token.cancelled:
                    raise EvaluationCancelled("cancelled")
                self._held[call] = device
            try:
                return job(device)
            finally:
                with self._state:
                    self._held.pop(call, None)

        if self.token.cancelled:
            raise EvaluationCancelled("cancelled")
        result = self.shared.run(held, on_device, stop=self.token)
        if self.token.cancelled:
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

    def _stop_now(self) -> None:
        self.shared.wake()
        self.cancel()

    def close(self) -> None:
        """The shared pool outlives jobs: the server closes it."""


def job_view(
    shared: Evaluator, gate: GpuGate, token: CancelToken | None = None
) -> JobEvaluator | JobPool:
    """The job's handle on `shared`, cancelled by `token`: a `JobPool` on a pool, else a
    `JobEvaluator` through the one-call-at-a-time `gate`."""
    if isinstance(shared, GpuPool):
        return JobPool(shared, token)
    return JobEvaluator(shared, gate, token)
