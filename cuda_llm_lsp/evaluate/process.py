"""The worker process's lifecycle: spawn, watchdog, restart after a fault or hang, cancel, close.

The parent's half: `WorkerProcess` is one child running `cuda_llm_lsp.evaluate.worker` and its
framed pipe, every reply awaited against a deadline (a hung kernel can hang a driver call, so the
worker's own per-launch watchdog is not enough). `Worker` is the evaluator's handle on the worker
of one device: it starts one lazily, and after a fault, a hang or a cancel kills it and starts a
fresh one (with a fresh CUDA context) on the next request.

The child's half: `exit_with_parent`, so that no worker outlives the server that started it, and
`oneshot_command`, the worker run once over a file of requests under a tool (compute-sanitizer,
ncu).
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import threading
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

from cuda_llm_lsp.compile.tools import python_command
from cuda_llm_lsp.evaluate.protocol import (
    Failure,
    FrameReader,
    LoadReply,
    LoadRequest,
    Pong,
    QuitRequest,
    Ready,
    Reply,
    Request,
    UnloadRequest,
    as_reply,
    frame,
    write_message,
)
from cuda_llm_lsp.evaluate.types import EvaluationCancelled, KernelBinary, NoGpuError
from cuda_llm_lsp.evaluate.worker_start import WORKER_MODULE, adopt_early, spawn_worker
from cuda_llm_lsp.source.untrusted import neutralize

START_TIMEOUT_S = 120.0
QUIT_TIMEOUT_S = 5.0  # a worker asked to quit exits at once; this bounds a stuck one

R = TypeVar("R")


class WorkerProcess:
    """One worker process and its framed pipe, with a hard watchdog on every reply."""

    def __init__(self, device: int) -> None:
        self.device = device
        self.killed = False  # set by `signal_kill`: the process is on its way out
        self.stderr_tail: deque[str] = deque(maxlen=40)
        # one `start_early` spawned (`cuda-llm bench`), else a new one
        self.proc = adopt_early(device) or spawn_worker(device)
        threading.Thread(target=self._drain, daemon=True).start()
        self._frames = FrameReader()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in iter(self.proc.stderr.readline, b""):
            # the model's code printed this (device `printf`): never shown raw
            self.stderr_tail.append(neutralize(line.decode(errors="replace").rstrip()))

    def alive(self) -> bool:
        """Running and not yet killed (a killed process holding a CUDA context can take seconds
        to exit: it is no longer used meanwhile)."""
        return not self.killed and self.proc.poll() is None

    def signal_kill(self) -> None:
        """SIGKILL without waiting for the exit (a cancel, from any thread); `kill` reaps."""
        self.killed = True
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                self.proc.kill()

    def kill(self) -> None:
        """SIGKILL and reap (up to 30 s: the exit of a CUDA context takes a while)."""
        self.signal_kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=30)

    def quit(self) -> None:
        """Ask the worker to exit and wait until it has (killed if it does not within
        `QUIT_TIMEOUT_S`): no fixed sleep, the wait ends when the process does."""
        if self.alive():
            try:
                self.send(QuitRequest())
                self.proc.wait(timeout=QUIT_TIMEOUT_S)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()

    def send(self, request: Request) -> None:
        assert self.proc.stdin is not None
        write_message(self.proc.stdin, request)

    def receive(self, timeout_s: float, cancelled: threading.Event) -> Reply | None:
        """The next reply; None on EOF (the process died or was killed), past the deadline or
        once `cancelled` is set."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        while True:
            message = self._frames.next()
            if message is not None:
                return as_reply(message)
            if cancelled.is_set():
                return None
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], min(left, 0.1))
            if ready:
                chunk = os.read(fd, 1 << 22)
                if not chunk:
                    return None
                self._frames.feed(chunk)


class Worker:
    """The worker of one device as the evaluator sees it: a request in, a reply out, whatever
    happens to the process in between (started lazily, restarted after it was lost).

    `request` never hangs past its deadline: a worker that does not answer in time gets a
    `timeout`, one that died a `fault` (both `fatal`: the process is killed and the next request
    starts a new one). `cancel()` may come from any thread and returns at once.
    """

    def __init__(self, device: int) -> None:
        self.device = device
        self.cancelled = threading.Event()
        self.restarts = 0  # processes started after the first
        self.process: WorkerProcess | None = None
        self._loaded: dict[tuple[bytes, str], LoadReply] = {}  # of the current process
        self._no_gpu: str | None = None

    def _current(self) -> WorkerProcess:
        """The live process, started (or restarted) if there is none."""
        if self._no_gpu:
            raise NoGpuError(self._no_gpu)
        if self.process is not None and self.process.alive():
            return self.process
        if self.process is not None:
            self.process.kill()  # reaped here, off the canceller's thread (a cancel only signals)
            self.restarts += 1
        self._loaded = {}
        try:
            process = WorkerProcess(self.device)
        except OSError as exc:
            raise NoGpuError(f"cannot start the GPU worker: {exc}") from exc
        self.process = process
        hello = process.receive(START_TIMEOUT_S, self.cancelled)
        if hello is None:
            process.kill()
            self.process = None
            if self.cancelled.is_set():
                raise EvaluationCancelled("cancelled")
            tail = "\n".join(process.stderr_tail)
            raise NoGpuError(f"the GPU worker did not start: {tail or 'no output'}")
        if not isinstance(hello, Ready):
            process.kill()
            self.process = None
            self._no_gpu = hello.message if isinstance(hello, Failure) else "no CUDA GPU"
            raise NoGpuError(self._no_gpu)
        return process

    def request(self, request: Request, timeout_s: float) -> Reply:
        """The worker's reply; raises `EvaluationCancelled` once cancelled, `RuntimeError` for a
        bug reported by the worker (status "error")."""
        process = self._current()
        with contextlib.suppress(OSError):  # the reply read below reports a dead process
            process.send(request)
        reply = process.receive(timeout_s, self.cancelled)
        if self.cancelled.is_set():
            process.kill()
            raise EvaluationCancelled("cancelled")
        if reply is None:
            hung = process.alive()
            process.kill()
            if hung:
                return Failure(
                    "timeout",
                    f"the GPU worker did not answer within {timeout_s:.0f} s (the kernel hangs)",
                    fatal=True,
                )
            tail = "; ".join(list(process.stderr_tail)[-5:])
            return Failure("fault", f"the GPU worker died ({tail or 'no output'})", fatal=True)
        if isinstance(reply, Failure):
            if reply.fatal:
                process.kill()
            if reply.status == "error":
                raise RuntimeError(f"GPU worker: {reply.message}")
        return reply

    def call(self, request: Request, answer: type[R], timeout_s: float) -> R | Failure:
        """`request`, whose reply is an `answer` or a `Failure` (anything else is our bug)."""
        reply = self.request(request, timeout_s)
        if isinstance(reply, Failure | answer):
            return reply  # type: ignore[return-value]  # (mypy does not narrow on type[R])
        raise RuntimeError(f"GPU worker: {type(request).__name__} answered by {reply!r}")

    def load(self, binary: KernelBinary) -> LoadReply | Failure:
        """The kernel loaded in the current process (once per process)."""
        k = (binary.cubin, binary.entry)
        if k in self._loaded and self.process is not None and self.process.alive():
            return self._loaded[k]
        reply = self.call(LoadRequest(binary.cubin, binary.entry), LoadReply, START_TIMEOUT_S)
        if isinstance(reply, LoadReply):
            self._loaded[k] = reply
        return reply

    def unload(self, binary: KernelBinary) -> None:
        """Unload `binary`'s module from the current process (if it holds it): its `__device__`
        state does not survive into the next evaluation, which loads it afresh."""
        reply = self._loaded.pop((binary.cubin, binary.entry), None)
        if reply is None or self.process is None or not self.process.alive():
            return
        self.call(UnloadRequest(reply.key), Pong, START_TIMEOUT_S)

    def cancel(self) -> None:
        """Stop the request in flight: the process is signalled, never waited for here (the
        language server cancels from its event loop); `request`, `_current` or `close` reap it."""
        self.cancelled.set()
        process = self.process
        if process is not None:
            process.signal_kill()

    def close(self) -> None:
        process = self.process
        self.process = None
        if process is not None:
            process.quit()


# --- the child's half ------------------------------------------------------------------------
def exit_with_parent(interval_s: float = 1.0) -> None:
    """Exits when the server that started this worker is gone (killed, say, by an editor that
    gave up on its shutdown): an orphaned worker would hold the GPU, and a hung kernel would spin
    on it forever. Polls from a daemon thread; the worker runs in its own session, so the
    server's process group signals do not reach it."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval_s)
        os._exit(4)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def write_requests(path: Path, requests: Sequence[Request]) -> None:
    """A one-shot file: the requests' frames, one after the other."""
    path.write_bytes(b"".join(frame(r) for r in requests))


def oneshot_command(path: Path, device: int) -> list[str]:
    """The command that runs the worker once over the requests in `path` (exit 0: all "ok")."""
    return python_command(WORKER_MODULE, "--oneshot", str(path), "--device", str(device))
