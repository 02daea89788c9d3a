"""A whole CUDA file compiled by `nvcc`, host code included: proof that an edit still builds.

NVRTC (compile/nvrtc.py) sees device code only; an edit that rewrites launch sites
(source/launch_sites.py) changes host code, which only a whole-file compile checks. `nvcc` comes
from the `nvcc` extra (`cuda-toolkit[nvcc]`, the `nvidia/cu13/bin` of the wheels) and needs a host
C++ compiler (g++). The file is compiled to an object in a temporary directory (`-c`, nothing is
linked or run) with a timeout. The text compiled is the user's file after an edit: LLM output is
never compiled here except as that file, and nothing is executed. nvcc runs without our secrets
(`child_env`) in a process group of its own: past the timeout the whole group is killed (cicc,
ptxas and the host compiler it started too), and so is it when the server dies (`tools.guarded`).
nvcc runs its sub-steps through `/bin/sh`, so it sees only names and values we chose or proved
inert (`compile.nvcc_inputs`): the text as `unit.cu`, never the user's file name.

The evaluator's builder of last resort (`evaluate.nvcc_build`) uses `compile_file(cubin=True)`:
`nvcc -cubin`, device code only, no host object; `link_device_runtime` links a relocatable
cubin with the device runtime (`nvcc -dlink -cubin`).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cuda_llm_lsp.compile.child_env import child_env
from cuda_llm_lsp.compile.nvcc_inputs import UNIT_NAME, check_includes, prepare, unmap
from cuda_llm_lsp.compile.nvcc_path import NVCC_ENV, find_nvcc
from cuda_llm_lsp.compile.nvrtc import parse_ptxas
from cuda_llm_lsp.compile.tools import (
    TOOL_LIMITS,
    Limits,
    find_tool,
    guarded,
    shell_inert,
    spawn_options,
)
from cuda_llm_lsp.compile.types import Diagnostic, Resources, Severity

DEFAULT_TIMEOUT_S = 120.0
_POLL_S = 0.25  # how often a running compile asks whether it is still wanted
_EDG = re.compile(r"^(?P<file>.+?)\((?P<line>\d+)\): (?P<severity>error|warning|remark)"
                  r"(?: #(?P<code>[\w-]+))?: (?P<message>.*)$")  # fmt: skip
_GCC = re.compile(r"^(?P<file>.+?):(?P<line>\d+):(?P<column>\d+): (?P<severity>error|warning|"
                  r"fatal error|note): (?P<message>.*)$")  # fmt: skip


class NvccUnavailable(RuntimeError):
    """No `nvcc` found (install the `nvcc` extra: `cuda-toolkit[nvcc,cudart,crt,cccl]`)."""


@dataclass(frozen=True)
class NvccResult:
    ok: bool
    diagnostics: tuple[Diagnostic, ...]  # in the compiled file (`file` set for other files)
    log: str  # nvcc's output as printed, the temporary path replaced by the file's name
    seconds: float
    timed_out: bool = False
    stopped: bool = False  # given up because the caller no longer wanted it (`stop`)
    # ptxas's figures per entry function (mangled symbol), with `resource_usage`: every kernel
    # nvcc compiled, template instances that only host code launches included
    resources: dict[str, Resources] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)  # symbol -> as read (`compile.mangled`)
    refused: tuple[str, ...] = ()  # defines and include directories nvcc was not given, and why
    skipped: str | None = None  # why nvcc did not run at all (`compile.nvcc_inputs`)
    cubin: bytes | None = None  # with `cubin=True`: the device code ptxas wrote

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.severity == "error")

    def message(self, lines: int = 20) -> str:
        """The first errors (or the log), for a refusal shown to a person."""
        if self.timed_out:
            return f"nvcc did not finish within {self.seconds:.0f} s"
        if self.skipped:
            return self.skipped
        shown = [f"line {d.line}: {d.message}" for d in self.errors] or self.log.splitlines()
        text = "\n".join(shown[:lines])
        return text + (f"\n... ({len(shown) - lines} more)" if len(shown) > lines else "")


def nvcc_missing() -> str | None:
    """Why the nvcc tier cannot run here (no nvcc, or no host compiler for it), else None."""
    if find_nvcc() is None:
        return (
            "nvcc not found: install the nvcc extra (pip install 'cuda-llm-lsp[nvcc]') or set "
            f"{NVCC_ENV}"
        )
    if find_tool("g++") is None and find_tool("c++") is None:
        return "nvcc found but no host C++ compiler (g++) on PATH"
    return None


def gencode(arch: str) -> str:
    """The one target the check compiles for: `sm_90a` -> SASS for sm_90a from compute_90a.

    Not `-arch=sm_90a`: nvcc 13 reads that as compute_90a *and* compute_90 too, and ptxas then
    rejects the file's wgmma instructions for plain sm_90 (ThunderKittens; its Makefile says
    `-gencode arch=compute_90a,code=sm_90a`)."""
    number = arch.split("_", 1)[-1]
    return f"-gencode=arch=compute_{number},code=sm_{number}"


def compile_file(
    text: str,
    path: Path | None = None,
    *,
    include_paths: Sequence[str] = (),
    arch: str | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    nvcc: Path | None = None,
    object_path: Path | None = None,
    defines: Sequence[str] = (),
    define_sources: dict[str, str] | None = None,
    std: str | None = None,
    extra_flags: Sequence[str] = (),
    resource_usage: bool = False,
    stop: Callable[[], bool] | None = None,
    cubin: bool = False,
) -> NvccResult:
    """Compile `text` (the whole file, host and device code) to an object with `nvcc -c`.

    `cubin`: device code only, `nvcc -cubin` (the evaluator's builder of last resort): nvcc
    preprocesses the file with the host compiler and runs cicc and ptxas, but compiles no host
    object and links nothing; the cubin comes back in `NvccResult.cubin` (needs `arch`).

    `path` is where the file lives: its directory is searched for `#include "..."` and its name is
    used in messages; `object_path`: where to keep the object (else it is deleted);
    `resource_usage`: ptxas reports every kernel's registers, spills and memory (`-Xptxas -v`);
    `stop`: asked while nvcc runs; when it says so the compile is killed (a newer text came);
    `define_sources`: where each define came from, named when one is refused.
    nvcc sees only names and values `compile.nvcc_inputs` chose or proved inert, and reads only
    headers the fast tier would read (else it does not run: `skipped`).
    Raises `NvccUnavailable` when no nvcc is found; a compile that fails, outlives `timeout` or
    is stopped is a result, not an exception.

    Long because it is one guarded tool run in order (inputs proved inert, headers checked,
    the private directory written, nvcc run and its messages mapped back), each step able to
    end the compile with its own result.
    """
    binary = nvcc or find_nvcc()
    if binary is None:
        raise NvccUnavailable(
            "nvcc not found: install the nvcc extra (pip install 'cuda-llm-lsp[nvcc]') or set "
            f"{NVCC_ENV}"
        )
    name = path.name if path is not None else "file.cu"
    leading = ([gencode(arch)] if arch else []) + ([f"-std={std}"] if std else [])
    trailing = list(extra_flags) + (["-Xptxas", "-v"] if resource_usage else [])
    unsafe = [f for f in (*leading, *trailing) if not shell_inert(f)]
    if unsafe:  # ours or the allow-list's: never a repository's text
        return _skipped(f"nvcc not run: the option {unsafe[0][:80]!r} is not one nvcc is given")
    blocked = check_includes(text, path, include_paths)
    if blocked is not None:
        return _skipped(f"nvcc not run: {blocked}")
    with tempfile.TemporaryDirectory(prefix="cuda-llm-nvcc-", dir=_temp_root()) as tmp:
        source = Path(tmp) / UNIT_NAME  # never the user's name: nvcc's shell reads it
        source.write_text(text, encoding="utf-8")
        out = Path(tmp) / ("out.cubin" if cubin else "out.o")
        inputs = prepare(Path(tmp), path, include_paths, defines, define_sources)
        command = [str(binary), "-cubin" if cubin else "-c", str(source), "-o", str(out)]
        command += leading + inputs.include_args + inputs.define_args + trailing
        start = time.monotonic()
        with subprocess.Popen(
            guarded(command),  # the group (sh, cicc, ptxas, gcc) dies with the server
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp,
            env=child_env(),
            # stdin /dev/null, its own process group (cicc, ptxas, gcc die with it), address
            # space and CPU time capped, killed with the server
            **spawn_options(Limits(TOOL_LIMITS.memory_mb, int(timeout) + 30)),
        ) as process:
            while True:
                left = timeout - (time.monotonic() - start)
                try:
                    stdout, stderr = process.communicate(timeout=max(0.01, min(_POLL_S, left)))
                    break
                except subprocess.TimeoutExpired:
                    stopped = stop is not None and stop()
                    if stopped or left <= _POLL_S:
                        _kill_group(process)
                        seconds = time.monotonic() - start
                        return NvccResult(
                            False, (), "", seconds, timed_out=not stopped, stopped=stopped
                        )
        seconds = time.monotonic() - start
        log = unmap(stdout + stderr, Path(tmp), source, name, inputs.links)
        # read with the fixed name: the user's may hold a line break or a `(1): error:` of its own
        readable = unmap(stdout + stderr, Path(tmp), source, UNIT_NAME, inputs.links)
        if object_path is not None and out.is_file() and not cubin:
            shutil.copyfile(out, object_path)
        built = out.read_bytes() if cubin and process.returncode == 0 and out.is_file() else None
    diagnostics = tuple(_diagnostics(readable, UNIT_NAME))
    ok = process.returncode == 0
    if not ok and not any(d.severity == "error" for d in diagnostics):
        first = next((line for line in log.splitlines() if line.strip()), "nvcc failed")
        diagnostics += (Diagnostic(1, 1, 1, 1, "error", first),)
    resources = parse_ptxas(log) if resource_usage and ok else {}
    return NvccResult(
        ok,
        diagnostics,
        log,
        seconds,
        resources=resources,
        refused=tuple(inputs.refused),
        cubin=built,
    )


def _skipped(reason: str) -> NvccResult:
    """nvcc not run (a header it may not read, an option it may not get): the fast tier's view
    stays, with `reason` as a warning."""
    return NvccResult(False, (), reason, 0.0, skipped=reason)


def _temp_root() -> str | None:
    """Where the compile's directory goes: `TMPDIR` when its path is shell-inert, else /tmp."""
    root = tempfile.gettempdir()
    return None if shell_inert(root) else "/tmp"


def link_device_runtime(
    cubin: bytes, arch: str, *, timeout: float = DEFAULT_TIMEOUT_S, nvcc: Path | None = None
) -> tuple[bytes | None, str]:
    """A relocatable cubin (`-rdc=true`: device-side launches) linked with the device runtime
    (`nvcc -dlink -cubin ... -lcudadevrt`: nothing run; besides nvlink, nvcc compiles its own
    `crt/prelink.stub` with the host compiler, the cubin in it only as bytes of data, in an
    empty temporary directory), so that the driver can load it; (None, nvlink's log) when that
    fails or times out."""
    binary = nvcc or find_nvcc()
    if binary is None:
        raise NvccUnavailable(f"nvcc not found: set {NVCC_ENV}")
    with tempfile.TemporaryDirectory(prefix="cuda-llm-nvlink-") as tmp:
        given, out = Path(tmp) / "unit.cubin", Path(tmp) / "linked.cubin"
        given.write_bytes(cubin)
        command = [str(binary), "-dlink", "-cubin", gencode(arch), str(given)]
        command += ["-lcudadevrt", "-o", str(out)]
        with subprocess.Popen(
            guarded(command),  # nvlink dies with the server too
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp,
            env=child_env(),
            # stdin /dev/null, its own process group, address space and CPU time capped
            **spawn_options(Limits(TOOL_LIMITS.memory_mb, int(timeout) + 30)),
        ) as process:
            try:
                stdout, stderr = process.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                _kill_group(process)
                return None, f"nvlink did not finish within {timeout:.0f} s"
        if process.returncode != 0 or not out.is_file():
            return None, (stdout + stderr).strip() or "nvlink failed"
        return out.read_bytes(), ""


def _kill_group(process: subprocess.Popen[str]) -> None:
    """Kill nvcc and every process it started (its group), and reap nvcc."""
    killpg = getattr(os, "killpg", None)  # POSIX; elsewhere nvcc alone
    if killpg is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            killpg(process.pid, signal.SIGKILL)
    process.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.communicate(timeout=5)  # the pipes close once the group is gone


def _diagnostics(log: str, name: str) -> list[Diagnostic]:
    found: list[Diagnostic] = []
    for line in log.splitlines():
        m = _EDG.match(line) or _GCC.match(line)
        if m is None:
            continue
        kind = m.group("severity")
        if kind == "note":
            continue
        severity: Severity = "error" if "error" in kind else "warning"
        column = int(m.groupdict().get("column") or 1)
        row = int(m.group("line"))
        file = None if m.group("file") == name else m.group("file")
        code = m.groupdict().get("code")
        found.append(
            Diagnostic(
                row, column, row, column + 1, severity, m.group("message").strip(), code, file
            )
        )
    return found
