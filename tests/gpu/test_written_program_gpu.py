"""A winner written by `optimize --write` changes nothing a program built from the file prints
but the kernel's speed (docs/design.md, "What an accepted winner may write", issue 37).

A whole-program reply (`main`, a host launcher, a host object, `__host__ __device__` helpers
around the kernel) is judged on its kernel (the recorded evaluator stands in for the judge; the
kernel's real output is what this test compares): the host items are dropped, `__host__`
removed, and the written file, built with nvcc into a program and run on the GPU, prints exactly
what the original's program prints.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from cuda_llm_lsp.compile.nvcc import find_nvcc
from tests.support.fsr_fakes import make_recording
from tests.unit.test_cli_optimize import cli

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(find_nvcc() is None, reason="no nvcc (the `nvcc` extra)"),
]

ORIGINAL = """\
#include <cstdio>

/* @cuda-llm
sizes.n = [1, 1000, 65536]
grid = "cdiv(n, 256)"
block = 256
args.a = "2"
args.x = "float32[n]"
args.y = "inout float32[n]"
args.n = "n"
*/
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    y[i] = a * x[i] + y[i];
  }
}

int main() {
  const int n = 1000;
  static float hx[n], hy[n];
  for (int i = 0; i < n; ++i) { hx[i] = 0.25f * i; hy[i] = 1.0f - i; }
  float *x, *y;
  cudaMalloc(&x, n * sizeof(float));
  cudaMalloc(&y, n * sizeof(float));
  cudaMemcpy(x, hx, n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(y, hy, n * sizeof(float), cudaMemcpyHostToDevice);
  saxpy<<<(n + 255) / 256, 256>>>(2.0f, x, y, n);
  cudaError_t err = cudaMemcpy(hy, y, n * sizeof(float), cudaMemcpyDeviceToHost);
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += hy[i];
  std::printf("status %d sum %.3f y[7] %.3f\\n", (int)err, sum, hy[7]);
  return 0;
}
"""

REPLY = """\
#include <cstdio>
#include <vector>

#define HD __host__ __device__
HD inline float axpy(float a, float x, float y) { return fmaf(a, x, y); }

struct Timer {
  Timer() { std::printf("the model's code ran before main\\n"); }
};
static Timer timer;

extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  // variant: fast
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = axpy(a, x[i], y[i]);
}

void launch_saxpy(float a, const float* x, float* y, int n) {
  saxpy<<<(n + 255) / 256, 256>>>(a, x, y, n);
}

int main() {
  std::vector<float> host(16);
  std::printf("the model's main\\n");
  return 0;
}
"""


def _run(source: Path, binary: Path) -> tuple[int, str]:
    subprocess.run(
        [str(find_nvcc()), str(source), "-o", str(binary)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    ran = subprocess.run([str(binary)], capture_output=True, text=True, timeout=120)
    return ran.returncode, ran.stdout


def test_the_written_program_prints_what_the_original_prints(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "saxpy.cu").write_text(ORIGINAL)
    (work / "outcomes.json").write_text(
        json.dumps(
            {
                "baseline": {"ms": 1.0, "spread_pct": 0.4},
                "candidates": [{"contains": "variant: fast", "status": "ok", "ms": 0.4}],
            }
        )
    )
    make_recording(work / "rec", "saxpy", {(1, 1): REPLY})
    done = cli(
        work,
        str(work / "saxpy.cu"),
        "--kernel",
        "saxpy",
        "--replay",
        str(work / "rec"),
        "--rounds",
        "1",
        "--candidates",
        "1",
        "--write",
    )
    assert done.returncode == 0, done.stderr
    written = (work / "saxpy.cu").read_text()
    assert "variant: fast" in written and "__host__" not in written
    assert "Timer" not in written and "launch_saxpy" not in written
    (tmp_path / "original.cu").write_text(ORIGINAL)
    before = _run(tmp_path / "original.cu", tmp_path / "original")
    after = _run(work / "saxpy.cu", tmp_path / "written")
    assert before[0] == 0 and before[1].startswith("status 0 "), before
    assert after == before
