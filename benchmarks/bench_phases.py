"""Where a cold `cuda-llm bench` spends its wall time (issue 41: <= 2 s on the H200).

Runs what `cuda-llm bench FILE` runs, in this fresh process, and prints when each step began,
from the process's own start (read from /proc, so the interpreter's start-up counts too):
imports, the GPU lease, compiling (overlapped with the worker's start), the cases and the
timing, with the worker's own phases (inputs, runs, checks, timing).

    python benchmarks/bench_phases.py                          # examples/transpose.cu
    python benchmarks/bench_phases.py FILE --kernel NAME
    python benchmarks/bench_phases.py --late-worker            # the worker spawned on first use
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _process_age_s() -> float:
    """Seconds since this process started (Linux: /proc/self/stat's start time)."""
    ticks = os.sysconf("SC_CLK_TCK")
    started = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19]) / ticks
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    return uptime - started


def main() -> int:
    import argparse

    late = "--late-worker" in sys.argv
    if not late:  # as `cuda-llm bench` does, before its imports
        from cuda_llm_lsp.evaluate.worker_start import start_early

        start_early()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?", type=Path, default=ROOT / "examples" / "transpose.cu")
    parser.add_argument("--kernel")
    parser.add_argument("--late-worker", action="store_true", help="no early worker (as before)")
    args = parser.parse_args()
    origin = time.perf_counter() - _process_age_s()
    first = "python started, script running" + ("" if late else ", worker spawned")
    marks: list[tuple[float, str]] = [(time.perf_counter(), first)]

    import asyncio

    from cuda_llm_lsp.cli.bench import _local_gpu
    from cuda_llm_lsp.config import Settings
    from cuda_llm_lsp.engine import BenchmarkOutcome, GpuService, benchmark_in_file
    from cuda_llm_lsp.evaluate.gpu import GpuEvaluator
    from cuda_llm_lsp.source.kernels import find_kernels

    marks.append((time.perf_counter(), "imports done"))
    evaluators: list[GpuEvaluator] = []

    def local() -> object:
        evaluator = _local_gpu()
        marks.append((time.perf_counter(), "evaluator made"))
        evaluators.append(evaluator)  # type: ignore[arg-type]
        return evaluator

    text = args.file.read_text()
    name = args.kernel or next(k.name for k in find_kernels(text) if k.spec is not None)
    gpus = GpuService(local)  # type: ignore[arg-type]

    def event(e: object) -> None:
        marks.append((time.perf_counter(), f"event: {getattr(e, 'text', type(e).__name__)}"))

    try:
        work = benchmark_in_file(text, args.file, name, Settings(), gpus, on_event=event)
        outcome = asyncio.run(work)
        marks.append((time.perf_counter(), "benchmark returned"))
    finally:
        gpus.close()
    marks.append((time.perf_counter(), "evaluator closed"))
    previous = origin
    for at, what in marks:
        print(f"{at - origin:7.3f} s  (+{at - previous:6.3f})  {what}")
        previous = at
    for evaluator in evaluators:
        for phase, seconds in evaluator.phases.items():
            print(f"         worker {phase}: {seconds:.3f} s")
    if isinstance(outcome, BenchmarkOutcome):
        t = outcome.result.baseline
        print(f"{outcome.result.status}; samples {t.samples if t else 0}")
    else:
        print(f"refused: {outcome}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
