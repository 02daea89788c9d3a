"""`detached`: run an action on an event loop of its own, in a thread of its own.

The language server runs every action so: nothing the engine does (the SDK's import and setup,
a slow callback, a parse) can stall the server's loop, and the server never waits on a GPU
worker. The action's `CancelToken` crosses the two loops (it is thread-safe); its events come on
the action's thread, so the server's renderer hands them to its own loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


async def detached(work: Callable[[], Coroutine[Any, Any, T]], name: str) -> T:
    """`await work()` run by `asyncio.run` in a daemon thread; its result or exception comes
    back here. Cancelling this await leaves the thread to wind down on its own (its action's
    token is what stops it): a stuck GPU worker can never hold the caller's loop."""
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[T] = loop.create_future()

    def deliver(value: Any, failed: bool) -> None:
        if answer.done():
            return
        if failed:
            answer.set_exception(value)
        else:
            answer.set_result(value)

    def thread() -> None:
        try:
            value = asyncio.run(work())
        except BaseException as exc:
            _post(loop, deliver, exc, True)
        else:
            _post(loop, deliver, value, False)

    threading.Thread(target=thread, name=name, daemon=True).start()
    return await answer


def _post(loop: asyncio.AbstractEventLoop, call: Callable[..., None], *args: Any) -> None:
    with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits any more
        loop.call_soon_threadsafe(call, *args)
