"""A run's lane to the GPU: every evaluator call on one thread, and the seeds those calls use.

One thread means the calls never overlap, even after a cancel; knowing whether one is running
lets a cancel stop the GPU work only when there is some.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import random
from collections.abc import Callable
from typing import Any, TypeVar

from cuda_llm_lsp.evaluate.types import Evaluator

T = TypeVar("T")


class GpuLane:
    """Runs calls that use `evaluator`'s GPU one at a time, off the event loop."""

    def __init__(self, evaluator: Evaluator) -> None:
        self.evaluator = evaluator
        self._calls = 0  # calls running or queued on the thread
        self._thread = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="fsr-gpu"
        )

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        self._calls += 1
        try:
            return await loop.run_in_executor(self._thread, lambda: fn(*args, **kwargs))
        finally:
            self._calls -= 1

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
