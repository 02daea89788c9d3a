"""Starting the GPU worker's process, and starting it early where a command knows it needs one.

`cuda-llm bench` spends about a second on its own imports (tree-sitter, NVRTC's wrappers, numpy:
measured on the H200's host with benchmarks/bench_phases.py) before its evaluator first asks for
the worker, which then spends most of another second starting (Python, numpy, the CUDA
context). `start_early` spawns the worker before those imports, so the two overlap; the first
`WorkerProcess` of that device adopts it (`adopt_early`). One that nobody adopts is killed at
exit. Only the process is early: the evaluator still waits for its `Ready` under its own
deadline, as for any other start.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import subprocess

from cuda_llm_lsp.compile.child_env import child_env
from cuda_llm_lsp.compile.tools import WORKER_LIMITS, neutral_cwd, python_command, spawn_options
from cuda_llm_lsp.evaluate.worker_driver import driver_missing

WORKER_MODULE = "cuda_llm_lsp.evaluate.worker"
# set: outcomes come from elsewhere (a recording, engine/build.py's EVALUATOR_ENV): no worker
EVALUATOR_ENV = "CUDA_LLM_EVALUATOR"

_early: dict[int, subprocess.Popen[bytes]] = {}


def spawn_worker(device: int) -> subprocess.Popen[bytes]:
    """The worker process of `device`, its framed pipe on stdin/stdout; OSError if it cannot."""
    env = child_env({"PYTHONUNBUFFERED": "1"})  # no API key: it runs model-written code
    return subprocess.Popen(
        python_command(WORKER_MODULE, "--device", str(device)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=neutral_cwd(),  # never the workspace: it is not on the worker's sys.path
        **spawn_options(WORKER_LIMITS, stdin=subprocess.PIPE),
    )


def start_early(device: int = 0) -> bool:
    """Spawn `device`'s worker now, for the evaluator to adopt later; False where none would
    answer (no driver, a recording stands in) or it could not start (the evaluator's own start
    reports why)."""
    if device in _early or os.environ.get(EVALUATOR_ENV) or driver_missing() is not None:
        return device in _early
    try:
        _early[device] = spawn_worker(device)
    except OSError:
        return False
    if len(_early) == 1:
        atexit.register(discard_early)
    return True


def adopt_early(device: int) -> subprocess.Popen[bytes] | None:
    """The early worker of `device` if it is still running (then it is the caller's)."""
    proc = _early.pop(device, None)
    if proc is not None and proc.poll() is not None:
        return None  # it died: a fresh start reports why
    return proc


def discard_early() -> None:
    """Kill the early workers nobody adopted (a command that ended before it needed one)."""
    while _early:
        _, proc = _early.popitem()
        with contextlib.suppress(OSError):
            proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
