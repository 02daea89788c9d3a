"""Library headers NVRTC cannot take as written, through `cuda-llm check` and real NVRTC.

`<cub/cub.cuh>` refuses NVRTC with `#error`: its stand-in includes CUB's device headers, so a
real error in the file is the one reported and kernels get their resources. A missing
`<curand_kernel.h>` is one warning, with no false errors from the names it would declare.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cuda_llm_lsp.compile.headers import find_system_header

ROOT = Path(__file__).resolve().parents[2]

CUB = """#include <cub/cub.cuh>

__global__ void block_sum(const float* in, float* out, int n) {
    typedef cub::BlockReduce<float, 256> BlockReduce;
    __shared__ typename BlockReduce::TempStorage temp;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float s = BlockReduce(temp).Sum(i < n ? in[i] : 0.0f);
    if (threadIdx.x == 0) out[blockIdx.x] = s;
}

__global__ void twice(float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] *= FACTOR;
}
"""

CURAND = """#include <curand_kernel.h>

__global__ void init_rng(curandState* states, unsigned long long seed, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) curand_init(seed, i, 0, &states[i]);
}

__global__ void sample(curandState* states, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = curand_uniform(&states[i]) + curand_normal(&states[i]);
}

__global__ void twice(float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] *= 2.0f;
}
"""


def check_json(tmp_path: Path, name: str, text: str, *flags: str) -> dict[str, Any]:
    (tmp_path / name).write_text(text, encoding="utf-8")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["CUDA_LLM_CACHE_DIR"] = str(tmp_path / "cache")
    done = subprocess.run(
        [sys.executable, "-m", "cuda_llm_lsp.cli", "check", "--format", "json", *flags, name],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)


def test_cub_umbrella_header_hides_neither_the_real_error_nor_resources(tmp_path: Path) -> None:
    broken = check_json(tmp_path, "reduce.cu", CUB)
    errors = [d for d in broken["diagnostics"] if d["severity"] == "error"]
    assert [(e["line"], e["message"]) for e in errors] == [
        (13, 'identifier "FACTOR" is undefined')
    ], broken["diagnostics"]

    fixed = check_json(tmp_path, "reduce.cu", CUB, "-DFACTOR=2.0f")
    assert fixed["diagnostics"] == []
    resources = {k["name"]: k for k in fixed["kernels"]}
    assert resources["block_sum"]["registers"] is not None
    assert resources["block_sum"]["shared_bytes"] > 0  # BlockReduce's TempStorage
    assert resources["twice"]["registers"] is not None


@pytest.mark.skipif(
    find_system_header("curand_kernel.h") is not None, reason="cuRAND headers are installed here"
)
def test_missing_curand_is_one_warning_and_no_false_errors(tmp_path: Path) -> None:
    data = check_json(tmp_path, "rng.cu", CURAND, "--no-nvcc")  # nvcc itself fails the file
    (warning,) = data["diagnostics"]
    assert warning["severity"] == "warning" and warning["line"] == 1
    assert "<curand_kernel.h> is not installed" in warning["message"]
    assert "cuda-toolkit[curand]" in warning["message"]
    resources = {k["name"]: k for k in data["kernels"]}
    assert resources["twice"]["registers"] is not None  # the rest of the file is compiled
