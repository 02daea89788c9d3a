"""The parent's side of the worker pipe: large replies arrive whole and in linear time.

A 16M-element case sends back buffers of 64 MB each; a reply buffer grown with `bytes +=`
made that quadratic (minutes per evaluation on the H100 machine's CPU). This reads a real
pipe fed by a thread, as the worker's stdout is read.
"""

from __future__ import annotations

import os
import threading
import time
from types import SimpleNamespace

from cuda_llm_lsp.evaluate.process import WorkerProcess
from cuda_llm_lsp.evaluate.protocol import Failure, FrameReader, Pong, Reply, write_message
from tests.support.load import slack


def _reader(payloads: list[Reply]) -> WorkerProcess:
    read_fd, write_fd = os.pipe()

    def feed() -> None:
        with os.fdopen(write_fd, "wb") as out:
            for payload in payloads:
                write_message(out, payload)

    threading.Thread(target=feed, daemon=True).start()
    process = WorkerProcess.__new__(WorkerProcess)
    process._frames = FrameReader()
    process.proc = SimpleNamespace(stdout=os.fdopen(read_fd, "rb"))  # type: ignore[assignment]
    return process


def test_large_replies_arrive_whole_and_fast() -> None:
    """Runs answer with summaries now; the framing still carries any size (64 MB here)."""
    big = "x" * (64 << 20)
    process = _reader([Failure("error", big), Pong()])
    start = time.perf_counter()
    first = process.receive(60.0, threading.Event())
    elapsed = time.perf_counter() - start
    assert isinstance(first, Failure) and first.message == big
    assert process.receive(5.0, threading.Event()) == Pong()  # framing kept
    assert elapsed < 10.0, f"a 64 MB reply took {elapsed:.1f} s"


def test_a_closed_pipe_is_end_of_file() -> None:
    process = _reader([])
    assert process.receive(5.0, threading.Event()) is None


def test_the_worker_exits_when_its_server_is_killed() -> None:
    """An editor that gives up on the server SIGKILLs it; its worker, busy with a hung kernel and
    in its own session (no group signal reaches it), must not live on holding the GPU."""
    import signal
    import subprocess
    import sys

    server_code = (
        "import threading, time\n"
        "from cuda_llm_lsp.evaluate.gpu import GpuEvaluator\n"
        "from cuda_llm_lsp.source.kernels import find_kernels\n"
        "from cuda_llm_lsp.source.spec import parse_spec\n"
        "from tests.unit.test_evaluator_rules import BASE, SOURCE, binary\n"
        "spec, _ = parse_spec(find_kernels(SOURCE)[0], SOURCE)\n"
        "ev = GpuEvaluator(launch_timeout_s=600.0)\n"
        "ev.device_facts()\n"
        "args = (BASE, binary('hang'), spec)\n"
        "threading.Thread(target=ev.evaluate, args=args, daemon=True).start()\n"
        "time.sleep(1.0)\n"  # the worker is inside the hung launch
        "print(ev._worker.process.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(
        os.environ,
        CUDA_LLM_LSP_DRIVER="tests.unit.fake_cuda_driver",
        PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
    )
    server = subprocess.Popen(
        [sys.executable, "-c", server_code], stdout=subprocess.PIPE, text=True, env=env, cwd=root
    )
    assert server.stdout is not None
    worker_pid = int(server.stdout.readline())
    os.kill(worker_pid, 0)  # busy, not gone
    os.kill(server.pid, signal.SIGKILL)
    server.wait()
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        try:
            os.kill(worker_pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(worker_pid, signal.SIGKILL)
    raise AssertionError("the worker outlived its killed server by 10 s")


class _SlowToDie:
    """A worker process holding a CUDA context: killed, it takes seconds to exit."""

    def __init__(self, exit_s: float) -> None:
        self.exit_s, self.signalled, self.waited = exit_s, 0, 0

    def poll(self) -> int | None:
        return None if not self.waited else -9

    def kill(self) -> None:
        self.signalled += 1

    def wait(self, timeout: float | None = None) -> int:
        time.sleep(min(self.exit_s, timeout or self.exit_s))
        self.waited += 1
        return -9


def test_a_cancel_signals_the_worker_and_returns_at_once() -> None:
    """The language server cancels a job from its event loop: waiting there for a dying worker
    (seconds with a CUDA context) froze hover and diagnostics. The cancel only signals; the
    next request (in its own thread) reaps the process before starting another."""
    from cuda_llm_lsp.evaluate.process import Worker

    slow = _SlowToDie(exit_s=3.0)
    process = WorkerProcess.__new__(WorkerProcess)
    process.proc = slow  # type: ignore[assignment]
    process.killed = False
    worker = Worker(0)
    worker.process = process
    start = time.perf_counter()
    worker.cancel()
    elapsed = time.perf_counter() - start
    assert slow.signalled == 1 and worker.cancelled.is_set()
    assert elapsed < 0.5 * slack(), f"the cancel waited {elapsed:.1f} s for the worker to exit"
    assert not process.alive()  # not used again: the next request starts a fresh one
    assert slow.waited == 0
    worker.close()  # closing reaps it
    assert slow.waited == 1
