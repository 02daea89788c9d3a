"""Candidates with their own launch on a real GPU (issue [launch], H100 acceptance): a planted
block-per-row softmax and a 32x32-tile transpose with a different block are correct on every
case and faster than the original's launch; bad launches are refused before anything runs
(`bad_launch`) or caught by the poison check (`unwritten_output`). Each accepted one prints one
JSON line (run with -s) for benchmarks/RESULTS.md.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from cuda_llm_lsp.compile.candidate_policy import strip_spec_comments
from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.evaluate.candidate import build_binary, find_kernel
from cuda_llm_lsp.evaluate.gpu import GpuEvaluator
from cuda_llm_lsp.evaluate.types import KernelBinary
from cuda_llm_lsp.source.spec import TestSpec, parse_spec
from cuda_llm_lsp.source.spec.launch import parse_launch_block

pytestmark = pytest.mark.gpu

SOFTMAX = """
/* @cuda-llm
sizes.R = [1, 37, 4096]
sizes.C = [1, 300, 4096]
grid = "cdiv(R, 128)"
block = 128
args.x = "float32[R * C]"
args.y = "out float32[R * C]"
args.rows = "R"
args.cols = "C"
rtol = 1e-4
atol = 1e-6
*/
extern "C" __global__ void softmax(const float* x, float* y, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* xr = x + (size_t)r * cols;
    float* yr = y + (size_t)r * cols;
    float m = -INFINITY;
    for (int c = 0; c < cols; ++c) m = fmaxf(m, xr[c]);
    float s = 0.0f;
    for (int c = 0; c < cols; ++c) s += expf(xr[c] - m);
    for (int c = 0; c < cols; ++c) yr[c] = expf(xr[c] - m) / s;
}
"""

SOFTMAX_BLOCK_PER_ROW = """
/* @cuda-llm launch
grid = "R"
block = 256
smem = "256 * 4"
*/
extern "C" __global__ void softmax(const float* x, float* y, int rows, int cols) {
    extern __shared__ float buf[];
    const float* xr = x + (size_t)blockIdx.x * cols;
    float* yr = y + (size_t)blockIdx.x * cols;
    float m = -INFINITY;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, xr[c]);
    buf[threadIdx.x] = m;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) buf[threadIdx.x] = fmaxf(buf[threadIdx.x], buf[threadIdx.x + k]);
        __syncthreads();
    }
    m = buf[0];
    __syncthreads();
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += expf(xr[c] - m);
    buf[threadIdx.x] = s;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) buf[threadIdx.x] += buf[threadIdx.x + k];
        __syncthreads();
    }
    s = buf[0];
    for (int c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = expf(xr[c] - m) / s;
}
"""

TRANSPOSE = """
/* @cuda-llm
sizes.N = [1, 33, 8192]
sizes.M = [1, 65, 8192]
grid = ["cdiv(M, 16)", "cdiv(N, 16)"]
block = [16, 16]
args.a = "float32[N * M]"
args.b = "out float32[M * N]"
args.rows = "N"
args.cols = "M"
*/
extern "C" __global__ void transpose(const float* a, float* b, int rows, int cols) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < cols && y < rows) b[(size_t)x * rows + y] = a[(size_t)y * cols + x];
}
"""

TRANSPOSE_TILED = """
/* @cuda-llm launch
grid = ["cdiv(M, 32)", "cdiv(N, 32)"]
block = [32, 8]
*/
extern "C" __global__ void transpose(const float* a, float* b, int rows, int cols) {
    __shared__ float tile[32][33];
    int x = blockIdx.x * 32 + threadIdx.x;
    int y = blockIdx.y * 32 + threadIdx.y;
    for (int j = 0; j < 32; j += 8)
        if (x < cols && y + j < rows)
            tile[threadIdx.y + j][threadIdx.x] = a[(size_t)(y + j) * cols + x];
    __syncthreads();
    x = blockIdx.y * 32 + threadIdx.x;
    y = blockIdx.x * 32 + threadIdx.y;
    for (int j = 0; j < 32; j += 8)
        if (x < rows && y + j < cols)
            b[(size_t)(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}
"""


@pytest.fixture(scope="module")
def evaluator() -> GpuEvaluator:
    ev = GpuEvaluator()
    yield ev
    ev.close()


def _spec(text: str, name: str) -> TestSpec:
    kernel = find_kernel(text, name)
    assert kernel is not None
    spec, errors = parse_spec(kernel, text)
    assert spec is not None, errors
    return spec


def _own(candidate: str, name: str, spec: TestSpec) -> TestSpec:
    """The candidate's launch block applied to the original's spec (as the FSR loop does)."""
    kernel = find_kernel(candidate, name)
    assert kernel is not None
    config, errors = parse_launch_block(kernel, spec, candidate)
    assert config is not None, errors
    return config.applied_to(spec)


def _build(text: str, name: str, arch: str, candidate: str | None = None) -> KernelBinary:
    source = strip_spec_comments(candidate).code if candidate is not None else None
    built = build_binary(text, None, name, Settings(), kernel_source=source, arch=arch)
    assert isinstance(built, KernelBinary), built
    return built


@pytest.mark.parametrize(
    ("text", "candidate", "name", "least"),
    [
        (SOFTMAX, SOFTMAX_BLOCK_PER_ROW, "softmax", 3.0),  # 10.3x measured on an H100
        (TRANSPOSE, TRANSPOSE_TILED, "transpose", 1.3),  # 32x32 tiles against 16x16 naive
    ],
)
def test_a_candidate_with_its_own_launch_is_correct_and_faster(
    evaluator: GpuEvaluator, text: str, candidate: str, name: str, least: float
) -> None:
    arch = evaluator.device_facts().arch
    spec = _spec(text, name)
    own = _own(candidate, name, spec)
    base, cand = _build(text, name, arch), _build(text, name, arch, candidate)
    r = evaluator.evaluate(base, cand, spec, seed=11, candidate_spec=own)
    print(
        json.dumps(
            {
                "kernel": name,
                "launch": own.grid + own.block + (own.smem,),
                "status": r.status,
                "speedup": r.speedup,
                "candidate_ms": r.candidate.median_ms if r.candidate else None,
                "baseline_ms": r.baseline.median_ms if r.baseline else None,
            }
        )
    )
    assert r.status == "ok", r.message
    assert r.cases_passed == len(spec.cases())
    assert r.speedup is not None and r.speedup >= least, r.message
    # the same candidate with the original's launch is wrong: the launch is really its own
    wrong = evaluator.evaluate(base, cand, spec, seed=11)
    assert wrong.status != "ok", wrong.message


@pytest.mark.parametrize(
    ("change", "status", "says"),
    [
        ({"block": ("2048",)}, "bad_launch", "2048"),
        ({"smem": "300000"}, "bad_launch", "300000 bytes"),
        ({"grid": ("cdiv(R, 2)",)}, "unwritten_output", ""),
    ],
)
def test_bad_launches_are_refused(
    evaluator: GpuEvaluator, change: dict[str, object], status: str, says: str
) -> None:
    arch = evaluator.device_facts().arch
    spec = _spec(SOFTMAX, "softmax")
    own = replace(_own(SOFTMAX_BLOCK_PER_ROW, "softmax", spec), **change)  # type: ignore[arg-type]
    base = _build(SOFTMAX, "softmax", arch)
    cand = _build(SOFTMAX, "softmax", arch, SOFTMAX_BLOCK_PER_ROW)
    r = evaluator.evaluate(base, cand, spec, seed=13, candidate_spec=own)
    assert r.status == status, r.message
    assert says in r.message


def test_a_launch_block_naming_an_unknown_size_is_refused() -> None:
    """Parsed before anything is built: the FSR loop reports it as `bad_launch`."""
    spec = _spec(SOFTMAX, "softmax")
    candidate = SOFTMAX_BLOCK_PER_ROW.replace('grid = "R"', 'grid = "rows_total"')
    kernel = find_kernel(candidate, "softmax")
    assert kernel is not None
    config, errors = parse_launch_block(kernel, spec, candidate)
    assert config is None and any("rows_total" in e.message for e in errors), errors
