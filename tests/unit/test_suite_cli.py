"""`cuda-llm suite` end to end on the CPU: the hand-written replay through the real FSR loop and
real NVRTC, with recorded GPU outcomes standing in for the device (`CUDA_LLM_EVALUATOR`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "benchmarks" / "suite"
RECORDING = ROOT / "benchmarks" / "recordings" / "hand-written"

# the launch blocks of the hand-written launch-changing candidates, as `LaunchConfig.describe()`
TRANSPOSE_32 = "grid=[cdiv(cols, 32), cdiv(rows, 32)] block=[32, 8] smem=0"
MATMUL_64 = "grid=[cdiv(N, 64), cdiv(M, 64)] block=[16, 16] smem=0"
PER_ROW = "grid=rows block=256 smem=0"
OUTCOMES = {
    "baseline": {"ms": 1.0, "spread_pct": 0.5},
    "candidates": [
        {"contains": "DELIBERATELY WRONG", "status": "out_of_bounds",
         "message": "case 1 (rows=17, cols=33): out was written past its end"},
        {"contains": "16x16 shared-memory tile", "status": "ok", "ms": 0.2},
        {"contains": "classic shared-memory tiling", "status": "ok", "ms": 0.4},
        # launch-changing candidates: fast with their own launch (`--launch free`), and what
        # the original launch makes of them (a 32x8 block on a 16x16 grid leaves tiles unwritten;
        # 64x64 tiles on a 16x16 grid are correct but do 16 times the work)
        {"contains": "32x32 tile per block", "launch": TRANSPOSE_32, "status": "ok", "ms": 0.1},
        {"contains": "32x32 tile per block", "status": "unwritten_output",
         "message": "case 2 (rows=1000, cols=999): out[5] was never written"},
        {"contains": "64x64 tile of C per block", "launch": MATMUL_64, "status": "ok", "ms": 0.3},
        {"contains": "64x64 tile of C per block", "status": "ok", "ms": 4.0},
        {"contains": "one 256-thread block per row", "launch": PER_ROW, "status": "ok",
         "ms": 0.1},
        {"contains": "one 256-thread block per row", "status": "unwritten_output",
         "message": "case 2 (rows=1000, cols=1000): y[1000] was never written"},
        {"contains": "the grid still has one thread per", "status": "ok", "ms": 0.4},
    ],
}  # fmt: skip


def suite(tmp_path: Path, *args: str, recorded: bool = True) -> subprocess.CompletedProcess[str]:
    (tmp_path / "outcomes.json").write_text(json.dumps(OUTCOMES))
    env = dict(
        os.environ,
        CUDA_LLM_CACHE_DIR=str(tmp_path / "cache"),
        CUDA_LLM_DATA_DIR=str(tmp_path / "data"),
    )
    env.pop("CUDA_LLM_EVALUATOR", None)
    if recorded:
        env["CUDA_LLM_EVALUATOR"] = f"recorded:{tmp_path / 'outcomes.json'}"
    return subprocess.run(
        [sys.executable, "-m", "cuda_llm_lsp.cli", "suite", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
    )


def test_replay_optimizes_recorded_kernels_and_rejects_the_wrong_candidate(tmp_path: Path) -> None:
    out = tmp_path / "report"
    proc = suite(
        tmp_path,
        str(SUITE),
        "--kernel",
        "transpose_f32",
        "--kernel",
        "matmul_f32",
        "--kernel",
        "vector_add_f32",
        "--replay",
        str(RECORDING),
        "--out",
        str(out),
        "--no-vendor",
        "--format",
        "json",
        "--launch",
        "keep",
    )
    assert proc.returncode == 0, proc.stderr
    printed = json.loads(proc.stdout)
    assert printed["files"]["json"].endswith("report.json")
    data = json.loads((out / "report.json").read_text())
    rows = {r["kernel"]: r for r in data["kernels"]}
    # `keep`: a candidate that brings a launch block is `bad_launch` (never judged under a launch
    # it was not written for, [judge]); the others keep the spec's launch
    assert rows["transpose_f32"]["candidate_statuses"] == {
        "out_of_bounds": 1,
        "ok": 1,
        "bad_launch": 1,
    }
    assert rows["transpose_f32"]["accepted"] and rows["transpose_f32"]["speedup"] == pytest.approx(
        5
    )
    assert rows["transpose_f32"]["launch"] == ""
    assert rows["matmul_f32"]["candidate_statuses"] == {"ok": 1, "bad_launch": 1}
    assert rows["matmul_f32"]["accepted"] and rows["matmul_f32"]["speedup"] == pytest.approx(2.5)
    assert not rows["vector_add_f32"]["optimized"]  # no recording: benched only
    assert rows["vector_add_f32"]["speedup"] == 1.0
    assert data["fast_p"] == {
        "fast_1": pytest.approx(2 / 3),
        "fast_2": pytest.approx(2 / 3),
        "fast_4": pytest.approx(1 / 3),
        "fast_8": 0.0,
    }
    assert rows["matmul_f32"]["floor_ms"] and rows["matmul_f32"]["bound"] == "compute"
    md = (out / "report.md").read_text()
    assert "3: 1 bad_launch, 1 ok, 1 out_of_bounds" in md and "fast_1" in md
    assert "launch policy (--launch): keep" in md and "own launch" not in md
    assert (out / "chart.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "cache" / "peaks.json").exists()  # measured once, then cached


def test_launch_free_judges_launch_changing_candidates_with_their_own_launch(
    tmp_path: Path,
) -> None:
    out = tmp_path / "free"
    proc = suite(
        tmp_path,
        str(SUITE),
        "--kernel",
        "softmax_f32,transpose_f32,matmul_f32",
        "--replay",
        str(RECORDING),
        "--launch",
        "free",
        "--out",
        str(out),
        "--no-vendor",
        "--format",
        "json",
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads((out / "report.json").read_text())
    rows = {r["kernel"]: r for r in data["kernels"]}
    softmax, transpose, matmul = rows["softmax_f32"], rows["transpose_f32"], rows["matmul_f32"]
    assert softmax["candidate_statuses"] == {"ok": 2}  # warp per 32 rows, and block per row
    assert softmax["speedup"] == pytest.approx(10) and softmax["launch"] == PER_ROW
    assert softmax["original_launch"] == "grid=cdiv(rows, THREADS) block=THREADS smem=0"
    assert transpose["candidate_statuses"] == {"out_of_bounds": 1, "ok": 2}
    assert transpose["speedup"] == pytest.approx(10) and transpose["launch"] == TRANSPOSE_32
    assert matmul["speedup"] == pytest.approx(1 / 0.3) and matmul["launch"] == MATMUL_64
    assert data["fast_p"]["fast_8"] == pytest.approx(2 / 3)
    md = (out / "report.md").read_text()
    assert "## Winners with their own launch" in md and f"`{TRANSPOSE_32}`" in md
    assert "launch policy (--launch): free" in md

    # the same recording under `keep`: the block-per-row candidate brings its own launch, so it
    # is `bad_launch` rather than run with the spec's (one thread per row, rows left unwritten);
    # the winner keeps the original launch
    out = tmp_path / "keep"
    proc = suite(
        tmp_path,
        str(SUITE),
        "--kernel",
        "softmax_f32",
        "--replay",
        str(RECORDING),
        "--launch",
        "keep",
        "--out",
        str(out),
        "--no-vendor",
    )
    assert proc.returncode == 0, proc.stderr
    row = json.loads((out / "report.json").read_text())["kernels"][0]
    assert row["candidate_statuses"] == {"ok": 1, "bad_launch": 1}
    assert row["speedup"] == pytest.approx(2.5) and row["launch"] == ""
    assert "## Winners with their own launch" not in (out / "report.md").read_text()

    # `auto` (the default): the suite's main() launches softmax_f32 with its tunable THREADS,
    # which a rewritten site keeps as the #define, so the launch block is used as under `free`
    out = tmp_path / "auto"
    proc = suite(
        tmp_path,
        str(SUITE),
        "--kernel",
        "softmax_f32",
        "--replay",
        str(RECORDING),
        "--out",
        str(out),
        "--no-vendor",
    )
    assert proc.returncode == 0, proc.stderr
    row = json.loads((out / "report.json").read_text())["kernels"][0]
    assert row["candidate_statuses"] == {"ok": 2} and row["launch"] == PER_ROW
    proc = suite(tmp_path, str(SUITE), "--launch", "wide")
    assert proc.returncode == 2 and "invalid choice: 'wide'" in proc.stderr


def test_plain_run_benches_and_reports_zero_fast_p(tmp_path: Path) -> None:
    out = tmp_path / "plain"
    proc = suite(tmp_path, str(SUITE), "--kernel", "gelu_bf16", "--out", str(out), "--no-vendor")
    assert proc.returncode == 0, proc.stderr
    assert "1/1 kernels correct; fast_1 0.00" in proc.stdout
    assert "[1/1] gelu_bf16: ok" in proc.stderr  # plain progress lines when not a terminal


def test_bad_usage_is_a_clear_message(tmp_path: Path) -> None:
    proc = suite(tmp_path, str(tmp_path / "nowhere"))
    assert proc.returncode == 2 and "is not a directory" in proc.stderr
    proc = suite(tmp_path, str(SUITE), "--kernel", "no_such_kernel")
    assert proc.returncode == 2 and "no kernels named no_such_kernel" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_no_gpu_exits_3(tmp_path: Path) -> None:
    try:
        from cuda_llm_lsp.evaluate.gpu import GpuEvaluator
        from cuda_llm_lsp.evaluate.types import NoGpuError

        with GpuEvaluator() as ev:
            ev.device_facts()
        pytest.skip("a GPU is present: the no-GPU path cannot be shown here")
    except NoGpuError:
        pass
    proc = suite(
        tmp_path, str(SUITE), "--kernel", "gelu_f32", "--out", str(tmp_path / "o"), recorded=False
    )
    assert proc.returncode == 3 and "no CUDA GPU" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_broken_kernel_does_not_stop_the_others(tmp_path: Path) -> None:
    suite_dir = tmp_path / "mine"
    suite_dir.mkdir()
    good = (SUITE / "gelu.cu").read_text()
    (suite_dir / "gelu.cu").write_text(good)
    bad = good.replace('args.n = "n"', 'args.n = "m"', 1)  # unknown size name in gelu_f32
    (suite_dir / "broken.cu").write_text(
        bad.replace("gelu_f32", "broken_f32").replace("gelu_bf16", "broken_bf16")
    )
    (suite_dir / "nospec.cu").write_text(
        'extern "C" __global__ void lonely(float* p) { p[0] = 1.0f; }\n'
    )
    out = tmp_path / "report"
    proc = suite(tmp_path, str(suite_dir), "--out", str(out), "--no-vendor")
    assert proc.returncode == 1, proc.stderr
    rows = {r["kernel"]: r for r in json.loads((out / "report.json").read_text())["kernels"]}
    assert rows["broken_f32"]["status"] == "spec_error" and "'m'" in rows["broken_f32"]["message"]
    assert rows["lonely"]["status"] == "skipped"
    assert rows["gelu_f32"]["correct"] and rows["gelu_bf16"]["correct"]
    assert rows["broken_bf16"]["correct"]
    md = (out / "report.md").read_text()
    assert "## Problems" in md and "`broken_f32`" in md


def test_a_deadline_skips_the_kernels_not_started_and_still_writes_the_report(
    tmp_path: Path,
) -> None:
    out = tmp_path / "report"
    # The first kernel starts at once; compiling it alone takes longer than 1 ms.
    proc = suite(
        tmp_path,
        str(SUITE),
        "--kernel",
        "gelu_f32",
        "--kernel",
        "gelu_bf16",
        "--deadline",
        "0.001",
        "--out",
        str(out),
        "--no-vendor",
    )
    assert proc.returncode == 1, proc.stderr
    rows = {r["kernel"]: r for r in json.loads((out / "report.json").read_text())["kernels"]}
    assert rows["gelu_f32"]["correct"]
    assert rows["gelu_bf16"]["status"] == "skipped"
    assert "deadline of 0.001 s was reached" in rows["gelu_bf16"]["message"]
    proc = suite(tmp_path, str(SUITE), "--deadline", "0", "--out", str(out))
    assert proc.returncode == 2 and "--deadline must be positive" in proc.stderr
