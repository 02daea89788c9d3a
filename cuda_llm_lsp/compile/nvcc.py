"""A whole CUDA file compiled by `nvcc`, host code included: proof that an edit still builds.

NVRTC (compile/nvrtc.py) sees device code only; an edit that rewrites launch sites
(source/launch_sites.py) changes host code, which only a whole-file compile checks. `nvcc` comes
from the `nvcc` extra (`cuda-toolkit[nvcc]`, the `nvidia/cu13/bin` of the wheels) and needs a host
C++ compiler (g++). The file is compiled to an object in a temporary directory (`-c`, nothing is
linked or run) with a timeout. The text compiled is the user's file after an edit: LLM output is
never compiled here except as that file, and nothing is executed. nvcc runs without our secrets
(`child_env`) in a process group of its own: past the timeout the whole group is killed (cicc,
ptxas and the host compiler it started too).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cuda_llm_lsp.compile.child_env import child_env
from cuda_llm_lsp.compile.nvrtc import parse_ptxas
from cuda_llm_lsp.compile.types import Diagnostic, Resources, Severity

#: Environment variable naming an `nvcc` to use instead of the one found.
NVCC_ENV = "CUDA_LLM_NVCC"
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

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.severity == "error")

    def message(self, lines: int = 20) -> str:
        """The first errors (or the log), for a refusal shown to a person."""
        if self.timed_out:
            return f"nvcc did not finish within {self.seconds:.0f} s"
        shown = [f"line {d.line}: {d.message}" for d in self.errors] or self.log.splitlines()
        text = "\n".join(shown[:lines])
        return text + (f"\n... ({len(shown) - lines} more)" if len(shown) > lines else "")


def find_nvcc() -> Path | None:
    """`$CUDA_LLM_NVCC`, else the toolkit wheels' `nvcc` next to this Python, else `PATH`'s."""
    given = os.environ.get(NVCC_ENV)
    if given:
        return Path(given) if Path(given).is_file() else None
    for root in _site_roots():
        for candidate in sorted(root.glob("nvidia/cu*/bin/nvcc"), reverse=True):
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return candidate
        legacy = root / "nvidia" / "cuda_nvcc" / "bin" / "nvcc"
        if legacy.is_file():
            return legacy
    found = shutil.which("nvcc")
    return Path(found) if found else None


def nvcc_missing() -> str | None:
    """Why the nvcc tier cannot run here (no nvcc, or no host compiler for it), else None."""
    if find_nvcc() is None:
        return (
            "nvcc not found: install the nvcc extra (pip install 'cuda-llm-lsp[nvcc]') or set "
            f"{NVCC_ENV}"
        )
    if shutil.which("g++") is None and shutil.which("c++") is None:
        return "nvcc found but no host C++ compiler (g++) on PATH"
    return None


def _site_roots() -> list[Path]:
    roots = [Path(p) for p in sys.path if p.endswith("site-packages")]
    return [r for r in roots if (r / "nvidia").is_dir()]


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
    std: str | None = None,
    extra_flags: Sequence[str] = (),
    resource_usage: bool = False,
    stop: Callable[[], bool] | None = None,
) -> NvccResult:
    """Compile `text` (the whole file, host and device code) to an object with `nvcc -c`.

    `path` is where the file lives: its directory is searched for `#include "..."` and its name is
    used in messages; `object_path`: where to keep the object (else it is deleted);
    `resource_usage`: ptxas reports every kernel's registers, spills and memory (`-Xptxas -v`);
    `stop`: asked while nvcc runs; when it says so the compile is killed (a newer text came).
    Raises `NvccUnavailable` when no nvcc is found; a compile that fails, outlives `timeout` or
    is stopped is a result, not an exception.
    """
    binary = nvcc or find_nvcc()
    if binary is None:
        raise NvccUnavailable(
            "nvcc not found: install the nvcc extra (pip install 'cuda-llm-lsp[nvcc]') or set "
            f"{NVCC_ENV}"
        )
    name = path.name if path is not None else "file.cu"
    with tempfile.TemporaryDirectory(prefix="cuda-llm-nvcc-") as tmp:
        source = Path(tmp) / (name if name.endswith(".cu") else name + ".cu")
        source.write_text(text, encoding="utf-8")
        out = object_path if object_path is not None else Path(tmp) / "out.o"
        command = [str(binary), "-c", str(source), "-o", str(out)]
        if arch:
            command += [gencode(arch)]
        if path is not None:
            command += ["-I", str(path.resolve().parent)]
        for include in include_paths:  # nvcc runs in the temporary directory: absolute paths
            command += ["-I", os.path.abspath(include)]
        command += [f"-D{d}" for d in defines if d.strip()]
        if std:
            command += [f"-std={std}"]
        command += list(extra_flags)
        if resource_usage:
            command += ["-Xptxas", "-v"]
        start = time.monotonic()
        with subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp,
            env=child_env(),
            start_new_session=True,  # its own process group: cicc, ptxas, gcc die with it
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
        log = (stdout + stderr).replace(str(source), name)
    diagnostics = tuple(_diagnostics(log, name))
    ok = process.returncode == 0
    if not ok and not any(d.severity == "error" for d in diagnostics):
        first = next((line for line in log.splitlines() if line.strip()), "nvcc failed")
        diagnostics += (Diagnostic(1, 1, 1, 1, "error", first),)
    resources = parse_ptxas(log) if resource_usage and ok else {}
    return NvccResult(ok, diagnostics, log, seconds, resources=resources)


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
