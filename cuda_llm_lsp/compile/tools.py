"""Every program the server and the CLI start: found by absolute path, started bounded.

A cloned repository is untrusted input (docs/design.md, "Trust"). Three rules follow for each
child process, whatever the workspace's trust:

- The program is found once, by absolute path, never in the workspace (`find_tool`): an empty,
  `.` or other relative `PATH` entry, or one inside a workspace folder (`set_workspace_roots`),
  is skipped, so a repository's `cu++filt` or `nvcc` never runs in place of the toolkit's.
- It never shares the server's channel and never outlives it (`spawn_options`): stdin is
  `/dev/null` unless the caller passes a pipe of its own; it runs in a session of its own (a
  timeout kills the whole group); on Linux it dies with the server (`PR_SET_PDEATHSIG`), and its
  address space and CPU time are capped (`Limits`; rlimits are inherited, so nvcc's `sh`, `cicc`,
  `ptxas` and host compiler have them too).
- Whatever it is given that nvcc's sub-steps could see through `/bin/sh` (nvcc runs them with
  arguments in double quotes) is a name we chose or one proved inert: `shell_inert`.

nvcc's sub-steps are not its own children's business: `guarded` runs a program under a small
guard of ours (`python -P -c GUARD PARENT -- program ...`) that kills the program's whole process
group when the server dies, so `sh`, `cicc`, `ptxas` and `gcc` end with it too
(`PR_SET_PDEATHSIG` is not inherited by a child's children).

Python children are started with `python_command` (`-P` on 3.11+, and a private working
directory, `neutral_cwd`): the workspace is never on their `sys.path`.
"""

from __future__ import annotations

import functools
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Characters inert inside and outside `/bin/sh`'s double quotes: no `$`, backquote, backslash,
#: quote, space, glob or redirection.
_INERT = re.compile(r"[A-Za-z0-9_./+,:=@%-]*")
_roots_lock = threading.Lock()
_workspace_roots: tuple[str, ...] = ()


def shell_inert(text: str) -> bool:
    """Whether `text` reads the same to `/bin/sh` quoted, unquoted or double-quoted."""
    return _INERT.fullmatch(text) is not None


def set_workspace_roots(roots: Iterable[str]) -> None:
    """The workspace folders (the server's): no program is ever run from inside them."""
    global _workspace_roots
    real = tuple(sorted({os.path.realpath(r) for r in roots if r}))
    with _roots_lock:
        _workspace_roots = real


def workspace_roots() -> tuple[str, ...]:
    with _roots_lock:
        return _workspace_roots


def inside(path: str | Path, roots: Iterable[str]) -> bool:
    """Whether `path` (symlinks resolved) is one of `roots` or lies under one."""
    real = os.path.realpath(path)
    return any(real == r or real.startswith(r.rstrip("/") + "/") for r in roots)


def usable_program(path: str | Path) -> bool:
    """An absolute, executable regular file outside the workspace folders."""
    text = str(path)
    return (
        os.path.isabs(text)
        and os.path.isfile(text)
        and os.access(text, os.X_OK)
        and not inside(text, workspace_roots())
    )


def find_tool(name: str) -> str | None:
    """`name`'s absolute path on `PATH`, skipping relative entries (empty, `.`) and entries in a
    workspace folder; None when there is none. Cached per `PATH` and workspace folders."""
    return _find(name, os.environ.get("PATH", ""), workspace_roots())


@functools.lru_cache(maxsize=64)
def _find(name: str, search: str, roots: tuple[str, ...]) -> str | None:
    for entry in search.split(os.pathsep):
        if not entry or not os.path.isabs(entry):
            continue
        candidate = os.path.join(entry, name)
        if usable_program(candidate):
            return candidate
    return None


def safe_search_path(value: str) -> str:
    """`PATH` without relative entries and entries in a workspace folder: what children search
    (nvcc finds the host compiler on it)."""
    roots = workspace_roots()
    kept = [
        entry
        for entry in value.split(os.pathsep)
        if entry and os.path.isabs(entry) and not inside(entry, roots)
    ]
    return os.pathsep.join(dict.fromkeys(kept))


# --- limits -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Limits:
    """What one child may use. `memory_mb`: address space (None for programs that load the CUDA
    driver, which maps far more than it uses); `cpu_s`: CPU seconds of each process."""

    memory_mb: int | None = 8192
    cpu_s: int | None = 600
    # PR_SET_PDEATHSIG: only for a child that lives no longer than the call that started it (the
    # signal fires when the starting *thread* ends, and a long-lived child may outlive it)
    with_parent: bool = True


def _tool_memory_mb() -> int:
    try:
        value = int(os.environ.get("CUDA_LLM_TOOL_MEMORY_MB", ""))
    except ValueError:
        return 8192
    return value if value > 0 else 8192


#: A host tool (nvcc and its sub-steps, g++, nm, readelf, cu++filt): the compile pool's kind of
#: bound. 8 GiB of address space (`CUDA_LLM_TOOL_MEMORY_MB` changes it): a CUTLASS
#: instantiation's cicc stays under 4 GiB, `#include "/dev/zero"` would take all there is.
TOOL_LIMITS = Limits(memory_mb=_tool_memory_mb())
#: A program that loads the CUDA driver (ncu, compute-sanitizer, nvidia-smi, the evaluator's
#: worker): no address-space cap; its time is bounded by its caller's timeout.
GPU_LIMITS = Limits(memory_mb=None, cpu_s=None)
#: The evaluator's long-lived worker: started from whatever thread first needs it, it watches its
#: parent itself (`evaluate.process.exit_with_parent`).
WORKER_LIMITS = Limits(memory_mb=None, cpu_s=None, with_parent=False)

_PR_SET_PDEATHSIG = 1


@functools.lru_cache(maxsize=1)
def _prctl() -> Callable[..., int] | None:
    """libc's prctl, looked up before any fork (the child must not load anything)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl  # type: ignore[no-any-return]
    except (OSError, AttributeError):
        return None


def _preexec(limits: Limits, parent: int) -> Callable[[], None]:
    prctl = _prctl()
    try:
        import resource
    except ImportError:  # not POSIX: nothing to set
        resource = None  # type: ignore[assignment]

    def child() -> None:
        if resource is not None:
            if limits.memory_mb is not None:
                size = limits.memory_mb * 1024 * 1024
                resource.setrlimit(resource.RLIMIT_AS, (size, size))
            if limits.cpu_s is not None:
                resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 5))
        if prctl is not None and limits.with_parent:
            prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != parent:  # the server died before prctl
                os._exit(1)

    return child


def spawn_options(
    limits: Limits = TOOL_LIMITS, *, stdin: Any = subprocess.DEVNULL
) -> dict[str, Any]:
    """The keyword arguments of `subprocess.Popen`/`run` for any child we start: stdin never the
    server's (pass `stdin=subprocess.PIPE` or `input=` for a pipe), a session of its own, the
    limits, death with the server. Started from a long-lived thread where that matters:
    `PR_SET_PDEATHSIG` fires when the *thread* that forked the child ends."""
    options: dict[str, Any] = {"close_fds": True, "start_new_session": True}
    if stdin is not None:
        options["stdin"] = stdin
    if os.name == "posix":
        options["preexec_fn"] = _preexec(limits, os.getpid())
    return options


# --- Python children ----------------------------------------------------------------------------


def python_command(module: str, *args: str) -> list[str]:
    """`python -m module args` that never imports from its working directory (`-P`, 3.11+; with
    `neutral_cwd` as cwd on every version). Not `-I`: PYTHONPATH stays (how the package is
    installed on GPU machines)."""
    safe = ["-P"] if sys.version_info >= (3, 11) else []
    return [sys.executable, *safe, "-m", module, *args]


@functools.lru_cache(maxsize=1)
def neutral_cwd() -> str:
    """A private empty directory of ours to start Python children in: never the workspace."""
    return tempfile.mkdtemp(prefix="cuda-llm-cwd-")


def run_tool(
    command: Sequence[str],
    *,
    input: str | None = None,
    timeout: float,
    env: dict[str, str],
    cwd: str | Path | None = None,
    limits: Limits = TOOL_LIMITS,
) -> subprocess.CompletedProcess[str]:
    """`subprocess.run` of a tool under `spawn_options` (text in and out, captured); `env`:
    `child_env()`'s."""
    options = spawn_options(limits, stdin=None if input is not None else subprocess.DEVNULL)
    return subprocess.run(
        list(command),
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=str(cwd) if cwd is not None else neutral_cwd(),
        check=False,
        **options,
    )


# --- the guard: a process group that dies with the server ---------------------------------------

# Run by `python -P -c` (nothing imported from the package, so it works however it is installed):
# argv = [PARENT, "--", program, ...]. When PARENT dies (PR_SET_PDEATHSIG SIGTERM, replacing
# spawn_options' SIGKILL) or sends SIGTERM, the whole process group is killed.
_GUARD = """
import ctypes, os, signal, subprocess, sys
parent = int(sys.argv[1])
signal.signal(signal.SIGTERM, lambda *_: os.killpg(0, signal.SIGKILL))
try:
    ctypes.CDLL(None).prctl(1, signal.SIGTERM)
except (OSError, AttributeError):
    pass
if os.getppid() != parent:
    sys.exit(1)
code = subprocess.Popen(sys.argv[3:], close_fds=False).wait()
sys.exit(code if code >= 0 else 128 - code)
"""


def guarded(command: Sequence[str]) -> list[str]:
    """`command` under the guard (Linux; elsewhere as it is). Start it with `spawn_options`: the
    guard leads the new process group that the program and all it starts belong to."""
    if not sys.platform.startswith("linux"):
        return list(command)
    safe = ["-P"] if sys.version_info >= (3, 11) else []
    return [sys.executable, *safe, "-c", _GUARD, str(os.getpid()), "--", *command]
