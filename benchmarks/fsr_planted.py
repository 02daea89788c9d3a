"""FSR acceptance on a GPU: `cuda-llm optimize` against a scripted endpoint serving planted kernels.

For each planted run (tests/support/planted.py): start the scripted OpenAI-compatible server on
127.0.0.1, run

    python -m cuda_llm_lsp.cli optimize <file> --kernel <k> --format json --base-url <server>

then `cuda-llm bench --format json` on the original and on the winner (applied to a temporary
copy), and print the figures: statuses against the planted ones, baseline / best latency, the
loop's speedup and the independent bench speedup. Exit 0 when every run found its planted
winner and gave every candidate its expected status.

    python benchmarks/fsr_planted.py                  # both runs
    python benchmarks/fsr_planted.py --run reduction  # examples/reduction.cu only
    python benchmarks/fsr_planted.py --strategy plan  # planner -> coders -> debugger: the
                                                      # planted compile error is repaired
    python benchmarks/fsr_planted.py --strategy fsr-repair  # FSR whose debugger repairs it

Every failing candidate goes to the debugger (`--repairs`, default 3); with `fsr` the scripted
model answers those requests 400, so the planted statuses stand.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.planted import RUNS, PlantedRun  # noqa: E402
from tests.support.scripted_llm import ScriptedLlmServer  # noqa: E402


def cli(*args: str, env: dict[str, str], timeout: float = 540) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cuda_llm_lsp.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def bench_ms(path: Path, kernel: str, env: dict[str, str]) -> float | None:
    done = cli("bench", str(path), "--kernel", kernel, "--format", "json", env=env)
    try:
        [report] = json.loads(done.stdout)["kernels"]
        return float(report["median_ms"]) if report["status"] == "ok" else None
    except (ValueError, KeyError, TypeError):
        print(f"  bench failed ({done.returncode}): {done.stdout[-400:]} {done.stderr[-400:]}")
        return None


def run_one(
    name: str, planted: PlantedRun, work: Path, seed: int, evaluator: str, strategy: str = "fsr"
) -> dict[str, object]:
    from cuda_llm_lsp.evaluate.candidate import splice
    from cuda_llm_lsp.source.kernels import find_kernels

    env = dict(
        os.environ,
        OPENAI_API_KEY="scripted",
        CUDA_LLM_DATA_DIR=str(work / "data"),
        PYTHONUNBUFFERED="1",
    )
    env["CUDA_LLM_EVALUATOR"] = evaluator
    relative = planted.file.relative_to(ROOT)
    command = [
        "optimize",
        str(relative),
        "--kernel",
        planted.kernel,
        "--format",
        "json",
        "--rounds",
        str(planted.rounds),
        "--candidates",
        str(planted.candidates),
        "--model",
        "scripted",
        "--seed",
        str(seed),
        "--strategy",
        "plan" if strategy == "plan" else "fsr",
    ]
    print(f"== {name}: python -m cuda_llm_lsp.cli {' '.join(command)} --base-url <scripted>")
    steps = planted.plan_steps() if strategy == "plan" else planted.steps()
    if strategy == "fsr-repair":
        steps += planted.repair_steps()
    with ScriptedLlmServer(steps) as server:
        started = time.monotonic()
        done = cli(*command, "--base-url", server.base_url, env=env)
        wall = time.monotonic() - started
    print(done.stderr.rstrip())
    summary: dict[str, object] = {
        "run": name,
        "strategy": strategy,
        "file": str(relative),
        "kernel": planted.kernel,
        "exit_code": done.returncode,
        "wall_s": round(wall, 1),
    }
    try:
        result = json.loads(done.stdout)
    except ValueError:
        summary["error"] = "optimize printed no JSON"
        return summary
    mismatches = planted.mismatches(result["candidates"], strategy)
    found = bool(result["accepted"]) and planted.won(result["best_source"], strategy)
    summary.update(
        baseline_ms=result["baseline_ms"],
        best_ms=result["best_ms"],
        speedup=result["speedup"],
        accepted=result["accepted"],
        winner_found=found,
        winner=(
            found_marker.group(0)
            if (found_marker := re.search(r"variant: [\w-]+", result["best_source"] or ""))
            else None
        ),
        status_mismatches=mismatches,
        statuses={f"{c['round']}.{c['index']}": c["status"] for c in result["candidates"]},
    )
    if result["accepted"] and result["best_source"]:
        text = planted.file.read_text(encoding="utf-8")
        kernel = next(k for k in find_kernels(text) if k.name == planted.kernel)
        winner = work / f"{name}_winner.cu"
        winner.write_text(splice(text, kernel, result["best_source"]))
        original = work / f"{name}_original.cu"
        original.write_text(text)
        base = bench_ms(original, planted.kernel, env)
        best = bench_ms(winner, planted.kernel, env)
        if base and best:
            bench_speedup = base / best
            summary.update(
                bench_baseline_ms=base,
                bench_best_ms=best,
                bench_speedup=round(bench_speedup, 3),
                agreement_pct=round(100 * (result["speedup"] / bench_speedup - 1), 2),
            )
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--run", choices=sorted(RUNS), action="append", help="which planted run (default: all)"
    )
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--strategy", choices=("fsr", "fsr-repair", "plan"), default="fsr")
    parser.add_argument("--out", type=Path, help="also write the summary JSON here")
    parser.add_argument(
        "--evaluator",
        default="gpu",
        help="gpu (default), or recorded:PATH for a CPU dry run of this script",
    )
    args = parser.parse_args()
    names = args.run or sorted(RUNS)
    summaries = []
    with tempfile.TemporaryDirectory(prefix="fsr-planted-") as tmp:
        for name in names:
            summaries.append(
                run_one(name, RUNS[name], Path(tmp), args.seed, args.evaluator, args.strategy)
            )
    ok = True
    print("\n=== FSR planted-candidate acceptance")
    for s in summaries:
        print(json.dumps(s, indent=2))
        ok &= bool(s.get("winner_found")) and not s.get("status_mismatches")
    if args.out:
        args.out.write_text(json.dumps(summaries, indent=2) + "\n")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
