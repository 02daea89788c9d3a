"""`GpuService`: the one way a use case reaches the GPUs.

It owns the evaluator for the current settings (`cudaLlm.gpus`, `cudaLlm.cluster`; the CLI's
`--gpus`, `--cluster`), made on the first lease, and hands out leases: a lease is one use case's
handle on it (`job_view`), cancelled by that use case's `CancelToken`. When the settings change
(`retire`), the next lease gets a new evaluator and the old one is closed when its last lease
returns; each evaluator carries its own count of leases, so no evaluator is ever closed under
a job, nor kept after its last one.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import TypeVar

from cuda_llm_lsp.cancel import CancelToken
from cuda_llm_lsp.engine.job_view import GpuGate, JobEvaluator, JobPool, in_thread, job_view
from cuda_llm_lsp.evaluate.types import EvaluationCancelled, Evaluator

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(eq=False)
class _Held:
    """An evaluator and the leases out on it."""

    evaluator: Evaluator
    leases: int = 0
    retired: bool = False
    gate: GpuGate = field(default_factory=GpuGate)  # one call at a time on one worker


class GpuLease:
    """One use case's GPU: `evaluator` (its job view); `release` (or leaving the `with`) gives
    it back. Cancelling the token the lease was taken with stops its GPU work at once."""

    def __init__(self, service: GpuService, held: _Held, token: CancelToken) -> None:
        self._service, self._held = service, held
        self.token = token
        self.evaluator: JobEvaluator | JobPool = job_view(held.evaluator, held.gate, token)
        self._released = False

    def alone(self, work: Callable[[], T]) -> T:
        """`work()` (blocking) while no other lease's call runs on this GPU (one GPU: its gate;
        several: as it comes). Raises EvaluationCancelled if cancelled while waiting."""
        if isinstance(self.evaluator, JobPool):
            return work()
        if not self._held.gate.enter(self.token):
            raise EvaluationCancelled("cancelled")
        try:
            return work()
        finally:
            self._held.gate.leave()

    def release(self) -> None:
        if not self._released:
            self._released = True
            self._service._give_back(self._held)

    def __enter__(self) -> GpuLease:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()


class GpuService:
    """The evaluator for the current settings, made by `factory` on first use; see the module.

    `lease` blocks (the factory may start a pool or connect to a cluster): call it from a
    thread. Raises what the factory raises (`ValueError` for bad `gpus`/`cluster`)."""

    def __init__(self, factory: Callable[[], Evaluator]) -> None:
        self.factory = factory
        self._current: _Held | None = None
        self._open: list[_Held] = []  # the current one and retired ones with leases out
        self._lock = threading.Lock()

    def lease(self, token: CancelToken | None = None) -> GpuLease:
        with self._lock:
            if self._current is None:
                self._current = _Held(self.factory())
                self._open.append(self._current)
            held = self._current
            held.leases += 1  # in the same hold: a retire now cannot close it under the lease
        return GpuLease(self, held, token or CancelToken())

    def retire(self) -> None:
        """The GPU settings changed: the next lease gets a new evaluator; the old one is closed
        now, or when its last lease returns."""
        with self._lock:
            old, self._current = self._current, None
            if old is None:
                return
            old.retired = True
            unused = old.leases == 0
            if unused:
                self._open.remove(old)
        if unused:
            in_thread(lambda: _close(old.evaluator), "cuda-llm-retire")

    def close(self) -> None:
        """Shutdown: close every evaluator now, in use or not (their jobs were cancelled)."""
        with self._lock:
            held, self._open, self._current = self._open, [], None
        for one in held:
            one.retired = True
            _close(one.evaluator)

    def _give_back(self, held: _Held) -> None:
        with self._lock:
            held.leases -= 1
            unused = held.retired and held.leases == 0 and held in self._open
            if unused:
                self._open.remove(held)
        if unused:
            in_thread(lambda: _close(held.evaluator), "cuda-llm-retire")


def _close(evaluator: Evaluator) -> None:
    try:
        evaluator.close()
    except Exception:
        log.exception("closing the evaluator failed")
