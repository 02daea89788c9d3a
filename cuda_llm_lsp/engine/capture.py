"""Capture use cases (docs/design.md "Capture", issue 39): run the user's program with the
capture library injected and say what happened; a test spec from a capture directory.

The program is the user's own, run only on their explicit action (the CLI, or the editor's
command with a user-level setting): as an argv list, never through a shell, stdin closed, its
environment the user's plus the capture's variables. The capture directory is made 0700; the
library writes its files 0600 and records only the chosen launch (never the environment).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cuda_llm_lsp.compile.capture_lib import CaptureBuildError, capture_library
from cuda_llm_lsp.source.capture_manifest import (
    MANIFEST,
    SEEN,
    TIMES,
    Capture,
    CaptureError,
    read_capture,
)
from cuda_llm_lsp.source.kernels import find_kernels
from cuda_llm_lsp.source.spec.from_capture import find_captured_kernel, spec_from_capture
from cuda_llm_lsp.source.text import Point, offset_of, replace_span

DEFAULT_MAX_BYTES = 2 << 30
RUN = "run.json"  # the program's wall time and exit status under capture (for `verify`)
_OUR_FILES = (MANIFEST, SEEN, TIMES, RUN)

__all__ = [
    "CAPTURES",
    "CaptureBuildError",
    "CaptureError",
    "CaptureOutcome",
    "CaptureRequest",
    "CaptureRunner",
    "CaptureSpecOutcome",
    "SpecFromCapture",
    "capture_directory",
    "capture_spec",
    "run_capture",
    "spec_for_file",
    "spec_for_source",
]


@dataclass(frozen=True)
class CaptureRequest:
    command: tuple[str, ...]
    out: Path
    kernel: str = ""
    launch: int = 1  # 1-based among the matching launches
    slowest: bool = False
    max_bytes: int = DEFAULT_MAX_BYTES
    timeout_s: float | None = None
    quiet: bool = False  # the program's stdout/stderr captured (tests, the editor)
    cwd: Path | None = None  # the program's working directory (None: ours)


@dataclass(frozen=True)
class CaptureOutcome:
    ok: bool
    message: str
    directory: Path
    capture: Capture | None = None
    seen: dict[str, int] = field(default_factory=dict)
    graph_launches: int = 0
    returncode: int | None = None
    wall_s: float = 0.0
    output: str = ""  # the program's output when `quiet`


def _prepare(out: Path) -> None:
    """`out` as an empty 0700 directory (a previous capture's files removed, nothing else)."""
    if out.exists():
        if not out.is_dir():
            raise CaptureError(f"{out} exists and is not a directory")
        entries = list(out.iterdir())
        ours = [e for e in entries if e.name in _OUR_FILES or e.name.endswith((".bin", ".tmp"))]
        if len(ours) != len(entries):
            raise CaptureError(
                f"{out} holds files that are not a capture's: choose another --out directory"
            )
        for e in ours:
            e.unlink()
    out.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(out, 0o700)


def _run_once(
    request: CaptureRequest, library: Path, mode: str, launch: int
) -> tuple[int | None, float, str, str | None]:
    """(return code, wall seconds, captured output, why it could not run)."""
    env = dict(os.environ)
    env.update(
        CUDA_INJECTION64_PATH=str(library),
        CUDA_LLM_CAPTURE_OUT=str(request.out.resolve()),
        CUDA_LLM_CAPTURE_KERNEL=request.kernel,
        CUDA_LLM_CAPTURE_LAUNCH=str(launch),
        CUDA_LLM_CAPTURE_MODE=mode,
        CUDA_LLM_CAPTURE_MAX_BYTES=str(request.max_bytes),
    )
    start = time.perf_counter()
    try:
        done = subprocess.run(
            list(request.command),
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=request.quiet,
            text=True,
            errors="replace",
            timeout=request.timeout_s,
            cwd=request.cwd,
            check=False,
        )
    except FileNotFoundError:
        where = f" (from {request.cwd})" if request.cwd else ""
        return None, 0.0, "", f"cannot run {request.command[0]!r}{where}: no such program"
    except NotADirectoryError:
        return None, 0.0, "", f"cannot run in {request.cwd}: not a directory"
    except PermissionError:
        return None, 0.0, "", f"cannot run {request.command[0]!r}: not executable"
    except subprocess.TimeoutExpired:
        return (
            None,
            time.perf_counter() - start,
            "",
            (f"the program did not finish within {request.timeout_s:g} s"),
        )
    output = (done.stdout or "") + (done.stderr or "") if request.quiet else ""
    return done.returncode, time.perf_counter() - start, output, None


@dataclass(frozen=True)
class _Seen:
    """seen.json: what the library saw (`found` false: it never started)."""

    kernels: dict[str, int] = field(default_factory=dict)
    graphs: int = 0
    runtime: int = 0  # runtime-API launches (the driver's should match them)
    found: bool = False
    recorded: int = 0  # launches recorded into graphs by stream capture


def _seen(out: Path) -> _Seen:
    try:
        doc = json.loads((out / SEEN).read_text())
    except (OSError, ValueError):
        return _Seen()
    if not isinstance(doc, dict):
        return _Seen()
    kernels = doc.get("kernels", {})
    counts = (
        {str(k): int(v) for k, v in kernels.items() if isinstance(v, int)}
        if isinstance(kernels, dict)
        else {}
    )
    number = lambda key: int(doc.get(key, 0) or 0)  # noqa: E731
    return _Seen(
        counts,
        number("graph_launches"),
        number("runtime_launches"),
        True,
        number("recorded_in_graphs"),
    )


def _exit_text(rc: int | None) -> str:
    if rc is None:
        return "did not run"
    if rc < 0:
        return f"was killed by signal {-rc} (it crashed)"
    return f"exited with status {rc}"


def _not_captured(request: CaptureRequest, rc: int | None, found: _Seen, launch: int) -> str:
    what = f"kernel matching {request.kernel!r}" if request.kernel else "kernel"
    seen, graphs = found.kernels, found.graphs
    if not found.found:
        return (
            f"nothing captured: the program {_exit_text(rc)} and the capture library never "
            "started (the program made no CUDA call, or it does not use the CUDA driver)"
        )
    listed = ", ".join(f"{name} ×{n}" for name, n in sorted(seen.items(), key=lambda kv: -kv[1]))
    matching = sum(n for name, n in seen.items() if request.kernel in name)
    lines = [f"nothing captured: the program {_exit_text(rc)}"]
    if not seen and found.runtime:
        lines.append(
            f"the CUDA runtime launched {found.runtime} kernels but the driver reported none of "
            "them to the capture library (this CUDA version is not supported by capture)"
        )
    if matching == 0:
        lines.append(f"it never launched a {what} directly")
    else:
        lines.append(f"it launched a {what} {matching} times, not {launch}")
    lines.append(f"kernels launched: {listed or 'none'}")
    if found.recorded:
        lines.append(
            f"{found.recorded} launches were recorded into CUDA graphs (stream capture), "
            "which are never captured"
        )
    if graphs:
        lines.append(
            f"it launched {graphs} CUDA graphs: kernels inside a graph are not captured "
            "(run the program with its CUDA graphs turned off)"
        )
    return "; ".join(lines)


def run_capture(request: CaptureRequest) -> CaptureOutcome:
    """Run the program once (twice for `slowest`: time every matching launch, then capture the
    slowest) and read what the library wrote; never raises for the program's own failures."""
    out = request.out
    try:
        _prepare(out)
        library = capture_library()
    except (CaptureError, CaptureBuildError, OSError) as exc:
        return CaptureOutcome(False, str(exc), out)
    if os.environ.get("CUDA_INJECTION64_PATH"):
        return CaptureOutcome(
            False,
            "CUDA_INJECTION64_PATH is already set (a profiler?): capture cannot inject its "
            "library alongside",
            out,
        )
    launch = request.launch
    if request.slowest:
        rc, wall, output, why = _run_once(request, library, "time", 1)
        if why:
            return CaptureOutcome(False, why, out, returncode=rc, wall_s=wall, output=output)
        try:
            times = json.loads((out / TIMES).read_text()).get("times", [])
        except (OSError, ValueError, AttributeError):
            times = []
        if not times:
            found = _seen(out)
            message = _not_captured(request, rc, found, 1)
            return CaptureOutcome(
                False, message, out, None, found.kernels, found.graphs, rc, wall, output
            )
        launch = int(max(times, key=lambda t: t[1])[0])
        _prepare(out)
    rc, wall, output, why = _run_once(request, library, "capture", launch)
    if why:
        return CaptureOutcome(False, why, out, returncode=rc, wall_s=wall, output=output)
    found = _seen(out)
    seen, graphs = found.kernels, found.graphs
    if not (out / MANIFEST).is_file():
        message = _not_captured(request, rc, found, launch)
        return CaptureOutcome(False, message, out, None, seen, graphs, rc, wall, output)
    try:
        capture = read_capture(out)
    except CaptureError as exc:
        return CaptureOutcome(False, str(exc), out, None, seen, graphs, rc, wall, output)
    run = out / RUN
    with contextlib.suppress(OSError):
        fd = os.open(run, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump({"version": 1, "wall_s": round(wall, 6), "returncode": rc}, f)
    message = (
        f"captured {capture.demangled or capture.mangled} (launch {capture.launch}): grid "
        f"{list(capture.grid)}, block {list(capture.block)}, smem {capture.smem}, "
        f"{capture.duration_ms:.4g} ms on {capture.device} into {out}"
    )
    if rc:
        message += f"; note: the program then {_exit_text(rc)}"
    return CaptureOutcome(True, message, out, capture, seen, graphs, rc, wall, output)


@dataclass(frozen=True)
class SpecFromCapture:
    kernel: str
    block: str  # the `/* @cuda-llm ... */` text
    text: str  # the file with the block above the kernel (an existing spec replaced)


def spec_for_file(path: Path, capture_dir: Path, kernel: str | None = None) -> SpecFromCapture:
    """The spec block for the captured kernel of `path`, its `capture` path relative to the
    file's directory (the capture must lie inside it, as an `inputs` hook must)."""
    source = path.read_text(encoding="utf-8")
    return spec_for_source(source, path.resolve().parent, capture_dir, kernel, str(path))


def spec_for_source(
    source: str, root: Path, capture_dir: Path, kernel: str | None = None, what: str = "the file"
) -> SpecFromCapture:
    """`spec_for_file` of a text (an editor's unsaved buffer) whose file lies in `root`."""
    capture = read_capture(capture_dir)
    kernels = find_kernels(source)
    if kernel:
        kernels = [k for k in kernels if k.name == kernel]
        if not kernels:
            raise CaptureError(f"{what} has no kernel {kernel!r}")
    found = find_captured_kernel(kernels, capture)
    where = capture_dir.resolve()
    if not where.is_relative_to(root):
        raise CaptureError(
            f"the capture directory {capture_dir} is outside {root}: the spec may only name "
            "one inside the .cu file's directory (capture again with --out there, or move it)"
        )
    relative = where.relative_to(root).as_posix()
    block = spec_from_capture(found, source, capture, relative)
    if found.spec:
        new = replace_span(source, found.spec.span, block.rstrip("\n"))
    else:
        at = offset_of(source, Point(found.span.start.line, 0))
        new = source[:at] + block + source[at:]
    return SpecFromCapture(found.name, block, new)


CaptureRunner = Callable[[CaptureRequest], CaptureOutcome]  # `run_capture`, or a test's fake
CAPTURES = Path(".cuda-llm") / "captures"  # the editor's captures, beside the .cu file


def capture_directory(path: Path, kernel: str) -> Path:
    """Where the editor's capture of `kernel` of `path` goes: inside the file's directory, so
    the spec may name it (`.cuda-llm/captures/<kernel>/`)."""
    safe = "".join(c if c.isalnum() or c == "_" else "_" for c in kernel) or "kernel"
    return path.resolve().parent / CAPTURES / safe


def _ignored(directory: Path) -> None:
    """`.cuda-llm/` made with a `.gitignore` of `*`: captures hold the program's data (up to
    `max_bytes`), never meant to be committed by accident."""
    with contextlib.suppress(OSError):
        directory.mkdir(mode=0o700, exist_ok=True)
        ignore = directory / ".gitignore"
        if not ignore.exists():
            ignore.write_text("# cuda-llm captures: your program's data\n*\n", encoding="utf-8")


@dataclass(frozen=True)
class CaptureSpecOutcome:
    """The editor's "Capture test spec from program": what the capture said, and the file's
    new text with the spec block (None when nothing was captured or no spec could be made)."""

    ok: bool
    message: str
    spec: SpecFromCapture | None = None
    capture: CaptureOutcome | None = None


def capture_spec(
    request: CaptureRequest,
    source: str,
    path: Path,
    kernel: str,
    runner: CaptureRunner | None = None,
) -> CaptureSpecOutcome:
    """Run the program for `kernel` (into `request.out`, inside the file's directory), then the
    spec of `source` (the editor's text of `path`) from what was captured."""
    _ignored(path.resolve().parent / CAPTURES.parts[0])
    outcome = (runner or run_capture)(request)
    if not outcome.ok:
        return CaptureSpecOutcome(False, outcome.message, None, outcome)
    try:
        spec = spec_for_source(source, path.resolve().parent, request.out, kernel, path.name)
    except (CaptureError, OSError, ValueError) as exc:
        return CaptureSpecOutcome(
            False, f"{outcome.message}; but no spec could be made: {exc}", None, outcome
        )
    return CaptureSpecOutcome(True, outcome.message, spec, outcome)


def copy_capture(src: Path, dst: Path) -> None:
    """A capture directory copied (0700 / 0600), e.g. next to the source file."""
    _prepare(dst)
    for entry in src.iterdir():
        if entry.name in _OUR_FILES or entry.name.endswith(".bin"):  # (run.json included)
            shutil.copyfile(entry, dst / entry.name)
            os.chmod(dst / entry.name, 0o600)
