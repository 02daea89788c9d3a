"""compute-sanitizer pass (memcheck, racecheck) over a kernel's test cases.

Runs the worker in one-shot mode under `compute-sanitizer --tool T` in a child process with a
timeout. The FSR loop runs it on a winner before offering it: a kernel that passes the output
checks can still read out of bounds (inside its own allocations) or race on shared memory.

Both tools run the small cases (up to `MAX_CASE_BYTES`). memcheck also covers the code paths of
the timed case (the spec's last, often far larger): it runs that case itself, in a run of its own
within `timeout_s`; when that does not finish, a case of the same shape class (every size with
the same residue modulo `SHAPE_MODULUS`, as small as that allows), so tails and tile edges the
timed case takes are still checked.
"""

from __future__ import annotations

import re
import secrets
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from cuda_llm_lsp.compile.child_env import child_env
from cuda_llm_lsp.compile.tools import GPU_LIMITS, find_tool, neutral_cwd, spawn_options
from cuda_llm_lsp.evaluate.captured import with_captured_arguments
from cuda_llm_lsp.evaluate.inputs import host_inputs
from cuda_llm_lsp.evaluate.launch import case_bytes, case_launch
from cuda_llm_lsp.evaluate.process import oneshot_command, write_requests
from cuda_llm_lsp.evaluate.protocol import LoadRequest, Request, RunRequest
from cuda_llm_lsp.evaluate.types import EvalResult, KernelBinary
from cuda_llm_lsp.source.spec import Case, TestSpec
from cuda_llm_lsp.source.spec.cases import evaluate_cases

MAX_CASE_BYTES = 16 << 20  # larger cases only as the timed case: the sanitizer is ~100x slower
MAX_TIMED_BYTES = 2 << 30  # the timed case under memcheck up to this; beyond, its shape class
SHAPE_MODULUS = 128  # tails of tiles and warps: a shape class keeps each size modulo this
REPORT_LINES = 60


def sanitizer_path() -> str | None:
    return find_tool("compute-sanitizer")


def _requests(
    binary: KernelBinary, spec: TestSpec, cases: Sequence[Case], seed: int, spec_dir: Path | None
) -> list[Request]:
    reqs: list[Request] = [LoadRequest(binary.cubin, binary.entry)]
    spec = with_captured_arguments(spec, spec_dir)  # "@captured" structs and their buffers
    for case in cases:
        inputs = host_inputs(spec, case, seed, spec_dir=spec_dir)  # the evaluator's values
        launch = case_launch(spec, case, inputs, None)
        reqs.append(RunRequest(launch, timeout_s=120.0, guards=False))
    return reqs


def run_sanitizer(
    binary: KernelBinary,
    spec: TestSpec,
    spec_dir: Path | None = None,
    tools: Sequence[str] = ("memcheck", "racecheck"),
    *,
    seed: int | None = None,
    timeout_s: float = 300.0,
    device: int = 0,
) -> EvalResult:
    """`ok`, or `sanitizer` with the tool's report; `ok` with a note when it is not installed.

    Long because it is one tool run in order: inputs written, the program built, each tool
    run and its report read back."""
    seed = secrets.randbits(63) if seed is None else seed
    exe = sanitizer_path()
    if exe is None:
        return EvalResult("ok", "compute-sanitizer is not on PATH: sanitizer pass skipped", seed)
    all_cases = spec.cases()
    cases = [c for c in all_cases if case_bytes(spec, c) <= MAX_CASE_BYTES]
    timed = all_cases[-1] if all_cases and all_cases[-1] not in cases else None
    if not cases and (timed is None or "memcheck" not in tools):
        return EvalResult("ok", "every case is too large for the sanitizer: skipped", seed)
    reports: list[str] = []
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="cuda-llm-sanitizer-") as tmp:

        def run(tool: str, run_cases: Sequence[Case], name: str) -> str | None:
            """The tool over `run_cases`: its report, "" when clean, None when out of time."""
            req_file = Path(tmp) / f"{name}.bin"
            write_requests(req_file, _requests(binary, spec, run_cases, seed, spec_dir))
            cmd = [
                exe,
                "--tool",
                tool,
                "--error-exitcode",
                "86",
                "--print-limit",
                "20",
                *oneshot_command(req_file, device),
            ]
            if tool == "racecheck":
                cmd[3:3] = ["--racecheck-report", "hazard"]
            try:
                proc = subprocess.run(
                    cmd,
                    capture_output=True,
                    text=True,
                    timeout=timeout_s,
                    env=child_env({"PYTHONUNBUFFERED": "1"}),
                    cwd=neutral_cwd(),  # it runs our Python worker: never in the workspace
                    **spawn_options(GPU_LIMITS),
                )
            except subprocess.TimeoutExpired:
                return None
            output = (proc.stdout + proc.stderr).strip()
            if proc.returncode == 86 or _has_errors(output):
                return f"{tool}:\n" + _trim(output)
            if proc.returncode != 0:
                return f"{tool}: exited with {proc.returncode}:\n" + _trim(output)
            return ""

        for tool in tools:
            if cases:
                found = run(tool, cases, f"{tool}-small")
                if found is None:
                    reports.append(f"{tool}: did not finish within {timeout_s:.0f} s")
                elif found:
                    reports.append(found)
            if tool != "memcheck" or timed is None:
                continue
            found = None
            if case_bytes(spec, timed) <= MAX_TIMED_BYTES:
                found = run(tool, [timed], f"{tool}-timed")
                if found is not None:
                    notes.append(f"the timed case ({timed.describe()})")
            if found is None:  # out of time (or too large): the timed case's shape class
                similar = shape_class_case(spec, timed)
                if similar is not None:
                    found = run(tool, [similar], f"{tool}-class")
                    if found is not None:
                        notes.append(
                            f"a case of the timed case's shape class ({similar.describe()})"
                        )
            if found is None:
                reports.append(
                    f"{tool}: the timed case ({timed.describe()}) did not finish "
                    f"within {timeout_s:.0f} s"
                )
            elif found:
                reports.append(found)
    names = ", ".join(tools)
    if reports:
        report = "\n\n".join(reports)
        first = next((ln for ln in report.splitlines()[1:] if ln.strip()), "")
        return EvalResult(
            "sanitizer",
            f"compute-sanitizer ({names}) found problems: {first}",
            seed,
            sanitizer_report=report,
        )
    also = f" (memcheck also on {'; '.join(notes)})" if notes else ""
    return EvalResult(
        "ok",
        f"compute-sanitizer {names}: no errors on {len(cases)} case(s){also}",
        seed,
        sanitizer_report="",
    )


def shape_class_case(spec: TestSpec, case: Case, limit: int = MAX_CASE_BYTES) -> Case | None:
    """A case whose every size has `case`'s residue modulo `SHAPE_MODULUS` (the same tails
    along every dimension), as small as that allows above one modulus, if it fits `limit`."""
    sizes = {
        name: value if value <= 2 * SHAPE_MODULUS else SHAPE_MODULUS + value % SHAPE_MODULUS
        for name, value in case.sizes.items()
    }
    variant = replace(spec, sizes={name: [v] for name, v in sizes.items()})
    found, problems = evaluate_cases(variant)
    if problems or not found or case_bytes(spec, found[0]) > limit:
        return None
    return found[0]


def _has_errors(output: str) -> bool:
    counts = re.findall(r"(?:ERROR SUMMARY|RACECHECK SUMMARY):\s*(\d+)", output)
    return any(int(c) > 0 for c in counts)


def _trim(output: str) -> str:
    """The tool's findings without its banner and host backtraces (they only name our worker)."""
    lines = []
    skipping = False
    for raw in output.splitlines():
        if not raw.startswith("========="):
            continue
        line = raw.removeprefix("=========").strip()
        if line.startswith("Saved host backtrace"):
            skipping = True
            continue
        if skipping and (line.startswith("Host Frame") or not line):
            continue
        skipping = False
        if line and line != "COMPUTE-SANITIZER":
            lines.append(line)
    text = "\n".join(lines[:REPORT_LINES])
    if len(lines) > REPORT_LINES:
        text += f"\n... ({len(lines) - REPORT_LINES} more lines)"
    return text or output[-4000:]
