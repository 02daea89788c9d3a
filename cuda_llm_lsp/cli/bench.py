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
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from cuda_llm_lsp.cli.common import error, no_kernel, read_source
from cuda_llm_lsp.compile.arch import resolve_arch
from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.engine import gpu_evaluator
from cuda_llm_lsp.evaluate.candidate import CandidateRejected, build_binary
from cuda_llm_lsp.evaluate.format import ABOVE_PEAK_REASON, summary_line
from cuda_llm_lsp.evaluate.inputs import InputError
from cuda_llm_lsp.evaluate.types import BaselineFailed, NoGpuError, no_gpu_message
from cuda_llm_lsp.source.draft import draft_spec
from cuda_llm_lsp.source.kernels import find_kernels
from cuda_llm_lsp.source.spec import parse_spec

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_NO_GPU = 0, 1, 2, 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, help=".cu file")
    parser.add_argument("--kernel", help="kernel to benchmark (default: every kernel with a spec)")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--seed", type=int, help="input seed (default: a fresh one, printed)")
    parser.epilog = "exit codes: 0 all cases pass, 1 a case fails, 2 usage/spec problem, 3 no GPU"


def _error(message: str, code: int, as_json: bool) -> int:
    return error("bench", message, code, as_json)


def run(args: argparse.Namespace) -> int:
    as_json = args.format == "json"
    path: Path = args.file
    text, problem = read_source(path)  # a FIFO or /dev/zero would never end
    if problem is not None:
        return _error(f"{path}: {problem}", EXIT_USAGE, as_json)
    kernels = find_kernels(text)
    if args.kernel:
        chosen = [k for k in kernels if k.name == args.kernel]
        if not chosen:
            message = no_kernel(args.kernel, path, (k.name for k in kernels))
            return _error(message, EXIT_USAGE, as_json)
    else:
        chosen = [k for k in kernels if k.spec is not None]
        if not chosen:
            if not kernels:
                return _error(f"no __global__ kernel in {path}", EXIT_USAGE, as_json)
            chosen = kernels[:1]
    specs = []
    for kernel in chosen:
        spec, problems = parse_spec(kernel, text)
        if spec is None:
            line = kernel.name_span.start.line + 1
            if not problems:
                draft = draft_spec(kernel, text)
                return _error(
                    f"{path}:{line}: kernel {kernel.name} has no test spec. Review this draft, "
                    f"put it directly above the kernel and run again:\n\n{draft}", EXIT_USAGE,
                    as_json,
                )  # fmt: skip
            shown = "\n".join(
                f"{path}:{p.span.start.line + 1}:{p.span.start.column + 1}: "
                f"{getattr(p, 'severity', 'error')}: {p.message}"
                for p in problems
            )
            return _error(f"the test spec of {kernel.name} has errors:\n{shown}", EXIT_USAGE,
                          as_json)  # fmt: skip
        specs.append((kernel, spec))

    settings = Settings()
    evaluator = gpu_evaluator()
    starting = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gpu-worker-start")
    try:
        facts_future = starting.submit(evaluator.device_facts)
        expected = resolve_arch(settings)
        built = {
            kernel.name: build_binary(
                text, path, kernel.name, settings, instance=spec.instance, arch=expected
            )
            for kernel, spec in specs
        }
        try:
            facts = facts_future.result()
        except NoGpuError as exc:
            return _error(no_gpu_message(exc), EXIT_NO_GPU, as_json)
        reports: list[dict[str, Any]] = []
        worst = EXIT_OK
        for kernel, spec in specs:
            binary = built[kernel.name]
            if facts.arch != expected:
                binary = build_binary(text, path, kernel.name, settings, instance=spec.instance,
                                      arch=facts.arch)  # fmt: skip
            if isinstance(binary, CandidateRejected):
                reports.append({"name": kernel.name, "status": binary.status,
                                "message": binary.message})  # fmt: skip
                if not as_json:
                    print(f"{kernel.name}: {binary.status}\n{binary.message}")
                worst = EXIT_FAIL
                continue
            try:
                result = evaluator.benchmark(binary, spec, spec_dir=path.parent, seed=args.seed)
            except (InputError, BaselineFailed) as exc:
                reports.append({"name": kernel.name, "status": "error", "message": str(exc)})
                if not as_json:
                    print(f"{kernel.name}: {exc}")
                worst = max(worst, EXIT_USAGE if isinstance(exc, InputError) else EXIT_FAIL)
                continue
            if result.status != "ok":
                worst = max(worst, EXIT_FAIL)
            reports.append(_report(kernel.name, result))
            if not as_json:
                for case in result.cases:
                    sizes = ", ".join(f"{k}={v}" for k, v in case.sizes.items())
                    mark = "ok" if case.status == "ok" else case.status
                    print(f"  case {case.index} ({sizes}): {mark}"
                          + (f": {case.message}" if case.message else ""))  # fmt: skip
                print(summary_line(kernel.name, result) + f"  [seed {result.seed}]")
        if as_json:
            print(json.dumps({"file": str(path), "device": facts.name, "kernels": reports},
                             indent=2))  # fmt: skip
        return worst
    except NoGpuError as exc:
        return _error(no_gpu_message(exc), EXIT_NO_GPU, as_json)
    finally:
        evaluator.close()
        starting.shutdown(wait=False)


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
