"""nvcc as the evaluator's builder of last resort, on a real GPU (issue 38, items 3 and 4).

A kernel that launches another from device code cannot be built by NVRTC; `bench` builds it
with `nvcc -cubin -rdc=true`, links the device runtime and runs it: every case passes and the
report says nvcc built it. A file including cuBLAS checks and benches on this machine's own
environment (a venv whose cuBLAS may be newer than its runtime headers)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_llm_lsp.compile import headers
from cuda_llm_lsp.compile.nvcc import find_nvcc

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(find_nvcc() is None, reason="no nvcc"),
]

DEVICE_LAUNCH = """
__global__ void twice_child(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}

/* @cuda-llm
sizes.n = [1000, 4097]
grid = 1
block = 1
args.x = "float32[n]"
args.y = "out float32[n]"
args.n = "n"
*/
__global__ void spawn(const float* x, float* y, int n) {
    if (threadIdx.x == 0 && blockIdx.x == 0) twice_child<<<(n + 255) / 256, 256>>>(x, y, n);
}
"""

CUBLAS = """
#include <cublas_v2.h>

/* @cuda-llm
sizes.n = [1000, 4097]
grid = "cdiv(n, 256)"
block = 256
args.x = "float32[n]"
args.y = "out float32[n]"
args.n = "n"
*/
__global__ void twice(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}

void scale(cublasHandle_t h, float* x, int n) { float a = 2.0f; cublasSscal(h, n, &a, x, 1); }
"""


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "cuda_llm_lsp.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def test_bench_runs_a_device_side_launch_built_by_nvcc(tmp_path: Path) -> None:
    source = tmp_path / "spawn.cu"
    source.write_text(DEVICE_LAUNCH)
    text = _cli("bench", str(source), "--kernel", "spawn")
    print(text.stdout, text.stderr)
    assert text.returncode == 0, text.stdout + text.stderr
    assert "built by nvcc -cubin" in text.stdout
    js = _cli("bench", str(source), "--kernel", "spawn", "--format", "json")
    (report,) = json.loads(js.stdout)["kernels"]
    assert report["status"] == "ok" and report["builder"] == "nvcc", report


def test_a_file_including_cublas_checks_and_benches(tmp_path: Path) -> None:
    if headers.find_library_header("cublas_v2.h", headers.nvcc_include_dirs(find_nvcc())) is None:
        pytest.skip("no cuBLAS headers in this environment")
    source = tmp_path / "twice.cu"
    source.write_text(CUBLAS)
    checked = _cli("check", str(source), "--format", "json")
    print(checked.stdout, checked.stderr)
    errors = [d for d in json.loads(checked.stdout)["diagnostics"] if d["severity"] == "error"]
    assert errors == []
    js = _cli("bench", str(source), "--format", "json")
    (report,) = json.loads(js.stdout)["kernels"]
    assert report["status"] == "ok", report
