"""`cuda-llm suite DIR --tune`: kernels whose spec declares tunables are tuned after their bench
(real NVRTC for every configuration, recorded GPU outcomes per configuration), and the report
shows tuned against untuned."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OUTCOMES = {
    "baseline": {"ms": 1.0},
    "candidates": [
        {"defines": {"BLOCK": 256}, "status": "ok", "ms": 0.5},
        {"defines": {"TILE": 32, "BLOCK_ROWS": 8}, "status": "ok", "ms": 0.4},
        {"defines": {"TILE": 64, "BLOCK_ROWS": 1}, "status": "wrong_output",
         "message": "case 3 (rows=4096, cols=8192): out[77] expected 1.0, got 0.0"},
        {"defines": {"TILE": 32, "ITEMS": 4}, "status": "ok", "ms": 0.25},
    ],
    "default": {"status": "ok", "ms": 1.0},  # every other configuration: as the default
}  # fmt: skip


def test_suite_tunes_kernels_with_tunables_and_reports_tuned_against_untuned(
    tmp_path: Path,
) -> None:
    (tmp_path / "outcomes.json").write_text(json.dumps(OUTCOMES))
    env = dict(
        os.environ,
        CUDA_LLM_CACHE_DIR=str(tmp_path / "cache"),
        CUDA_LLM_DATA_DIR=str(tmp_path / "data"),
        CUDA_LLM_EVALUATOR=f"recorded:{tmp_path / 'outcomes.json'}",
    )
    out = tmp_path / "report"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "cuda_llm_lsp.cli",
            "suite",
            "examples/tune",
            "--tune",
            "--no-vendor",
            "--out",
            str(out),
            "--format",
            "json",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    rows = {r["kernel"]: r for r in json.loads((out / "report.json").read_text())["kernels"]}
    softmax, transpose, matmul = rows["softmax_rows"], rows["transpose"], rows["matmul"]
    assert softmax["tuned"] and softmax["tuned_config"] == "BLOCK=256"
    assert softmax["untuned_ms"] == 1.0 and softmax["tuned_ms"] == 0.5
    assert softmax["tuned_speedup"] == pytest.approx(2.0) and softmax["tuned_points"] == 6
    assert transpose["tuned_config"] == "TILE=32 BLOCK_ROWS=8"
    assert transpose["tuned_spread"] == pytest.approx(1.0 / 0.4)  # the wrong one is not counted
    assert matmul["tuned_config"].startswith("TILE=32 ITEMS=4 UNROLL=")
    assert matmul["tuned_speedup"] == pytest.approx(4.0) and matmul["tuned_points"] == 36
    assert softmax["speedup"] == 1.0  # the bench's own figures are unchanged
    report = (out / "report.md").read_text()
    assert "## Tuned against untuned" in report
    assert "| softmax_rows | 1.000 | 0.500 | 2.00× | BLOCK=256 | 6 |" in report
