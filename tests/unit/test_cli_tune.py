"""`cuda-llm tune`: real NVRTC compiles of each configuration (-DNAME=value reaches the compiler:
one configuration trips a static_assert), the recorded evaluator for the GPU, the table, JSON,
the diff that makes the best the default and --write."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cuda_llm_lsp.cli import main

SOURCE = """\
#ifndef BLOCK
#define BLOCK 128
#endif
#ifndef ITEMS
#define ITEMS 1
#endif

/* @cuda-llm
sizes.n = [1, 1000, 100000]
tune.BLOCK = [128, 1024]
tune.ITEMS = [1, 2]
grid = "cdiv(n, BLOCK * ITEMS)"
block = "BLOCK"
args.x = "in float32[n]"
args.y = "out float32[n]"
args.n = "n"
*/
extern "C" __global__ void scale(const float* x, float* y, int n) {
    static_assert(BLOCK * ITEMS <= 1024, "too many registers for this configuration");
    int base = blockIdx.x * BLOCK * ITEMS + threadIdx.x;
    for (int k = 0; k < ITEMS; ++k) {
        int i = base + k * BLOCK;
        if (i < n) y[i] = 2.0f * x[i];
    }
}
"""

OUTCOMES = {
    "baseline": {"ms": 1.0},
    "candidates": [
        {"defines": {"BLOCK": 128, "ITEMS": 1}, "status": "ok", "ms": 1.0},
        {"defines": {"BLOCK": 128, "ITEMS": 2}, "status": "ok", "ms": 0.8},
        {"defines": {"BLOCK": 1024, "ITEMS": 1}, "status": "ok", "ms": 0.5},
    ],
}


@pytest.fixture
def kernel_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    outcomes = tmp_path / "outcomes.json"
    outcomes.write_text(json.dumps(OUTCOMES))
    monkeypatch.setenv("CUDA_LLM_EVALUATOR", f"recorded:{outcomes}")
    monkeypatch.setenv("CUDA_LLM_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "scale.cu"
    path.write_text(SOURCE)
    return path


def test_json_table_of_configurations_and_the_best_as_a_diff(
    kernel_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["tune", str(kernel_file), "--kernel", "scale", "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["strategy"] == "exhaustive" and out["space_size"] == 4
    assert out["default"] == {"BLOCK": 128, "ITEMS": 1} and out["default_ms"] == 1.0
    assert out["best"]["config"] == {"BLOCK": 1024, "ITEMS": 1}
    assert out["best"]["speedup"] == pytest.approx(2.0) and out["best"]["finalist"]
    statuses = {json.dumps(c["config"]): c["status"] for c in out["configurations"]}
    assert statuses['{"BLOCK": 1024, "ITEMS": 2}'] == "compile_error"  # -D reached NVRTC
    failed = next(c for c in out["configurations"] if c["status"] == "compile_error")
    assert "too many registers" in failed["message"]
    assert out["spread"] == pytest.approx(2.0)
    assert "-#define BLOCK 128\n+#define BLOCK 1024\n" in out["diff"]
    assert kernel_file.read_text() == SOURCE  # not without --write


def test_text_output_and_write(kernel_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["tune", str(kernel_file), "--kernel", "scale", "--write"])
    captured = capsys.readouterr()
    assert code == 0
    lines = captured.out.splitlines()
    assert lines[0].split()[:4] == ["BLOCK", "ITEMS", "status", "ms"]
    assert lines[1].split()[:3] == ["1024", "1", "ok"]  # fastest first
    assert "best: BLOCK=1024 ITEMS=1: 0.5 ms, 2.00x over the default (BLOCK=128 ITEMS=1" in (
        captured.out
    )
    assert "[4/4]" in captured.err and "wrote" in captured.err
    assert "#define BLOCK 1024\n" in kernel_file.read_text()


def test_a_spec_without_tunables_is_a_usage_error(
    kernel_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = SOURCE.replace("tune.BLOCK = [128, 1024]\ntune.ITEMS = [1, 2]\n", "")
    kernel_file.write_text(
        text.replace('"cdiv(n, BLOCK * ITEMS)"', '"cdiv(n, 128)"').replace('"BLOCK"', "128")
    )
    assert main(["tune", str(kernel_file), "--kernel", "scale", "--format", "json"]) == 2
    assert "declares no tunables" in json.loads(capsys.readouterr().out)["error"]
    assert main(["tune", str(kernel_file), "--kernel", "nope"]) == 2


def test_ctrl_c_stops_the_run_and_prints_what_was_measured(kernel_file: Path) -> None:
    """A real SIGINT to `cuda-llm tune` while a configuration is being judged (the recorded GPU
    takes 60 s for it): the run stops at once, exit 130, the measured part is printed."""
    outcomes = json.loads(Path(os.environ["CUDA_LLM_EVALUATOR"][len("recorded:") :]).read_text())
    slowest = {"defines": {"BLOCK": 1024, "ITEMS": 1}, "status": "ok", "ms": 0.5, "delay_s": 60}
    outcomes["candidates"].insert(0, slowest)  # the third judged (one compile at a time)
    slow = kernel_file.parent / "slow.json"
    slow.write_text(json.dumps(outcomes))
    env = {**os.environ, "CUDA_LLM_EVALUATOR": f"recorded:{slow}"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cuda_llm_lsp.cli",
            "tune",
            str(kernel_file),
            "--kernel",
            "scale",
            "--workers",
            "1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stderr is not None
    seen = ""
    deadline = time.monotonic() + 120
    while "[2/4]" not in seen and time.monotonic() < deadline:  # two measured, one in flight
        line = proc.stderr.readline()
        if not line:
            break
        seen += line
    assert "[2/4]" in seen, seen
    time.sleep(0.5)
    started = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert time.monotonic() - started < 10  # not the 60 s of the configuration in flight
    assert "interrupted" in err
    assert "stopped: cancelled" in out and "Traceback" not in err
