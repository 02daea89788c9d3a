"""NVRTC in child processes: a crash, a hang or a runaway costs one compile, never the caller.

NVRTC is a C++ library in our address space: 3,000 nested parentheses overflow its stack
(SIGSEGV), a FIFO `#include`d in device code blocks its read forever, 30 levels of doubling macros
spin a core, and none of it can be interrupted from Python. So compiles run in a small pool of
`python -m cuda_llm_lsp.compile.isolated` processes, one request at a time each, over pipes
(length-prefixed pickles of our own dataclasses: both ends are this package). The caller waits
with a deadline: past it the child is killed and the compile reported as timed out; the limit is
the child's CPU time for that compile, and as much time blocked (neither on a core nor waiting in
the kernel's run queue for one, Linux's /proc/PID/schedstat), so a compile that only waited for a
busy machine's cores is not stopped however busy (it would lose the file's diagnostics for a
"diagnostics skipped" warning), and one that waits on nothing at all still ends; a child that
dies is reported as a compiler crash; either way the next compile gets a fresh process. Each child
caps its address space (RLIMIT_AS) and dies with its parent (PR_SET_PDEATHSIG).

The cache (`compile.cache`) stays in the caller: a hit never pays the round trip.

Precompiled headers (issue 38): front-end checks (`syntax_only`) of a unit whose header prefix a
process has compiled before use NVRTC's automatic PCH there (`-pch`: the headers parsed once,
kept in the process's private temporary folder), so typing in a file that includes
`<cooperative_groups.h>` (1-3 s of headers) does not parse them again at every edit. The pool
keeps a warm process per header prefix: the first check of a prefix runs plain (creating a PCH
costs half as much again, and the first diagnostics must not wait for it), then its header prefix
alone is compiled in the background with `-pch` to create it (`_prime`), and later checks of that
prefix, in any file, go to that process (one arriving while the PCH is being created runs
plainly beside it: waiting could take longer than a plain check). Headers parsed in under
`PRIME_MIN_CPU_S` get none (loading a PCH costs more). A PCH changes no diagnostic of the user's
file (headers that warn are never precompiled: a PCH would not repeat them); each process keeps
one PCH at most (its folder pruned after each compile) in a heap of `PCH_HEAP_MB`. The server
turns PCHs on (`use_pch`); a CLI run checks each file once, where creating one would only cost.

Across sessions (`cudaLlm.persistentPch`, a trusted workspace's: `use_pch(persistent=True)`):
an NVRTC PCH records its heap's address, which address-space randomization moves in every
process. So the processes that front-end check the user's files (and only those: code
generation, which compiles LLM candidates too, keeps randomization) start without it
(`compile.fixed_addresses`: `personality(ADDR_NO_RANDOMIZE)`, then it executes this module)
and reserve the heap first thing, at the same address in every session. `_prime` then writes
the prefix's PCH to the user's cache (`compile.pch_store`, `--create-pch`), and every later
check of that prefix, in this session or the next, in any such process, reads it
(`--use-pch`): the first diagnostics of a file opened in a new session no longer wait for its
headers. A file NVRTC turns down is deleted and the check compiled plainly; a process where
randomization could not be turned off (a container's seccomp rule) answers so, and the pool
falls back to the in-session PCH, with a log line.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
import logging
import os
import pickle
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, BinaryIO

from cuda_llm_lsp.compile import fixed_addresses, pch_store
from cuda_llm_lsp.compile.child_env import child_env
from cuda_llm_lsp.compile.fixed_addresses import ADDR_NO_RANDOMIZE
from cuda_llm_lsp.compile.tools import neutral_cwd, python_command
from cuda_llm_lsp.compile.types import (
    CompileOptions,
    CompileResult,
    DeviceUnit,
    Diagnostic,
    NvrtcUnavailable,
)

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 10.0  # `cudaLlm.compileTimeoutS`; the 2,930-line suite file takes ~2 s
DEFAULT_MEMORY_MB = 4096  # address space of one compile process (NVRTC loaded: ~200 MB)
DEFAULT_WORKERS = 3  # the server: two documents front-end checked at once, one generating code
CRASH_CODE = "compiler-crash"  # Diagnostic.code of a compile whose process died
TIMEOUT_CODE = "compile-timeout"  # Diagnostic.code of a compile killed at its deadline
# A compile's limit is CPU seconds; where the run-queue wait is unknown (no schedstat), its wall
# time may run this many times over; where it is known, `MAX_WALL_FACTOR` times over at most.
BUSY_FACTOR = 2.5
MAX_WALL_FACTOR = 20.0
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
# Diagnostic.code of a compile whose process was killed from outside (SIGKILL: the kernel's OOM
# killer, a parent thread's end, a shutdown): says nothing about the text, so never cached.
INTERRUPTED_CODE = "compile-interrupted"
_HEADER = struct.Struct(">Q")
_PTXAS_ENTRY = "Compiling entry function"  # one line of `-Xptxas -v` per kernel generated
_IN_HEADER = "in included file "  # what `nvrtc.parse_log` says of a header's message
_ROOT = Path(__file__).resolve().parents[2]  # the directory holding the package
# NVRTC's PCH heap in a compile process (reserved when it first uses a PCH; a fixed-address
# one: at its start): the headers of `<cooperative_groups.h>` with `<cuda_bf16.h>` take ~300 MB
# (256 MB: NVRTC's warning #639-D, no PCH; 320 MB works); a larger set is compiled plainly. The
# heap's size changes no PCH file's (303 MB with 320 or 512): it is address space, headroom
PCH_HEAP_MB = 512
PRIME_MIN_CPU_S = 0.5  # headers parsed faster than this get no PCH (loading one costs ~0.1 s)
# how long a front-end check waits for the busy process holding its headers' PCH (one check
# with it: 0.1-0.6 s on 2 cores; without it, a plain parse: 1.5-2.5 s)
HOLDER_WAIT_S = 2.0
_PCH_STOP = "\nstruct cuda_llm_pch_stop_;\n"  # ends a header prefix compiled alone to make a PCH
PCH_ENV = "CUDA_LLM_PCH"  # "0": no precompiled headers (compare, or a toolkit whose PCH fails)
# "1" in a compile process's environment: start without address-space randomization (`_Worker`)
FIXED_ENV = "CUDA_LLM_COMPILE_FIXED_ADDRESSES"
# What a compile process says of a request's PCH file (the third item of its reply)
USED, CREATED, REFUSED, RANDOMIZED = "used", "created", "refused", "randomized"
# the kept PCHs a pool's processes may turn down in a session before it keeps none (a loop of
# writing a 300 MB file NVRTC then refuses helps nobody)
MAX_REFUSALS = 2


@dataclass(frozen=True)
class Request:
    unit: DeviceUnit
    options: CompileOptions
    name_expressions: tuple[str, ...]
    syntax_only: bool = False
    pch: bool = False  # create or use an automatic precompiled header (front-end checks only)
    pch_file: str = ""  # a PCH kept across sessions: use it (`create_pch`: write it)
    create_pch: bool = False


class _Gone(Exception):
    """The child died (EOF on its pipe) or missed its deadline."""

    def __init__(self, reason: str, timed_out: bool, killed: bool = False) -> None:
        super().__init__(reason)
        self.timed_out = timed_out
        self.killed = killed  # by SIGKILL, from outside: not the compiler's own crash


def failed_result(options: CompileOptions, message: str, code: str) -> CompileResult:
    """A compile that produced nothing, with one error at the top of the file."""
    problem = Diagnostic(1, 1, 1, 2, "error", message, code=code)
    return CompileResult(ok=False, arch=options.arch, diagnostics=(problem,), log=message)


_SPAWNER = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="compile-spawner")
_HOME_PREFIX = "cuda-llm-compile-"  # + the pool's process id: its processes' TMPDIRs


def sweep_homes() -> None:
    """Remove the compile processes' folders that a pool which died without closing left (a
    PCH is ~300 MB): ours, named after a process that no longer runs."""
    try:
        found = list(Path(tempfile.gettempdir()).glob(f"{_HOME_PREFIX}*-*"))
    except OSError:
        return
    for home in found:
        try:
            pid = int(home.name[len(_HOME_PREFIX) :].split("-", 1)[0])
            if home.stat().st_uid != os.getuid() or pid == os.getpid():
                continue
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(home, ignore_errors=True)
        except (ValueError, OSError, AttributeError):
            continue


def _command(fixed: bool) -> list[str]:
    """A compile process's command: through `compile.fixed_addresses` (which turns
    address-space randomization off and executes this module) when `fixed`."""
    if fixed:
        return python_command("cuda_llm_lsp.compile.fixed_addresses")
    return python_command("cuda_llm_lsp.compile.isolated")


class _Worker:
    """One child process and its two pipes."""

    def __init__(self, memory_mb: int, nice: int = 0, fixed: bool = False) -> None:
        env = child_env()  # no API key: the child reads model-written code
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_ROOT), env.get("PYTHONPATH", "")) if p)
        env["CUDA_LLM_COMPILE_MEMORY_MB"] = str(memory_mb)
        # without address-space randomization: PCHs kept across sessions (front-end checks of
        # the user's files alone, `CompilePool._fixed`)
        self.fixed = fixed
        if fixed:
            env[FIXED_ENV] = "1"
        else:
            env.pop(FIXED_ENV, None)
        self.nice = nice
        # its own empty folder, ours alone (0700), as its TMPDIR: where NVRTC keeps the automatic
        # PCH (never a shared /tmp name another user could plant); removed with the process
        self.home = tempfile.mkdtemp(prefix=f"{_HOME_PREFIX}{os.getpid()}-")
        env["TMPDIR"] = self.home
        self.prefixes: set[str] = set()  # header prefixes it holds a PCH of (`pch_key`)
        # started from one long-lived thread: PR_SET_PDEATHSIG fires when the *thread* that
        # forked the child ends, and a compile may come from a short-lived thread (a tuning
        # run's pool), whose end would kill the processes it happened to start
        self.proc = _SPAWNER.submit(
            subprocess.Popen,
            _command(fixed),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            close_fds=True,
            cwd=neutral_cwd(),  # never the workspace: `-P` and this keep it off sys.path
        ).result()
        self.fd = self.proc.stdout.fileno() if self.proc.stdout else -1
        if nice > 0:  # raising a child's niceness needs no privilege
            with contextlib.suppress(AttributeError, OSError):
                own = os.getpriority(os.PRIO_PROCESS, 0)
                os.setpriority(os.PRIO_PROCESS, self.proc.pid, own + nice)

    def call(self, request: Request, timeout_s: float) -> tuple[str, Any, str]:
        payload = pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(_HEADER.pack(len(payload)) + payload)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise _Gone(self._death(), timed_out=False) from exc
        deadline = _Deadline(self.proc.pid, timeout_s)
        header = self._read(_HEADER.size, deadline)
        (size,) = _HEADER.unpack(header)
        reply: tuple[str, Any, str] = pickle.loads(self._read(size, deadline))
        return reply

    def _read(self, size: int, deadline: _Deadline) -> bytes:
        chunks: list[bytes] = []
        left = size
        while left:
            remaining = deadline.left()
            if remaining <= 0:
                raise _Gone("timed out", timed_out=True)
            try:
                ready, _, _ = select.select([self.fd], [], [], remaining)
                if not ready:
                    continue
                chunk = os.read(self.fd, min(left, 1 << 20))
            except (OSError, ValueError):  # the pipe was closed under us: `close` killed it
                chunk = b""
            if not chunk:
                reason = self._death()
                raise _Gone(reason, timed_out=False, killed="SIGKILL" in reason)
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def _death(self) -> str:
        try:
            code = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.kill()
            return "it stopped answering"
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            hint = " (stack overflow or memory limit?)" if name in ("SIGSEGV", "SIGABRT") else ""
            return f"it died with {name}{hint}"
        return f"it exited with status {code}"

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self.proc.kill()
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=2)
        for pipe in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(Exception):
                if pipe is not None:
                    pipe.close()
        shutil.rmtree(self.home, ignore_errors=True)


class _Deadline:
    """A compile's time limit: `timeout_s` of the child's CPU time for this compile, or as much
    time blocked (a child blocked on a read uses no CPU at all). Blocked is wall time neither on a
    core nor in the run queue, so waiting for a busy machine's cores never counts; without
    schedstat the wall time is capped at `BUSY_FACTOR` times the limit instead."""

    def __init__(self, pid: int, timeout_s: float) -> None:
        self.pid, self.timeout_s = pid, timeout_s
        self.start = time.monotonic()
        self.soft, self.hard = self.start + timeout_s, self.start + timeout_s * BUSY_FACTOR
        self.cpu_at_start = _cpu_seconds(pid)
        self.queued_at_start = _queued_seconds(pid)

    def left(self) -> float:
        """Seconds left to wait now; 0 or less: stop the compile."""
        now = time.monotonic()
        if now < self.soft:
            return self.soft - now
        cpu = _cpu_seconds(self.pid)
        if cpu is None or self.cpu_at_start is None:
            return self.soft - now  # CPU time unknown here: the wall deadline alone
        used = cpu - self.cpu_at_start
        queued = _queued_seconds(self.pid)
        if queued is not None and self.queued_at_start is not None:
            elapsed = now - self.start
            blocked = elapsed - used - (queued - self.queued_at_start)
            if elapsed >= self.timeout_s * MAX_WALL_FACTOR:
                return 0.0
            # neither can reach the limit sooner than this: each grows at most as fast as time
            left = min(self.timeout_s - used, self.timeout_s - blocked)
            self.soft = now + max(left, 0.0)
            return left if left > 0.01 else 0.0
        unused = self.timeout_s - used
        if unused > 0.05 and now < self.hard:  # waited for the cores, not compiled: wait on
            self.soft = min(now + unused, self.hard)
            return self.soft - now
        return 0.0


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds process `pid` has used (Linux's /proc), None if unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICKS
    except (OSError, IndexError, ValueError):
        return None


def _queued_seconds(pid: int) -> float | None:
    """Seconds process `pid`'s main thread has waited in the run queue for a core (Linux's
    /proc/PID/schedstat: on-CPU ns, run-queue ns, timeslices), None if unknown."""
    try:
        with open(f"/proc/{pid}/schedstat", "rb") as stat:
            return int(stat.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


class CompilePool:
    """Up to `size` compile processes, started on demand, replaced after a crash or a timeout."""

    BACKGROUND_NICE = 10  # the server's code generation processes (`background_nice`)

    def __init__(self, size: int = DEFAULT_WORKERS, memory_mb: int = DEFAULT_MEMORY_MB) -> None:
        self.size = size
        self.memory_mb = memory_mb
        self._idle: list[_Worker] = []
        self._busy: set[_Worker] = set()
        self._lock = threading.Lock()
        self._returned = threading.Condition(self._lock)  # a busy process came back idle
        self._slots = threading.BoundedSemaphore(size)
        self._closed = False
        self.compiles = 0  # requests answered by a child
        self.generations = 0  # of which not syntax-only
        self.kernels_generated = 0  # entry functions ptxas compiled (tests count them)
        # precompiled headers for front-end checks: the server's (`use_pch`); a CLI run checks
        # each file once, where creating a PCH would only cost
        self.pch = False
        # niceness of the processes that generate code (the server's: `BACKGROUND_NICE`), so
        # that on a busy machine the front-end checks the user waits for get the cores first;
        # 0: one kind of process for both (the CLI)
        self.background_nice = 0
        self._priming: set[str] = set()  # header prefixes whose PCH a process is creating
        self._prime_slot = threading.BoundedSemaphore(1)
        # prefixes primed once already (a PCH NVRTC would not create is not tried at each edit)
        self._tried: set[str] = set()
        self.primed = 0  # PCHs created (tests count them)
        self.pch_compiles = 0  # front-end checks that used a process holding the prefix's PCH
        # PCHs kept across sessions (`set_persistent`): their folder, None when off
        self.store: Path | None = None
        self.stored_uses = 0  # front-end checks that read a kept PCH (NVRTC said it used it)
        self.refusals = 0  # kept PCHs NVRTC turned down (each deleted)
        self._rest_pending = False  # `warm(first=True)` started one process: the rest to start

    @property
    def persistent(self) -> bool:
        return self.store is not None

    def use_pch(self, persistent: bool = False) -> None:
        """Precompile the headers of the files checked again and again (the editor's), unless
        `CUDA_LLM_PCH=0`; first remove what dead pools left. `persistent`: `set_persistent`."""
        self.pch = os.environ.get(PCH_ENV, "1") != "0"
        if self.pch:
            sweep_homes()
        self.set_persistent(persistent)

    def set_persistent(self, on: bool) -> None:
        """Keep the PCHs of front-end checks across sessions (`cudaLlm.persistentPch`, the
        user trusting the workspace): the processes doing them run without address-space
        randomization. Only a server's pool (PCHs on, code generation in processes of its own:
        `background_nice`) and on Linux; front-end processes of the other kind are replaced as
        they are taken. Off: nothing is written to, nor read from, the cache."""
        wanted = (
            on
            and self.pch
            and self.background_nice > 0
            and sys.platform.startswith("linux")
            and self.refusals < MAX_REFUSALS
        )
        store = pch_store.store_dir() if wanted else None
        with self._lock:
            was, self.store = self.store, store
        if store is not None and was is None:
            pch_store.evict(store)
            log.info("precompiled headers kept across sessions in %s", store)

    def _keep_none(self, why: str) -> None:
        """Fall back to the in-session PCH for the rest of the session: `why`, logged once."""
        with self._lock:
            was, self.store = self.store, None
        if was is not None:
            log.warning("no precompiled header is kept across sessions: %s", why)

    def _fixed(self, syntax_only: bool) -> bool:
        """Whether a compile process of this kind runs without address-space randomization: a
        front-end check of the user's file with kept PCHs on; never code generation (LLM
        candidates' code, and every other compile, keep the randomization)."""
        return syntax_only and self.store is not None

    def warm(self, *, first: bool = False) -> None:
        """Start the processes now (they load NVRTC), so the first compile does not wait.
        `first` (the editor's start): only the process the first front-end check takes, the
        others at that check. Started together, on two cores, they held the first check up
        by a third of a second: three Pythons importing and loading NVRTC at once."""
        with self._lock:
            if first:
                if not self._closed and not self._idle and not self._busy:
                    self._idle.append(_Worker(self.memory_mb, 0, self._fixed(True)))
                    self._rest_pending = True
                return
            self._rest_pending = False
            while not self._closed and len(self._idle) + len(self._busy) < self.size:
                background = self.background_nice and not any(
                    w.nice for w in (*self._idle, *self._busy)
                )
                nice = self.background_nice if background else 0
                self._idle.append(_Worker(self.memory_mb, nice, self._fixed(not background)))

    def compile(
        self,
        unit: DeviceUnit,
        options: CompileOptions,
        name_expressions: Sequence[str],
        *,
        syntax_only: bool = False,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> CompileResult:
        """`nvrtc.compile_unit` in a child; raises only NvrtcUnavailable."""
        key = pch_key(unit, options) if syntax_only and self.pch else None
        stored = self._stored(key)
        with self._slots:
            worker = self._take(None if stored else key, syntax_only)
            if self._rest_pending:  # they load while this compile runs
                self.warm()
            kept = str(stored) if stored is not None and worker.fixed else ""
            warm = not kept and key is not None and key in worker.prefixes
            request = Request(
                unit, options, tuple(name_expressions), syntax_only, pch=warm, pch_file=kept
            )
            crashed: _Gone | None = None
            try:
                kind, value, note = worker.call(request, timeout_s)
            except _Gone as gone:
                self._drop(worker)
                if gone.timed_out:
                    message = (
                        f"not compiled: NVRTC took longer than {timeout_s:g} s on this file and "
                        "was stopped (the limit: cudaLlm.compileTimeoutS in the editor, "
                        "--compile-timeout for cuda-llm check)"
                    )
                    return failed_result(options, message, TIMEOUT_CODE)
                if gone.killed:
                    message = (
                        f"not compiled: the compile process was stopped from outside ({gone}: "
                        "out of memory, or the server stopping); retried at the next change"
                    )
                    log.warning("compile process: %s", message)
                    return failed_result(options, message, INTERRUPTED_CODE)
                if not kept:
                    message = (
                        f"the compiler crashed on this file: {gone}; not retried until it changes"
                    )
                    log.warning("compile process: %s", message)
                    return failed_result(options, message, CRASH_CODE)
                crashed = gone  # with a kept PCH: perhaps the file's doing, not the text's
            except BaseException:
                self._drop(worker)
                raise
            else:
                self._give_back(worker)
        if crashed is not None and stored is not None:  # deleted, and the text compiled plainly
            self._noted(f"{REFUSED}: the process died with it ({crashed})", stored, key)
            return self.compile(
                unit, options, name_expressions, syntax_only=syntax_only, timeout_s=timeout_s
            )
        with self._lock:
            self.compiles += 1
            self.generations += 0 if syntax_only else 1
            self.pch_compiles += 1 if warm or note == USED else 0
            self.stored_uses += 1 if note == USED else 0
            if isinstance(value, CompileResult):
                self.kernels_generated += value.log.count(_PTXAS_ENTRY)
            # a PCH would not repeat what its headers say (warnings, notes on an #include line)
            prime = (
                key is not None
                and kind == "ok"
                and isinstance(value, CompileResult)
                and not any(d.message.startswith(_IN_HEADER) for d in value.diagnostics)
                and note != USED
                and self._wants_prime(key)
            )
        if stored is not None:
            self._noted(note, stored, key)
        if prime:
            assert key is not None
            threading.Thread(
                target=self._prime, args=(key, request, timeout_s), daemon=True, name="pch-prime"
            ).start()
        if kind == "unavailable":
            raise NvrtcUnavailable(str(value))
        if kind == "error":
            return failed_result(options, f"the compile failed: {value}", CRASH_CODE)
        assert isinstance(value, CompileResult)
        return value

    def close(self) -> None:
        """Kill every process (a blocked `compile` returns with a crash result)."""
        with self._lock:
            self._closed = True
            workers = [*self._idle, *self._busy]
            self._idle.clear()
        for worker in workers:
            worker.kill()

    def _stored(self, key: str | None) -> Path | None:
        """The kept PCH of `key`'s headers, when kept PCHs are on and it is there."""
        store = self.store
        if key is None or store is None:
            return None
        return pch_store.stored(store, pch_store.file_name(key, PCH_HEAP_MB))

    def _noted(self, note: str, stored: Path, key: str | None) -> None:
        """What a compile process said of the kept PCH `stored` it was given."""
        if note == USED:
            pch_store.touch(stored)  # eviction goes by last use
        elif note.startswith(REFUSED):
            pch_store.discard(stored)  # the check was compiled plainly; the prefix is primed again
            log.info("a kept precompiled header was turned down and deleted: %s", note)
            with self._lock:
                self.refusals += 1
                if key is not None:
                    self._tried.discard(key)
            if self.refusals >= MAX_REFUSALS:
                self._keep_none(f"NVRTC turned down {self.refusals} of them ({note})")
        elif note == RANDOMIZED:
            self._keep_none("address-space randomization could not be turned off")

    def _wants_prime(self, key: str) -> bool:
        """Under the lock: no process holds or is creating a PCH of `key`."""
        if key in self._priming or key in self._tried or self._closed:
            return False
        return not any(key in w.prefixes for w in (*self._idle, *self._busy))

    def _prime(self, key: str, request: Request, timeout_s: float) -> None:
        """Create the PCH of `key`'s headers in the background, from the header prefix alone
        (the headers' cost, not the file's), at most one per prefix and one at a time, in an
        idle process but outside the slots (a user's compile never waits for one: it starts a
        process beyond `size` if it must). Headers that parse in less than `PRIME_MIN_CPU_S`
        of CPU get none: loading a PCH would cost more."""
        if not self._prime_slot.acquire(blocking=False):
            return
        try:
            with self._lock:
                # an idle process with NVRTC loaded (a new one's start would count as the
                # headers' CPU time); none idle: the next check tries again
                fixed = self._fixed(True)
                idle = [
                    w
                    for w in self._idle
                    if w.nice == 0 and w.fixed == fixed and w.proc.poll() is None
                ]
                if not idle or not self._wants_prime(key):
                    return
                worker = idle[-1]
                self._idle.remove(worker)
                self._busy.add(worker)
                self._priming.add(key)
                if len(self._tried) > 1024:
                    self._tried.clear()
                self._tried.add(key)
            text = request.unit.text
            prefix = replace(request.unit, text=text[: prefix_end(text)] + _PCH_STOP)
            store = self.store if worker.fixed else None
            final = store / pch_store.file_name(key, PCH_HEAP_MB) if store is not None else None
            try:
                temp = pch_store.temp_path(final.parent, final.name) if final else None
            except OSError as exc:  # the cache refused a file (full, read-only): none kept
                self._keep_none(f"the cache refused a file: {exc}")
                with self._lock:
                    self._tried.discard(key)  # the in-session PCH, at the next check
                self._give_back(worker)
                return
            started = _cpu_seconds(worker.proc.pid)
            try:
                # creating costs ~1.5 x a plain check: the same limit, with that room
                alone = replace(request, unit=prefix, name_expressions=(), pch=temp is None)
                if temp is not None:  # kept across sessions: written to the cache
                    alone = replace(alone, pch_file=str(temp), create_pch=True)
                kind, _, note = worker.call(alone, timeout_s * 2)
            except BaseException as exc:
                self._drop(worker)
                if temp is not None:
                    pch_store.discard(temp)
                if isinstance(exc, _Gone):
                    return
                raise
            ended = _cpu_seconds(worker.proc.pid)
            heavy = started is None or ended is None or ended - started >= PRIME_MIN_CPU_S
            if temp is not None and final is not None:
                if kind == "ok" and note == CREATED and heavy and pch_store.commit(temp, final):
                    with self._lock:
                        self.primed += 1
                else:
                    pch_store.discard(temp)
                    if note == RANDOMIZED:  # the in-session PCH instead, at the next check
                        self._keep_none("address-space randomization could not be turned off")
                        with self._lock:
                            self._tried.discard(key)
            elif kind == "ok" and heavy and any(Path(worker.home).glob("__nvrtc_auto_pch_*/*.pch")):
                with self._lock:
                    self._tried.difference_update(worker.prefixes)  # its older PCH is gone
                    worker.prefixes = {key}  # the child keeps the newest PCH alone
                    self.primed += 1
            self._give_back(worker)
        except NvrtcUnavailable:  # the pool was closed meanwhile
            pass
        finally:
            with self._lock:
                self._priming.discard(key)
            self._prime_slot.release()

    def _take(self, key: str | None = None, syntax_only: bool = False) -> _Worker:
        """An idle process (a new one if none): for a front-end check of `key`, the one holding
        its PCH, waited for up to `HOLDER_WAIT_S` while it is busy (another check of the same
        headers: the editor's complete answer; without the PCH a check costs 3-5 times more);
        for code generation, preferably one holding none (warm ones stay free). Of the kind the
        compile needs: its niceness, and randomization off for a front-end check with kept PCHs
        only (`_fixed`), never for code generation."""
        deadline = time.monotonic() + HOLDER_WAIT_S
        with self._lock:
            while (
                key is not None
                and not self._closed
                and not any(key in w.prefixes for w in self._idle)
                and any(key in w.prefixes for w in self._busy)
                and self._returned.wait(max(0.0, deadline - time.monotonic()))
            ):
                pass  # woken by `_give_back` / `_drop`: look again
            if self._closed:
                raise _closed_error()
            nice = 0 if syntax_only else self.background_nice
            fixed = self._fixed(syntax_only)
            others = [
                w
                for w in self._idle
                if w.proc.poll() is not None or w.nice != nice or w.fixed != fixed
            ]
            for other in sorted(others, key=lambda w: bool(w.prefixes)):  # warm ones last
                # dead; or of the other kind, where one more process would pass `size`
                if other.proc.poll() is not None or len(self._idle) + len(self._busy) >= self.size:
                    other.kill()
                    self._idle.remove(other)
                    self._tried.difference_update(other.prefixes)
            alive = [w for w in self._idle if w.nice == nice and w.fixed == fixed]
            worker: _Worker | None = None
            if key is not None:
                worker = next((w for w in reversed(alive) if key in w.prefixes), None)
            if worker is None and not syntax_only:
                worker = next((w for w in reversed(alive) if not w.prefixes), None)
            if worker is None and alive:
                worker = alive[-1]
            if worker is None:
                worker = _Worker(self.memory_mb, nice, fixed)
            else:
                self._idle.remove(worker)
            self._busy.add(worker)
            return worker

    def _give_back(self, worker: _Worker) -> None:
        with self._lock:
            self._busy.discard(worker)
            if self._closed:
                worker.kill()
            else:
                self._idle.append(worker)
            self._returned.notify_all()

    def _drop(self, worker: _Worker) -> None:
        worker.kill()
        with self._lock:
            self._busy.discard(worker)
            self._returned.notify_all()
            self._tried.difference_update(worker.prefixes)  # its PCH may be created again


def pch_key(unit: DeviceUnit, options: CompileOptions) -> str:
    """What a front-end check's PCH depends on: the unit's lines before its first declaration
    (includes, macros, comments) and the options. Equal keys: the PCH of one serves the other
    (NVRTC checks the prefix itself: a key is only where a process is warm)."""
    digest = hashlib.sha256(repr(options).encode())
    digest.update(repr(sorted(unit.headers.items())).encode("utf-8", errors="surrogatepass"))
    digest.update(repr((unit.include_dirs, unit.toolkit_dirs)).encode())
    digest.update(repr(sorted(unit.external_headers.items())).encode())  # edited: a new PCH
    digest.update(unit.text[: prefix_end(unit.text)].encode("utf-8", errors="surrogatepass"))
    return digest.hexdigest()


def prefix_end(text: str) -> int:
    """Where `text`'s header prefix ends: the start of its first line that is not blank, a
    comment or a preprocessor line (NVRTC's PCH covers what comes before)."""
    at, in_comment = 0, False
    while at < len(text):
        end = text.find("\n", at)
        end = len(text) if end < 0 else end + 1
        stripped = text[at:end].strip()
        if in_comment:
            in_comment = "*/" not in stripped
        elif stripped.startswith("/*"):
            in_comment = "*/" not in stripped[2:]
        elif stripped and not stripped.startswith(("#", "//")):
            return at
        at = end
    return at


def _closed_error() -> NvrtcUnavailable:
    return NvrtcUnavailable("the compile processes were stopped (the server is exiting)")


_shared: CompilePool | None = None
_shared_lock = threading.Lock()


def shared_pool() -> CompilePool:
    """The process-wide pool (the CLI's and the server's compiles)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = CompilePool()
        return _shared


def close_shared_pool() -> None:
    """Kill the shared pool's processes (the server's `exit`); a later compile starts anew."""
    global _shared
    with _shared_lock:
        pool, _shared = _shared, None
    if pool is not None:
        pool.close()


# --- the child ---------------------------------------------------------------------------------


def _limit_self() -> None:
    """Bound this process's memory and end it with its parent (Linux); best effort elsewhere."""
    try:
        import resource

        megabytes = int(os.environ.get("CUDA_LLM_COMPILE_MEMORY_MB", DEFAULT_MEMORY_MB))
        limit = megabytes * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, ValueError, OSError):
        pass
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
            if os.getppid() == 1:  # the parent died before prctl
                os._exit(0)
        except (OSError, AttributeError):
            pass


def _read_frame(stream: BinaryIO) -> bytes | None:
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(header)
    data = stream.read(size)
    return data if len(data) == size else None


def serve(stdin: BinaryIO, stdout: BinaryIO, fixed: bool = False) -> None:
    """Answer requests until stdin closes: ("ok", CompileResult, note) | ("unavailable"|"error",
    str, note); the note says what became of the request's PCH file (USED, CREATED, "refused:
    why", RANDOMIZED: this process has randomized addresses and did not try it), else "".
    `fixed`: addresses are not randomized here, and the PCH heap is reserved first thing, at
    the address it has in every such process (a kept PCH file records it)."""
    from cuda_llm_lsp.compile.nvrtc import nvrtc_module

    with contextlib.suppress(NvrtcUnavailable):
        nvrtc_module()  # load libnvrtc before the first request
        if fixed:
            _pch_heap()
        _warm_up(fixed)
    while (frame := _read_frame(stdin)) is not None:
        request: Request = pickle.loads(frame)
        reply: tuple[str, Any, str]
        note = ""
        try:
            if request.pch:  # (a fixed-address process reserved its heap at its start)
                _pch_heap()
            result, note = _compile(request, fixed)
            reply = ("ok", result, note) if result is not None else ("error", note, note)
        except NvrtcUnavailable as exc:
            reply = ("unavailable", str(exc), note)
        except MemoryError:
            reply = ("error", "out of memory (the compile process's limit)", note)
        except Exception as exc:  # a bug of ours must still answer
            reply = ("error", f"{type(exc).__name__}: {exc}", note)
        if request.pch:
            _prune_pch()  # before the answer: the caller sees the folder as it stays
        payload = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
        stdout.write(_HEADER.pack(len(payload)) + payload)
        stdout.flush()


def _compile(request: Request, fixed: bool) -> tuple[CompileResult | None, str]:
    """`request` compiled, and what became of its PCH file; None: a PCH to create was not."""
    from cuda_llm_lsp.compile.nvrtc import PchRefused, compile_unit

    def plain(pch_file: str = "") -> CompileResult:
        return compile_unit(
            request.unit,
            request.options,
            request.name_expressions,
            syntax_only=request.syntax_only,
            pch=request.pch,
            pch_file=pch_file,
            create_pch=request.create_pch,
        )

    if not request.pch_file:
        return plain(), ""
    if not fixed:  # a kept PCH cannot load at a randomized address: not tried
        return (None if request.create_pch else plain()), RANDOMIZED
    try:
        return plain(request.pch_file), CREATED if request.create_pch else USED
    except PchRefused as exc:
        note = f"{REFUSED}: {exc}"
        return (None if request.create_pch else plain()), note


_WARM_UP = "__device__ int cuda_llm_warm_up_;\n"


def _warm_up(fixed: bool) -> None:
    """Compile a one-line unit before the first request: NVRTC's first compile in a process
    costs ~0.2 s more than the next (its own start), which the first check would wait for.
    In a fixed-address process the compile uses a PCH, so NVRTC maps its PCH heap now, at the
    same address in every such process: mapped later, after other compiles, it lands where
    their allocations left room, and a PCH kept by another process is refused there."""
    from cuda_llm_lsp.compile.nvrtc import compile_unit

    with contextlib.suppress(Exception):  # a failure here is the first request's to report
        compile_unit(
            DeviceUnit(_WARM_UP, "warm_up.cu", ()), CompileOptions(), (), syntax_only=True,
            pch=fixed,
        )  # fmt: skip
    if fixed:
        _prune_pch()


_heap_set = False


def _pch_heap() -> None:
    """Reserve NVRTC's PCH heap once (the default is too small for libcu++'s headers)."""
    global _heap_set
    if not _heap_set:
        from cuda_llm_lsp.compile.nvrtc import nvrtc_module

        nvrtc_module().nvrtcSetPCHHeapSize(PCH_HEAP_MB << 20)
        _heap_set = True


def _prune_pch() -> None:
    """Keep the newest PCH file alone in this process's temporary folder (disk bounded)."""
    folder = Path(os.environ.get("TMPDIR") or "/nonexistent")
    try:
        found = sorted(folder.glob("__nvrtc_auto_pch_*/*.pch"), key=lambda p: p.stat().st_mtime)
    except OSError:
        return
    for old in found[:-1]:
        with contextlib.suppress(OSError):
            old.unlink()


def _addresses_fixed() -> bool:
    """Whether this process runs without address-space randomization, as `FIXED_ENV` asked
    (`compile.fixed_addresses` started it); if not, a line on stderr (the server's log)."""
    if fixed_addresses.personality() & ADDR_NO_RANDOMIZE:
        return True
    print("compile process: address-space randomization is on: no PCH kept", file=sys.stderr)
    return False


def main() -> None:
    fixed = os.environ.get(FIXED_ENV) == "1" and _addresses_fixed()
    _limit_self()
    # Ctrl-C in a terminal reaches the whole process group: the parent decides what stops (a
    # compile killed by it would be reported, and cached, as a compiler crash)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The protocol gets a private copy of fd 1; anything NVRTC prints goes to stderr.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    serve(sys.stdin.buffer, out, fixed)


if __name__ == "__main__":
    main()
