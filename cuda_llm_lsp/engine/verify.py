"""`cuda-llm verify FILE [--kernel K] -- COMMAND` (docs/design.md "Capture", issue 39): after an
accepted edit and the user's rebuild, the program is run again with the capture library on the
same launch (the kernel's mangled name and launch number from the spec's capture): its
outputs against the capture's (the spec's tolerance; the inputs must be the capture's, else
the comparison says nothing), its duration and the program's wall time before and after.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from cuda_llm_lsp.engine.capture import RUN, CaptureRequest, CaptureRunner, run_capture
from cuda_llm_lsp.evaluate.captured import (
    CapturedDataError,
    capture_dir,
    read_buffer,
    with_captured_arguments,
)
from cuda_llm_lsp.evaluate.compare import as_float64, is_float
from cuda_llm_lsp.evaluate.judge import output_args
from cuda_llm_lsp.source.capture_manifest import CaptureError, read_capture
from cuda_llm_lsp.source.kernels import find_kernels
from cuda_llm_lsp.source.spec import parse_spec


@dataclass(frozen=True)
class VerifyOutcome:
    ok: bool  # the outputs match the capture's
    message: str
    lines: tuple[str, ...] = ()
    before_ms: float | None = None
    after_ms: float | None = None
    wall_before_s: float | None = None
    wall_after_s: float | None = None
    mismatches: dict[str, int] = field(default_factory=dict)  # output -> elements off


def _wall(directory: Path) -> float | None:
    try:
        value = json.loads((directory / RUN).read_text()).get("wall_s")
    except (OSError, ValueError, AttributeError):
        return None
    return float(value) if isinstance(value, (int, float)) else None


def verify(
    path: Path,
    command: tuple[str, ...],
    kernel: str | None = None,
    timeout_s: float | None = None,
    *,
    cwd: Path | None = None,
    runner: CaptureRunner | None = None,
    quiet: bool = False,
) -> VerifyOutcome:
    """Run `command` again with capture and compare with the spec's capture (`runner`:
    `run_capture`, or a test's fake; `quiet`: the program's output kept, not printed).

    Long because it is the verification's steps in order (the spec's capture read, the program
    run again, outputs, inputs and times compared, the report written); each failure returns
    early with what it found."""
    source = path.read_text(encoding="utf-8")
    kernels = [k for k in find_kernels(source) if k.spec is not None]
    if kernel:
        kernels = [k for k in kernels if k.name == kernel]
    specs = [(k, parse_spec(k, source)[0]) for k in kernels]
    chosen = [(k, s) for k, s in specs if s is not None and s.capture]
    if not chosen:
        return VerifyOutcome(
            False,
            f"{path} has no kernel{' ' + kernel if kernel else ''} whose spec names a capture "
            '(capture = "DIR", made by `cuda-llm spec --from-capture`)',
        )
    _, spec = chosen[0]
    try:
        old_dir = capture_dir(spec, path.resolve().parent)
        old = read_capture(old_dir)
        # "@captured" structs: the buffers they point to are compared too
        spec = with_captured_arguments(spec, path.resolve().parent)
    except (CapturedDataError, CaptureError, ValueError) as exc:
        return VerifyOutcome(False, str(exc))
    with tempfile.TemporaryDirectory(prefix="cuda-llm-verify-") as tmp:
        new_dir = Path(tmp) / "capture"
        request = CaptureRequest(
            command,
            new_dir,
            kernel=old.mangled,
            launch=old.launch,
            timeout_s=timeout_s,
            quiet=quiet,
            cwd=cwd,
        )
        outcome = (runner or run_capture)(request)
        if not outcome.ok or outcome.capture is None:
            return VerifyOutcome(False, f"the program run again: {outcome.message}")
        new = outcome.capture
        timed = spec.cases()[-1]
        lines: list[str] = []
        differing_inputs = []
        try:
            for arg in spec.args:
                if arg.is_pointer and arg.role != "out":
                    a = read_buffer(old_dir, old, spec, timed, arg.name, "before")
                    b = read_buffer(new_dir, new, spec, timed, arg.name, "before")
                    if a.tobytes() != b.tobytes():
                        differing_inputs.append(arg.name)
            mismatches: dict[str, int] = {}
            for name, dtype in output_args(spec):
                want = read_buffer(old_dir, old, spec, timed, name, "after")
                got = read_buffer(new_dir, new, spec, timed, name, "after")
                if is_float(dtype):
                    w, g = as_float64(want, dtype), as_float64(got, dtype)
                    bad = ~np.isclose(g, w, rtol=spec.rtol, atol=spec.atol, equal_nan=True)
                else:
                    w, g = want.astype(np.float64), got.astype(np.float64)
                    bad = want != got
                count = int(bad.sum())
                if count:
                    mismatches[name] = count
                    i = int(np.flatnonzero(bad)[0])
                    lines.append(
                        f"{name}: {count} of {bad.size} elements differ from the capture's "
                        f"(first at [{i}]: {g[i]!r}, captured {w[i]!r})"
                    )
        except CapturedDataError as exc:
            return VerifyOutcome(False, str(exc))
        wall_after = outcome.wall_s
    wall_before = _wall(old_dir)
    if differing_inputs:
        lines.insert(
            0,
            f"note: the inputs differ from the capture's ({', '.join(differing_inputs)}): the "
            "program is not deterministic here, so the outputs cannot be compared",
        )
    speed = old.duration_ms / new.duration_ms if new.duration_ms > 0 else None
    lines.append(
        f"kernel {spec.kernel}: {old.duration_ms:.4g} ms captured, {new.duration_ms:.4g} ms now"
        + (f" ({speed:.3g}x)" if speed else "")
    )
    if wall_before is not None:
        lines.append(
            f"program: {wall_before:.3g} s captured, {wall_after:.3g} s now (both with capture)"
        )
    else:
        lines.append(f"program: {wall_after:.3g} s now (with capture)")
    ok = not mismatches and not differing_inputs
    message = (
        "the outputs match the capture's"
        if ok
        else "the outputs differ from the capture's"
        if mismatches and not differing_inputs
        else "not verified"
    )
    return VerifyOutcome(
        ok,
        message,
        tuple(lines),
        old.duration_ms,
        new.duration_ms,
        wall_before,
        wall_after,
        mismatches,
    )
