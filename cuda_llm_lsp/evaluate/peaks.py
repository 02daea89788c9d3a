"""The device's peak arithmetic rates, measured once per device and cached (platformdirs cache).

FP32: the FMA rate (cuBLAS SGEMM without TF32 through PyTorch or CuPy when installed, else an
FMA-chain kernel run through our own evaluator). BF16: the tensor-core rate (a BF16 GEMM through
PyTorch, else a WMMA loop kernel through our own evaluator; WMMA does not reach Hopper's wgmma
peak, which the report notes). The library measurement runs in a child process
(`python -m cuda_llm_lsp.evaluate.peaks`) so its CUDA context never meets the evaluator's worker.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_llm_lsp.cachefiles import write_json_atomic
from cuda_llm_lsp.compile.child_env import child_env
from cuda_llm_lsp.compile.tools import GPU_LIMITS, neutral_cwd, python_command, spawn_options
from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.evaluate.candidate import build_binary
from cuda_llm_lsp.evaluate.types import DeviceFacts, Evaluator, KernelBinary
from cuda_llm_lsp.evaluate.vendor import Backend
from cuda_llm_lsp.source.kernels import find_kernels
from cuda_llm_lsp.source.spec import parse_spec

GEMM_N = 8192


@dataclass(frozen=True)
class Peaks:
    fp32_gflops: float | None
    bf16_gflops: float | None
    source: str  # how they were measured
    note: str = ""


def cache_path() -> Path:
    """`peaks.json` in the platformdirs cache dir (`CUDA_LLM_CACHE_DIR` overrides it)."""
    import platformdirs

    override = os.environ.get("CUDA_LLM_CACHE_DIR")
    base = Path(override) if override else Path(platformdirs.user_cache_dir("cuda-llm-lsp"))
    return base / "peaks.json"


def _key(facts: DeviceFacts) -> str:
    return f"{facts.name}|{facts.arch}|{facts.sm_count} SMs|{facts.clock_khz} kHz"


def device_peaks(
    facts: DeviceFacts, evaluator: Evaluator, *, refresh: bool = False, cache: Path | None = None
) -> Peaks:
    """Cached peaks for this device, measuring what is missing."""
    cache = cache or cache_path()
    stored: dict[str, Any] = {}
    try:
        stored = json.loads(cache.read_text())
    except (OSError, ValueError):
        stored = {}
    entry = stored.get(_key(facts))
    if not refresh and isinstance(entry, dict) and entry.get("fp32_gflops"):
        source = str(entry.get("source", "")) + " (cached)"
        return Peaks(entry["fp32_gflops"], entry.get("bf16_gflops"), source, entry.get("note", ""))
    peaks = measure(facts, evaluator)
    if peaks.fp32_gflops:
        stored[_key(facts)] = {
            "fp32_gflops": peaks.fp32_gflops,
            "bf16_gflops": peaks.bf16_gflops,
            "source": peaks.source,
            "note": peaks.note,
            "measured": time.time(),
        }
        write_json_atomic(cache, stored, indent=1)
    return peaks


def measure(facts: DeviceFacts, evaluator: Evaluator) -> Peaks:
    fp32, bf16, source = _library_peaks()
    notes = []
    sources = [source] if source else []
    if fp32 is None:
        fp32 = _kernel_peak(FMA_KERNEL, "fma_peak", evaluator, facts, FMA_FLOPS)
        sources.append("FP32: FMA-chain kernel")
    if bf16 is None:
        bf16 = _kernel_peak(MMA_KERNEL, "bf16_mma_peak", evaluator, facts, MMA_FLOPS)
        if bf16:
            sources.append("BF16: WMMA loop kernel")
            notes.append("BF16 peak measured with WMMA (mma.sync), below Hopper's wgmma peak")
    return Peaks(fp32, bf16, "; ".join(sources), "; ".join(notes))


def _library_peaks(timeout_s: float = 180.0) -> tuple[float | None, float | None, str]:
    try:
        proc = subprocess.run(
            python_command("cuda_llm_lsp.evaluate.peaks"),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=child_env(),
            cwd=neutral_cwd(),
            **spawn_options(GPU_LIMITS),
        )
        data = json.loads(proc.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return None, None, ""
    return data.get("fp32_gflops"), data.get("bf16_gflops"), str(data.get("source", ""))


# --- fallback kernels, timed by our own evaluator ------------------------------------------

FMA_THREADS = 1 << 20
FMA_ITERS = 2048
FMA_FLOPS = FMA_THREADS * FMA_ITERS * 8 * 2
FMA_KERNEL = f"""
/* @cuda-llm
sizes.n = [256, {FMA_THREADS}]
grid = "cdiv(n, 256)"
block = 256
args.out = "out float32[n]"
args.n = "n"
args.iters = "{FMA_ITERS}"
*/
extern "C" __global__ void fma_peak(float* out, int n, int iters)
{{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float a0 = i, a1 = i + 1, a2 = i + 2, a3 = i + 3;
    float a4 = i + 4, a5 = i + 5, a6 = i + 6, a7 = i + 7;
    const float b = 0.999999f, c = 1e-7f;
    for (int k = 0; k < iters; ++k) {{
        a0 = fmaf(a0, b, c); a1 = fmaf(a1, b, c); a2 = fmaf(a2, b, c); a3 = fmaf(a3, b, c);
        a4 = fmaf(a4, b, c); a5 = fmaf(a5, b, c); a6 = fmaf(a6, b, c); a7 = fmaf(a7, b, c);
    }}
    if (i < n) out[i] = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
}}
"""

MMA_WARPS = 132 * 32
MMA_ITERS = 1024
MMA_FLOPS = MMA_WARPS * MMA_ITERS * 4 * 2 * 16 * 16 * 16
MMA_KERNEL = f"""
#include <mma.h>
#include <cuda_bf16.h>
/* @cuda-llm
sizes.warps = [8, {MMA_WARPS}]
grid = "cdiv(warps, 8)"
block = 256
args.out = "out float32[warps * 256]"
args.warps = "warps"
args.iters = "{MMA_ITERS}"
*/
extern "C" __global__ void bf16_mma_peak(float* out, int warps, int iters)
{{
    using namespace nvcuda;
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> c0, c1, c2, c3;
    wmma::fill_fragment(a, __float2bfloat16(0.0078125f));
    wmma::fill_fragment(b, __float2bfloat16(0.0078125f));
    wmma::fill_fragment(c0, 0.0f);
    wmma::fill_fragment(c1, 0.0f);
    wmma::fill_fragment(c2, 0.0f);
    wmma::fill_fragment(c3, 0.0f);
    for (int k = 0; k < iters; ++k) {{
        wmma::mma_sync(c0, a, b, c0);
        wmma::mma_sync(c1, a, b, c1);
        wmma::mma_sync(c2, a, b, c2);
        wmma::mma_sync(c3, a, b, c3);
    }}
    for (int t = 0; t < c0.num_elements; ++t) c0.x[t] += c1.x[t] + c2.x[t] + c3.x[t];
    if (warp < warps)
        wmma::store_matrix_sync(out + (size_t)warp * 256, c0, 16, wmma::mem_row_major);
}}
"""


def _kernel_peak(
    source: str, name: str, evaluator: Evaluator, facts: DeviceFacts, flops: int
) -> float | None:
    kernel = next((k for k in find_kernels(source) if k.name == name), None)
    if kernel is None:
        return None
    spec, _ = parse_spec(kernel, source)
    binary = build_binary(source, None, name, Settings(), arch=facts.arch)
    if spec is None or not isinstance(binary, KernelBinary):
        return None
    result = evaluator.benchmark(binary, spec, seed=0)
    t = result.baseline
    if result.status != "ok" or t is None or t.median_ms <= 0:
        return None
    return flops / (t.median_ms * 1e-3) / 1e9


# --- the child process: library GEMMs --------------------------------------------------------


def gemm_gflops(backend: Any, a: Any, b: Any, n: int) -> float:
    """GFLOP/s of an n x n x n GEMM, timed like the vendor rows (`vendor.Backend.time`)."""
    ms = backend.time(lambda: a @ b)
    return 2.0 * n**3 / (ms * 1e-3) / 1e9


def main() -> int:
    out: dict[str, Any] = {"fp32_gflops": None, "bf16_gflops": None, "source": ""}
    n = GEMM_N
    try:
        backend = Backend("torch", 0)  # also turns TF32 off: the FP32 rate is the FMA rate
        torch = backend.lib
        a = torch.randn(n, n, device="cuda")
        b = torch.randn(n, n, device="cuda")
        out["fp32_gflops"] = gemm_gflops(backend, a, b, n)
        out["bf16_gflops"] = gemm_gflops(backend, a.bfloat16(), b.bfloat16(), n)
        out["source"] = f"cuBLAS GEMM {n}³ via PyTorch (FP32 without TF32)"
    except Exception:
        try:
            backend = Backend("cupy", 0)
            cupy = backend.lib
            a = cupy.random.standard_normal((n, n), dtype=cupy.float32)
            b = cupy.random.standard_normal((n, n), dtype=cupy.float32)
            out["fp32_gflops"] = gemm_gflops(backend, a, b, n)
            out["source"] = f"cuBLAS SGEMM {n}³ via CuPy"
        except Exception:
            pass
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
