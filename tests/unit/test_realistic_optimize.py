"""benchmarks/realistic_optimize.py at small sizes on the CPU driver double: the 16 scripted
candidates reach the loop through the real endpoint client, each gets a status, and the report
gives the wall time and its phases (the realistic size needs the GPU: benchmarks/RESULTS.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_optimize_benchmark_judges_all_sixteen_candidates(tmp_path: Path) -> None:
    env = dict(
        os.environ,
        CUDA_LLM_CACHE_DIR=str(tmp_path / "cache"),
        HOME=str(tmp_path),
        XDG_CACHE_HOME=str(tmp_path),
    )
    summary = tmp_path / "summary.json"
    proc = subprocess.run(
        [
            sys.executable,
            "benchmarks/realistic_optimize.py",
            "--sizes",
            "small",
            "--driver",
            "fake",
            "--out",
            str(summary),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "16 candidates judged, 16 LLM requests; exit 0" in proc.stdout
    assert "| 1.3 | compile-error | compile_error |" in proc.stdout
    assert "| 2.3 | long-params | signature_mismatch |" in proc.stdout
    data = json.loads(summary.read_text())
    assert len(data["statuses"]) == 16 and not data["problems"]
    for phase in (
        "worker start + device facts",
        "compile (NVRTC)",
        "baseline benchmark",
        "evaluate (candidates, winner recheck)",
        "LLM requests",
    ):
        assert data["phases_s"][phase] > 0, phase
    assert data["calls"]["LLM requests"] == 16
    assert data["wall_s"] >= data["optimize_s"] > 0
