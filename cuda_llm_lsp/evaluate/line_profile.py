"""`cuda-llm profile` and the editor's Profile K: a kernel's timed case under Nsight Compute,
with the findings placed on the lines of the user's files.

`profile_lines(file_text, path, kernel, spec, settings, profiler)` is the use case on plain
data, once the kernel and its spec are found: build the kernel (NVRTC, `-lineinfo`, for the
profiling GPU), have the profiler capture ncu's source and raw pages of the spec's timed
case, read them (`evaluate.ncu_source`) and map each line back: the file NVRTC compiled is the
device unit (host code blanked, line numbers kept), so its lines are the user's lines; a line
in an included user header stays in that header and is shown in the editor on its `#include`
line; template instances need nothing more (their code carries the template's lines).

Profilers: `NcuProfiler` runs the evaluator's one-shot worker on the timed case (the same
inputs, seed and process isolation as the sanitizer's run) under `ncu` in a child process with
a scrubbed environment; `RecordedProfiler` answers with ncu output captured earlier (the
`profiles` of a `CUDA_LLM_EVALUATOR=recorded:PATH` recording): CPU tests and demos.
Without a GPU, without ncu, without counter permission or on a GPU ncu does not support:
`ProfileUnavailable`, one message saying what to do, no half result.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from cuda_llm_lsp.compile.arch import local_gpu_arch, resolve_arch
from cuda_llm_lsp.compile.child_env import child_env
from cuda_llm_lsp.compile.device_unit import DeviceUnit, build_device_unit
from cuda_llm_lsp.compile.tools import GPU_LIMITS, find_tool, spawn_options
from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.evaluate.candidate import build_binary, splice
from cuda_llm_lsp.evaluate.captured import with_captured_arguments
from cuda_llm_lsp.evaluate.inputs import InputError, host_inputs
from cuda_llm_lsp.evaluate.launch import case_launch
from cuda_llm_lsp.evaluate.ncu_source import (
    FLOP_METRICS,
    NcuOutputError,
    RawFinding,
    Summary,
    line_findings,
    parse_raw_page,
    parse_source_page,
    summary,
)
from cuda_llm_lsp.evaluate.process import oneshot_command, write_requests
from cuda_llm_lsp.evaluate.protocol import LoadRequest, Request, RunRequest
from cuda_llm_lsp.evaluate.types import KernelBinary
from cuda_llm_lsp.source.kernels import Kernel
from cuda_llm_lsp.source.spec import TestSpec
from cuda_llm_lsp.source.text import normalized

SECTIONS = ("SourceCounters", "Occupancy", "SpeedOfLight", "LaunchStats", "WarpStateStats")
EXTRA_METRICS = (*FLOP_METRICS, "dram__bytes.sum")
STEP_TIMEOUT_S = 120.0
PERMISSION_HELP = (
    "the GPU's performance counters are reserved to administrators (ERR_NVGPUCTRPERM): run as "
    "root, or allow them for all users (driver option NVreg_RestrictProfilingToAdminUsers=0; see "
    "https://developer.nvidia.com/ERR_NVGPUCTRPERM)"
)


class ProfileUnavailable(Exception):
    """No profile can be taken here (no GPU, no ncu, no counter permission, unsupported GPU)."""


class ProfileError(Exception):
    """This kernel cannot be profiled: it does not build, or the profiled run failed."""


@dataclass(frozen=True)
class NcuCapture:
    source_page: str  # `--page source --csv --print-source cuda,sass`
    raw_page: str  # `--page raw --csv`
    seconds: float = 0.0


class Profiler(Protocol):
    def arch(self, settings: Settings) -> str: ...  # the profiling GPU's architecture

    def capture(
        self, binary: KernelBinary, spec: TestSpec, spec_dir: Path | None
    ) -> NcuCapture: ...

    def cancel(self) -> None: ...  # from another thread: stop a capture at once


@dataclass(frozen=True)
class LineFinding:
    file: str  # the user's file, or the included header the line is in
    line: int  # 1-based in `file`
    kinds: tuple[str, ...]
    stall_share: float
    message: str
    metrics: dict[str, float | str]
    text: str = ""  # the line's source text
    anchor: int | None = None  # 0-based line of the profiled file that shows it (None: none)
    header: bool = False  # in an included header: shown on its `#include` line

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "line": self.line,
            "kinds": list(self.kinds),
            "stall_share": self.stall_share,
            "message": self.message,
            "metrics": self.metrics,
            "text": self.text,
        }


@dataclass(frozen=True)
class LineProfile:
    kernel: str
    device: str
    summary: Summary
    lines: tuple[LineFinding, ...]
    kernel_text: str = ""  # the kernel's definition profiled: findings go stale when it changes
    seconds: float = 0.0
    unplaced: int = field(default=0)  # findings in files outside the user's (toolkit headers)

    def to_json(self) -> dict[str, Any]:
        """The contract's JSON (README, docs/design.md)."""
        figures = {k: v for k, v in asdict(self.summary).items() if k != "device"}
        figures["text"] = self.summary.line()
        return {
            "kernel": self.kernel,
            "device": self.device,
            "summary": figures,
            "lines": [f.to_json() for f in self.lines],
        }


def profile_lines(
    file_text: str,
    path: Path | None,
    kernel: Kernel,
    spec: TestSpec,
    settings: Settings,
    profiler: Profiler,
    *,
    kernel_source: str | None = None,
) -> LineProfile:
    """Profile `kernel` of `file_text` (with `kernel_source` in place of the kernel: a
    candidate) on `spec`'s timed case; the caller found both (`engine.actions`' gate). Raises
    ProfileError or ProfileUnavailable."""
    kernel_name = kernel.name
    arch = profiler.arch(settings)
    binary = build_binary(
        file_text,
        path,
        kernel_name,
        settings,
        kernel_source=kernel_source,
        spec=spec,
        arch=arch,
    )
    if not isinstance(binary, KernelBinary):
        raise ProfileError(f"{kernel_name} does not build: {binary.message}")
    spec_dir = Path(path).resolve().parent if path is not None else None
    started = time.monotonic()
    captured = profiler.capture(binary, spec, spec_dir)
    try:
        instructions = parse_source_page(captured.source_page)
    except NcuOutputError as exc:
        raise ProfileError(f"ncu gave no per-line figures for {kernel_name}: {exc}") from exc
    figures = summary(parse_raw_page(captured.raw_page))
    text = file_text
    if kernel_source is not None:
        text = splice(file_text, kernel, kernel_source)
    unit = build_device_unit(text, path, settings.include_paths)
    placed = [
        _place(f, unit, text, path, settings.include_paths) for f in line_findings(instructions)
    ]
    mine = tuple(f for f in placed if f is not None)
    return LineProfile(
        kernel=kernel_name,
        device=figures.device,
        summary=figures,
        lines=mine,
        kernel_text=kernel.span.slice(file_text) if kernel_source is None else kernel_source,
        seconds=round(captured.seconds or time.monotonic() - started, 2),
        unplaced=len(placed) - len(mine),
    )


def _place(
    found: RawFinding,
    unit: DeviceUnit,
    text: str,
    path: Path | None,
    include_paths: tuple[str, ...],
) -> LineFinding | None:
    """`found` in the user's files: the profiled file itself, or one of its user headers."""
    where = found.path.replace("\\", "/")
    if _names(where, unit.name):
        lines = normalized(text).split("\n")
        shown = lines[found.line - 1].strip() if 0 < found.line <= len(lines) else ""
        return LineFinding(
            str(path) if path is not None else unit.name,
            found.line,
            found.kinds,
            found.stall_share,
            found.message,
            found.metrics,
            shown,
            found.line - 1,
        )
    for name in sorted(unit.headers, key=len, reverse=True):
        if not _names(where, name):
            continue
        header = _header_path(name, path, include_paths)
        body = unit.headers[name].split("\n")
        shown = body[found.line - 1].strip() if 0 < found.line <= len(body) else ""
        anchor = unit.include_lines.get(name)
        return LineFinding(
            header or name,
            found.line,
            found.kinds,
            found.stall_share,
            found.message,
            found.metrics,
            shown,
            anchor,
            header=True,
        )
    return None


def _names(where: str, name: str) -> bool:
    return where == name or where.endswith("/" + name.replace("\\", "/"))


def _header_path(name: str, path: Path | None, include_paths: tuple[str, ...]) -> str | None:
    bases = ([Path(path).resolve().parent] if path is not None else []) + [
        Path(p) for p in include_paths
    ]
    for base in bases:
        candidate = base / name
        if candidate.is_file():
            return str(candidate.resolve())
    return None


# --- profilers ---------------------------------------------------------------------------------


def ncu_path() -> str | None:
    return find_tool("ncu")


class NcuProfiler:
    """ncu on this machine's GPU `device` (0 by default), over the evaluator's one-shot worker:
    the worker runs the kernel on that device (`--device`), so ncu's counters are its."""

    def __init__(self, *, device: int = 0, timeout_s: float = STEP_TIMEOUT_S) -> None:
        self.device = device
        self.timeout_s = timeout_s
        self._cancelled = threading.Event()
        self._running: set[subprocess.Popen[str]] = set()
        self._lock = threading.Lock()

    def cancel(self) -> None:
        """Stop the capture in flight (ncu and the worker it runs: one process group)."""
        self._cancelled.set()
        with self._lock:
            for proc in self._running:
                _kill_group(proc)

    def arch(self, settings: Settings) -> str:
        if ncu_path() is None:
            raise ProfileUnavailable(
                "Nsight Compute's command-line profiler (ncu) is not on PATH: install Nsight "
                "Compute (it ships with the CUDA toolkit, e.g. /usr/local/cuda/bin/ncu) and put "
                "it on PATH"
            )
        if local_gpu_arch() is None:
            raise ProfileUnavailable("no CUDA GPU available: profiling needs a local NVIDIA GPU")
        return resolve_arch(None)  # the GPU's own, whatever `cudaLlm.arch` says

    def capture(self, binary: KernelBinary, spec: TestSpec, spec_dir: Path | None) -> NcuCapture:
        exe = ncu_path()
        if exe is None:
            raise ProfileUnavailable("ncu is not on PATH: install Nsight Compute")
        try:
            spec = with_captured_arguments(spec, spec_dir)  # "@captured" structs' buffers
            case = spec.cases()[-1]
            inputs = host_inputs(spec, case, seed=1, spec_dir=spec_dir)
            launch = case_launch(spec, case, inputs, None)
        except (InputError, ValueError) as exc:
            raise ProfileError(f"cannot prepare the timed case: {exc}") from exc
        requests: list[Request] = [
            LoadRequest(binary.cubin, binary.entry),
            RunRequest(launch, timeout_s=self.timeout_s, guards=False),
        ]
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="cuda-llm-profile-") as tmp:
            work = Path(tmp)
            write_requests(work / "requests.bin", requests)
            report = work / "profile"
            cmd = [
                exe,
                *[a for s in SECTIONS for a in ("--section", s)],
                "--metrics",
                ",".join(EXTRA_METRICS),
                "--import-source",
                "no",
                "-f",
                "-o",
                str(report),
                "--kernel-name-base",
                "mangled",
                "--kernel-name",
                f"regex:^{re.escape(binary.entry)}$",
                "--launch-count",
                "1",
                *oneshot_command(work / "requests.bin", self.device),
            ]
            done = self._run(cmd, work)
            rep = report.with_suffix(".ncu-rep")
            if not rep.is_file():
                raise _failure(done, binary.source_name)
            source = self._run(
                [
                    exe,
                    "--import",
                    str(rep),
                    "--page",
                    "source",
                    "--csv",
                    "--print-source",
                    "cuda,sass",
                ],
                work,
            )
            raw = self._run(
                [exe, "--import", str(rep), "--page", "raw", "--csv", "--print-units", "base"], work
            )
        return NcuCapture(source.stdout, raw.stdout, round(time.monotonic() - started, 2))

    def _run(self, cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
        """One ncu step in its own process group (a cancel or a timeout ends ncu and the worker
        it profiles together)."""
        with self._lock:
            if self._cancelled.is_set():
                raise ProfileError("cancelled")
            try:
                proc = subprocess.Popen(
                    cmd,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    cwd=cwd,
                    env=child_env({"PYTHONUNBUFFERED": "1"}),
                    **spawn_options(GPU_LIMITS),  # its own process group, stdin /dev/null
                )
            except OSError as exc:
                raise ProfileUnavailable(f"cannot run ncu: {exc}") from exc
            self._running.add(proc)
        try:
            out, err = proc.communicate(timeout=self.timeout_s)
        except subprocess.TimeoutExpired as exc:
            _kill_group(proc)
            proc.communicate()
            raise ProfileError(f"ncu took longer than {self.timeout_s:.0f} s") from exc
        finally:
            with self._lock:
                self._running.discard(proc)
        if self._cancelled.is_set():
            raise ProfileError("cancelled")
        return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _kill_group(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _failure(done: subprocess.CompletedProcess[str], kernel: str) -> Exception:
    """What a profiling run that left no report means, as the exception to raise."""
    output = f"{done.stdout}\n{done.stderr}"
    if "ERR_NVGPUCTRPERM" in output:
        return ProfileUnavailable(PERMISSION_HELP)
    lowered = output.lower()
    if "not supported" in lowered and ("device" in lowered or "gpu" in lowered):
        return ProfileUnavailable(f"ncu does not support this GPU: {_errors(output)}")
    if "no cuda-capable device" in lowered or "cuda_error_no_device" in lowered:
        return ProfileUnavailable("no CUDA GPU available: profiling needs a local NVIDIA GPU")
    return ProfileError(f"the profiled run of {kernel} failed: {_errors(output)}")


def _errors(output: str) -> str:
    lines = [
        line.strip() for line in output.splitlines() if "==ERROR==" in line or "==WARNING==" in line
    ]
    text = " ".join(lines) or " ".join(output.split()[-40:])
    return text[:600]


class RecordedProfiler:
    """ncu output captured earlier, per kernel name: for CPU tests and demos, never real use.

    A recording's `"profiles": {"KERNEL": {"source": "K.source.csv", "raw": "K.raw.csv",
    "arch": "sm_90"}}` (paths relative to the recording) gives each kernel's two pages.
    """

    def __init__(self, pages: dict[str, tuple[Path, Path]], arch: str = "sm_90") -> None:
        self.pages = pages
        self._arch = arch

    @classmethod
    def from_recording(cls, recording: Path) -> RecordedProfiler:
        data = json.loads(Path(recording).read_text(encoding="utf-8"))
        profiles = data.get("profiles") or {}
        base = Path(recording).parent
        pages = {
            name: (base / entry["source"], base / entry["raw"]) for name, entry in profiles.items()
        }
        arch = next((e.get("arch") for e in profiles.values() if e.get("arch")), "sm_90")
        return cls(pages, arch)

    def arch(self, settings: Settings) -> str:
        return self._arch

    def cancel(self) -> None:
        pass  # nothing runs

    def capture(self, binary: KernelBinary, spec: TestSpec, spec_dir: Path | None) -> NcuCapture:
        found = self.pages.get(binary.source_name)
        if found is None:
            raise ProfileUnavailable(f"no recorded profile of {binary.source_name}")
        source, raw = found
        return NcuCapture(source.read_text(encoding="utf-8"), raw.read_text(encoding="utf-8"))
