"""`cuda-llm bench FILE [--kernel NAME] [--format json]`: correctness and latency on the local GPU.

Runs every case of each kernel's test spec twice (determinism, unwritten outputs, guard bands,
inputs unchanged), then times the last case. Exit codes: 0 every case passes; 1 a case failed or
the kernel does not compile; 2 bad usage (no such file or kernel, a kernel without a usable spec:
the draft spec is printed to start from); 3 no CUDA GPU or driver.

The GPU worker starts (in a thread: process start, CUDA context, device facts) while this process
compiles for the architecture it expects (`compile.arch.resolve_arch`); a device reporting
another one gets the kernel compiled again for its own. Issue 18's `bench` <= 2 s has the two
overlap instead of adding up.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

from cuda_llm_lsp.cli.common import error, no_kernel, read_source, spec_problems
from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.engine import (
    BenchmarkOutcome,
    GpuService,
    Refusal,
    benchmark_in_file,
    gpu_evaluator,
    gpu_missing,
)
from cuda_llm_lsp.engine.outcomes import ABOVE_PEAK_REASON, summary_line
from cuda_llm_lsp.evaluate.types import Evaluator, NoGpuError, no_gpu_message
from cuda_llm_lsp.source.kernels import Kernel, find_kernels

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_NO_GPU = 0, 1, 2, 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, help=".cu file")
    parser.add_argument("--kernel", help="kernel to benchmark (default: every kernel with a spec)")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--seed", type=int, help="input seed (default: a fresh one, printed)")
    parser.epilog = "exit codes: 0 all cases pass, 1 a case fails, 2 usage/spec problem, 3 no GPU"


def _error(message: str, code: int, as_json: bool) -> int:
    return error("bench", message, code, as_json)


def _chosen(kernels: list[Kernel], name: str | None) -> list[Kernel]:
    """`--kernel`'s kernel (none: not in the file), else those with a spec, else the first."""
    if name:
        return [k for k in kernels if k.name == name]
    return [k for k in kernels if k.spec is not None] or kernels[:1]


def run(args: argparse.Namespace) -> int:
    as_json = args.format == "json"
    path: Path = args.file
    text, problem = read_source(path)  # a FIFO or /dev/zero would never end
    if problem is not None:
        return _error(f"{path}: {problem}", EXIT_USAGE, as_json)
    kernels = find_kernels(text)
    chosen = _chosen(kernels, args.kernel)
    if not chosen:
        if args.kernel:
            message = no_kernel(args.kernel, path, (k.name for k in kernels))
            return _error(message, EXIT_USAGE, as_json)
        return _error(f"no __global__ kernel in {path}", EXIT_USAGE, as_json)
    gpus = GpuService(_local_gpu)
    try:
        return _bench_all(args, text, chosen, gpus)
    finally:
        gpus.close()


def _local_gpu() -> Evaluator:
    """The local GPU's evaluator; NoGpuError at once where there is no driver library, so the
    lease refuses before the kernel compiles (was: seconds of compiling, then "no GPU")."""
    missing = gpu_missing()
    if missing is not None:
        raise NoGpuError(missing)
    return gpu_evaluator()


def _bench_all(args: argparse.Namespace, text: str, chosen: list[Kernel], gpus: GpuService) -> int:
    as_json, path = args.format == "json", args.file
    reports: list[dict[str, Any]] = []
    worst, device = EXIT_OK, ""
    for kernel in chosen:
        work = benchmark_in_file(text, path, kernel.name, Settings(), gpus, seed=args.seed)
        outcome = asyncio.run(work)
        if isinstance(outcome, Refusal):
            code = _refused(outcome, kernel, path, as_json)
            if code in (EXIT_USAGE, EXIT_NO_GPU) and outcome.kind != "bad_inputs":
                return code
            reports.append(
                {"name": kernel.name, "status": outcome.status, "message": outcome.message}
            )
            worst = max(worst, code)
            continue
        device = outcome.device.name
        if outcome.result.status != "ok":
            worst = max(worst, EXIT_FAIL)
        reports.append({**_report(kernel.name, outcome.result), "builder": outcome.builder})
        if not as_json:
            _print(outcome)
    if as_json:
        print(json.dumps({"file": str(path), "device": device, "kernels": reports}, indent=2))
    return worst


def _refused(refusal: Refusal, kernel: Kernel, path: Path, as_json: bool) -> int:
    """Say why `kernel` was not benchmarked; the exit code it calls for."""
    if refusal.kind == "no_spec":
        line = kernel.name_span.start.line + 1
        return _error(
            f"{path}:{line}: kernel {kernel.name} has no test spec. Review this draft, put it "
            f"directly above the kernel and run again:\n\n{refusal.draft}",
            EXIT_USAGE,
            as_json,
        )
    if refusal.kind == "spec_errors":
        shown = spec_problems(path, refusal.problems)
        message = f"the test spec of {kernel.name} has errors:\n{shown}"
        return _error(message, EXIT_USAGE, as_json)
    if refusal.kind in ("no_gpu", "unavailable"):
        return _error(no_gpu_message(refusal.message), EXIT_NO_GPU, as_json)
    if not as_json and refusal.kind == "does_not_build":
        print(f"{kernel.name}: {refusal.status}\n{refusal.message}")
    elif not as_json:
        print(f"{kernel.name}: {refusal.message}")
    return EXIT_USAGE if refusal.kind == "bad_inputs" else EXIT_FAIL


def _print(outcome: BenchmarkOutcome) -> None:
    result = outcome.result
    for case in result.cases:
        sizes = ", ".join(f"{k}={v}" for k, v in case.sizes.items())
        mark = "ok" if case.status == "ok" else case.status
        print(
            f"  case {case.index} ({sizes}): {mark}" + (f": {case.message}" if case.message else "")
        )
    print(summary_line(outcome.kernel, result) + f"  [seed {result.seed}]")
    if outcome.builder != "nvrtc":  # NVRTC could not build the file: say who judged
        print(f"  built by {outcome.builder} -cubin (NVRTC could not build this file)")


def _report(name: str, result: Any) -> dict[str, Any]:
    t = result.baseline
    return {
        "name": name,
        "status": result.status,
        "message": result.message,
        "seed": result.seed,
        "cases": [
            {"index": c.index, "sizes": c.sizes, "status": c.status, "message": c.message}
            for c in result.cases
        ],
        "median_ms": t.median_ms if t else None,
        "spread_pct": t.spread_pct if t else None,
        "min_ms": t.min_ms if t else None,
        "max_ms": t.max_ms if t else None,
        "samples": t.samples if t else 0,
        "bytes_moved": result.bytes_moved,
        "bandwidth_gbs": result.bandwidth_gbs,
        "copy_bandwidth_gbs": result.copy_bandwidth_gbs,
        "fraction_of_peak": result.fraction_of_peak,
        # set when fraction_of_peak > 1: why the figure can exceed the measured copy peak
        "bandwidth_note": (
            ABOVE_PEAK_REASON if result.fraction_of_peak and result.fraction_of_peak > 1 else None
        ),
    }
