"""`CancelToken`: the one way to cancel, passed from a front end down to the GPU worker.

A front end (the server's job, Ctrl-C in the CLI) makes one token per use case and cancels it;
everything below reads or awaits the same token: the FSR loop (`await token.wait()`), the tune
search between configurations (`token.cancelled`), the GPU lease (`on_cancel` stops the job's
call on the worker and refuses its later ones). It is thread-safe and loop-agnostic: `cancel`
may come from any thread or a signal handler, and `wait` works on whichever event loop awaits
it, so the engine can run on a thread of its own while the server's loop cancels.

It sits below every layer (beside `config`): `fsr`, `tune` and `engine` all take it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Iterator

log = logging.getLogger(__name__)


class CancelToken:
    """Set once, never cleared; callbacks run once, on the thread that cancels."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def cancel(self) -> None:
        """Cancel: the callbacks run now, in the order registered; a second cancel does nothing."""
        with self._lock:
            if self._event.is_set():
                return
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            _call(callback)

    def on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Run `callback` on cancel (now, when already cancelled); returns its removal."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)
                return lambda: self._forget(callback)
        _call(callback)
        return lambda: None

    def _forget(self, callback: Callable[[], None]) -> None:
        with self._lock:
            if callback in self._callbacks:
                self._callbacks.remove(callback)

    async def wait(self) -> None:
        """Return once cancelled, on the awaiting loop (woken from whichever thread cancels)."""
        if self._event.is_set():
            return
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            if not loop.is_closed():
                loop.call_soon_threadsafe(_resolve, woken)

        forget = self.on_cancel(wake)
        try:
            await woken
        finally:
            forget()

    def child(self) -> CancelToken:
        """A token cancelled with this one that can also be cancelled alone (a run's own stop
        of one stage: the FSR loop's tuning and profiles, `fsr.loop._OptimizeRun.cancel`)."""
        token = CancelToken()
        forget = self.on_cancel(token.cancel)
        token.on_cancel(forget)
        return token


@contextlib.contextmanager
def relayed(stop: CancelToken | None, callback: Callable[[], None]) -> Iterator[None]:
    """While the block runs, `stop`'s cancel runs `callback` (at once if `stop` is cancelled
    already: a cancel that came before the block began is not lost); after it, never."""
    forget = stop.on_cancel(callback) if stop is not None else None
    try:
        yield
    finally:
        if forget is not None:
            forget()


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _call(callback: Callable[[], None]) -> None:
    try:
        callback()
    except Exception:
        log.exception("a cancel callback failed")
