"""compute-sanitizer pass (memcheck, racecheck) over a kernel's small test cases.

Runs the worker in one-shot mode under `compute-sanitizer --tool T` in a child process with a
timeout. The FSR loop runs it on a winner before offering it: a kernel that passes the output
checks can still read out of bounds (inside its own allocations) or race on shared memory.
"""

from __future__ import annotations

import re
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from cuda_llm_lsp.compile.child_env import child_env
from cuda_llm_lsp.evaluate.inputs import host_inputs
from cuda_llm_lsp.evaluate.launch import case_bytes, case_launch
from cuda_llm_lsp.evaluate.process import oneshot_command, write_requests
from cuda_llm_lsp.evaluate.protocol import LoadRequest, Request, RunRequest
from cuda_llm_lsp.evaluate.types import EvalResult, KernelBinary
from cuda_llm_lsp.source.spec import Case, TestSpec

MAX_CASE_BYTES = 16 << 20  # larger cases are skipped: the sanitizer runs them ~100x slower
REPORT_LINES = 60


def sanitizer_path() -> str | None:
    return shutil.which("compute-sanitizer")


def _requests(binary: KernelBinary, spec: TestSpec, cases: Sequence[Case], seed: int,
              spec_dir: Path | None) -> list[Request]:  # fmt: skip
    reqs: list[Request] = [LoadRequest(binary.cubin, binary.entry)]
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
    """`ok`, or `sanitizer` with the tool's report; `ok` with a note when it is not installed."""
    seed = secrets.randbits(63) if seed is None else seed
    exe = sanitizer_path()
    if exe is None:
        return EvalResult("ok", "compute-sanitizer is not on PATH: sanitizer pass skipped", seed)
    cases = [c for c in spec.cases() if case_bytes(spec, c) <= MAX_CASE_BYTES]
    if not cases:
        return EvalResult("ok", "every case is too large for the sanitizer: skipped", seed)
    requests = _requests(binary, spec, cases, seed, spec_dir)
    reports: list[str] = []
    with tempfile.TemporaryDirectory(prefix="cuda-llm-sanitizer-") as tmp:
        req_file = Path(tmp) / "requests.bin"
        write_requests(req_file, requests)
        for tool in tools:
            cmd = [exe, "--tool", tool, "--error-exitcode", "86", "--print-limit", "20",
                   *oneshot_command(req_file, device)]  # fmt: skip
            if tool == "racecheck":
                cmd[3:3] = ["--racecheck-report", "hazard"]
            try:
                proc = subprocess.run(
                    cmd, capture_output=True, text=True, timeout=timeout_s,
                    env=child_env({"PYTHONUNBUFFERED": "1"}),
                )  # fmt: skip
            except subprocess.TimeoutExpired:
                reports.append(f"{tool}: did not finish within {timeout_s:.0f} s")
                continue
            output = (proc.stdout + proc.stderr).strip()
            if proc.returncode == 86 or _has_errors(output):
                reports.append(f"{tool}:\n" + _trim(output))
            elif proc.returncode != 0:
                reports.append(f"{tool}: exited with {proc.returncode}:\n" + _trim(output))
    names = ", ".join(tools)
    if reports:
        report = "\n\n".join(reports)
        first = next((ln for ln in report.splitlines()[1:] if ln.strip()), "")
        return EvalResult(
            "sanitizer", f"compute-sanitizer ({names}) found problems: {first}", seed,
            sanitizer_report=report,
        )  # fmt: skip
    return EvalResult(
        "ok", f"compute-sanitizer {names}: no errors on {len(cases)} case(s)", seed,
        sanitizer_report="",
    )  # fmt: skip


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
