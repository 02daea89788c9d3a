"""benchmarks/realistic_sizes.py at reduced sizes on the CPU driver double: its kernels, specs and
report run in CI (the realistic sizes need the GPU: see benchmarks/RESULTS.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_realistic_benchmark_runs_at_small_sizes(tmp_path: Path) -> None:
    env = dict(
        os.environ,
        CUDA_LLM_CACHE_DIR=str(tmp_path / "cache"),
        HOME=str(tmp_path),
        XDG_CACHE_HOME=str(tmp_path),
        CUDA_LLM_DATA_DIR=str(tmp_path / "data"),
    )
    proc = subprocess.run(
        [
            sys.executable,
            "benchmarks/realistic_sizes.py",
            "--sizes",
            "small",
            "--driver",
            "fake",
            "--candidates",
            "1",
            "--kernels",
            "transpose,softmax,saxpy,matmul",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ")]
    for name in ("transpose", "softmax", "saxpy", "matmul"):
        assert any(r.startswith(f"| {name} | 0 | ok |") for r in rows), proc.stdout
        assert any(r.startswith(f"| {name} | ") and "cases pass" in r for r in rows), proc.stdout
