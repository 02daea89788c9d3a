"""A run's lane to the GPU: evaluator calls off the event loop, and the seeds those calls use.

With one GPU every call runs on one thread, so the calls never overlap, even after a cancel.
With a `GpuPool` (several local GPUs, a Ray cluster) calls run on as many threads as the pool
lends devices: the pool gives each call one GPU to itself, so calls on one GPU still never
overlap while the candidates of a round are judged in parallel. Knowing whether one is running
lets a cancel stop the GPU work only when there is some.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import random
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from cuda_llm_lsp.evaluate.devices import GpuId, GpuPool
from cuda_llm_lsp.evaluate.types import EvalResult, Evaluator, KernelBinary

if TYPE_CHECKING:
    from cuda_llm_lsp.source.spec import TestSpec

T = TypeVar("T")
POOL_THREADS = 32  # at most `cudaLlm.candidates` calls at once; the pool lends the GPUs


class GpuLane:
    """Runs calls that use `evaluator`'s GPUs off the event loop: one at a time per GPU."""

    def __init__(self, evaluator: Evaluator) -> None:
        self.evaluator = evaluator
        self.pool = evaluator if isinstance(evaluator, GpuPool) else None
        self._calls = 0  # calls running or queued on the threads
        self._thread = concurrent.futures.ThreadPoolExecutor(
            max_workers=POOL_THREADS if self.pool else 1, thread_name_prefix="fsr-gpu"
        )

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        self._calls += 1
        try:
            return await loop.run_in_executor(self._thread, lambda: fn(*args, **kwargs))
        finally:
            self._calls -= 1

    async def evaluate(
        self,
        baseline: KernelBinary,
        candidate: KernelBinary,
        spec: TestSpec,
        *,
        spec_dir: Path | None = None,
        seed: int | None = None,
        on_gpu: Callable[[str], None] | None = None,
        candidate_spec: TestSpec | None = None,
    ) -> EvalResult:
        """`evaluator.evaluate`; with a pool, `on_gpu` hears (on the event loop) the label of the
        GPU the call was given, and again if it is re-run elsewhere after losing that GPU."""
        own: dict[str, TestSpec] = {"candidate_spec": candidate_spec} if candidate_spec else {}
        if self.pool is None or on_gpu is None:
            return await self.call(
                self.evaluator.evaluate,
                baseline,
                candidate,
                spec,
                spec_dir=spec_dir,
                seed=seed,
                **own,
            )
        loop = asyncio.get_running_loop()
        hear = on_gpu

        def heard(gpu: GpuId) -> None:
            loop.call_soon_threadsafe(hear, gpu.label)

        return await self.call(
            self.pool.evaluate,
            baseline,
            candidate,
            spec,
            spec_dir=spec_dir,
            seed=seed,
            on_device=heard,
            **own,
        )

    @property
    def busy(self) -> bool:
        return self._calls > 0

    def stop(self) -> None:
        """Cancel the evaluator's work in flight, if any; never raises."""
        if self.busy:
            with contextlib.suppress(Exception):
                self.evaluator.cancel()

    def close(self) -> None:
        self._thread.shutdown(wait=False)


class Seeds:
    """The run's seed (recorded in the result) and a fresh input seed for every evaluation."""

    def __init__(self, seed: int | None = None) -> None:
        self.seed = seed if seed is not None else random.randrange(1, 2**31)
        self._drawn = 0

    def next(self) -> int:
        self._drawn += 1
        return (self.seed * 7919 + self._drawn) % (2**31 - 1) or 1
