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

from cuda_llm_lsp.cancel import CancelToken, relayed
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
    Calls pass one at a time through `gate`, and each carries a token of its own: the evaluator
    relays it to its worker for that call only, so a cancel is never lost as a call begins and
    never reaches a later call.

    `cancel` is the evaluator protocol's: the FSR loop uses it to interrupt the candidate on
    the GPU when a budget runs out, then goes on (re-validating its winner), so it stops only
    the call in flight. The job's cancel is its `token`: every later call is refused too.
    """

    def __init__(self, inner: Evaluator, gate: GpuGate, token: CancelToken | None = None) -> None:
        self.inner, self.gate = inner, gate
        self.token = token or CancelToken()
        self._calls = _OwnCalls(self.token)
        self.token.on_cancel(lambda: in_thread(self._stop_now, "cuda-llm-cancel"))

    def _call(self, method: Callable[[CancelToken], T], given: CancelToken | None = None) -> T:
        if not self.gate.enter(self.token):  # another job's GPU call runs: wait, cancellable
            raise EvaluationCancelled("cancelled")
        try:
            return self._calls.run(method, given)
        finally:
            self.gate.leave()

    def device_facts(self) -> DeviceFacts:
        return self._call(lambda own: self.inner.device_facts())

    def benchmark(
        self,
        kernel: KernelBinary,
        spec: TestSpec,
        *,
        spec_dir: Path | None = None,
        seed: int | None = None,
        stop: CancelToken | None = None,
    ) -> EvalResult:
        return self._call(
            lambda own: self.inner.benchmark(kernel, spec, spec_dir=spec_dir, seed=seed, stop=own),
            stop,
        )

    def evaluate(
        self,
        baseline: KernelBinary,
        candidate: KernelBinary,
        spec: TestSpec,
        *,
        spec_dir: Path | None = None,
        seed: int | None = None,
        candidate_spec: TestSpec | None = None,
        stop: CancelToken | None = None,
    ) -> EvalResult:
        return self._call(
            lambda own: self.inner.evaluate(
                baseline,
                candidate,
                spec,
                spec_dir=spec_dir,
                seed=seed,
                candidate_spec=candidate_spec,
                stop=own,
            ),
            stop,
        )

    def cancel(self) -> None:
        """Interrupt this job's call in flight, if any; later calls run as usual."""
        self._calls.cancel()

    def _stop_now(self) -> None:  # the token's cancel, off the cancelling thread
        self.gate.wake()
        self._calls.cancel()

    def close(self) -> None:
        """The shared evaluator outlives jobs: the server closes it at shutdown."""


class _OwnCalls:
    """A job's calls in flight, each with a token of its own that the evaluator relays to the
    worker for that call only. The job's cancel (`cancel`, run off the cancelling thread) and
    a call's start are ordered by one lock: a call either sees the job cancelled and does not
    start, or is registered before the cancel looks, and is stopped."""

    def __init__(self, job: CancelToken) -> None:
        self.job = job
        self._own: dict[int, CancelToken] = {}
        self._ids = itertools.count(1)
        self._state = threading.Lock()

    def run(self, method: Callable[[CancelToken], T], given: CancelToken | None) -> T:
        call, own = next(self._ids), CancelToken()
        with self._state:
            if self.job.cancelled:
                raise EvaluationCancelled("cancelled")
            self._own[call] = own
        try:
            with relayed(given, own.cancel):  # the caller's own token for this call, if any
                result = method(own)
        finally:
            with self._state:
                self._own.pop(call, None)
        if self.job.cancelled:
            raise EvaluationCancelled("cancelled")
        return result

    def cancel(self) -> None:
        """Every call in flight (a call yet to reach its worker included); none after."""
        with self._state:
            own = list(self._own.values())
        for token in own:
            token.cancel()


class JobPool(GpuPool):
    """One job's view of the server's shared `GpuPool`: a pool itself, so the FSR loop judges
    the job's candidates in parallel and says which GPU judges each; its devices are the shared
    pool's, leased call by call, so jobs share the GPUs.

    Each call carries a token of its own, relayed by the device's evaluator to its worker for
    that call only: a cancel reaches only the GPUs this job's calls hold and can never hit
    another job's call on that GPU. Its `token`'s cancel also stops the job's calls waiting
    for a device and refuses later ones.
    """

    def __init__(self, shared: GpuPool, token: CancelToken | None = None) -> None:
        super().__init__(lambda: shared.devices)
        self.shared = shared
        self.token = token or CancelToken()
        self._calls = _OwnCalls(self.token)
        self.token.on_cancel(lambda: in_thread(self._stop_now, "cuda-llm-cancel"))

    @property
    def devices(self) -> list[Device]:
        return self.shared.devices

    def device_facts(self) -> DeviceFacts:
        return self.shared.device_facts()  # read when the shared pool started

    def benchmark(
        self,
        kernel: KernelBinary,
        spec: TestSpec,
        *,
        spec_dir: Path | None = None,
        seed: int | None = None,
        stop: CancelToken | None = None,
    ) -> EvalResult:
        return self._calls.run(
            lambda own: super(JobPool, self).benchmark(
                kernel, spec, spec_dir=spec_dir, seed=seed, stop=own
            ),
            stop,
        )

    def evaluate(
        self,
        baseline: KernelBinary,
        candidate: KernelBinary,
        spec: TestSpec,
        *,
        spec_dir: Path | None = None,
        seed: int | None = None,
        candidate_spec: TestSpec | None = None,
        on_device: Callable[[GpuId], None] | None = None,
        stop: CancelToken | None = None,
    ) -> EvalResult:
        return self._calls.run(
            lambda own: super(JobPool, self).evaluate(
                baseline,
                candidate,
                spec,
                spec_dir=spec_dir,
                seed=seed,
                candidate_spec=candidate_spec,
                on_device=on_device,
                stop=own,
            ),
            stop,
        )

    def run(
        self,
        job: Callable[[Device], T],
        on_device: Callable[[GpuId], None] | None = None,
        *,
        stop: CancelToken | None = None,
    ) -> T:
        """`job` on a device leased from the shared pool; waiting for one ends with `stop` (a
        call's own token) or the job's token."""
        if self.token.cancelled:
            raise EvaluationCancelled("cancelled")
        result = self.shared.run(job, on_device, stop=stop or self.token)
        if self.token.cancelled:
            raise EvaluationCancelled("cancelled")
        return result

    def cancel(self) -> None:
        """Interrupt this job's calls in flight, if any; later calls run as usual."""
        self._calls.cancel()
        self.shared.wake()  # those waiting for a device look at their tokens again

    def _stop_now(self) -> None:  # the token's cancel, off the cancelling thread
        self._calls.cancel()
        self.shared.wake()

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
