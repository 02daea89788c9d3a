"""Compile throughput of the tuner: configurations built per second (issue [tune], CPU acceptance).

Each configuration of a tiled matmul (`TILE` x `ITEMS` x `UNROLL`, 36 configurations) is built
exactly as `cuda-llm tune` builds it (`tune.search.binary_builder`: device unit, `-DNAME=value`,
NVRTC in the compile processes, the compile cache), from a thread pool of `--workers`. The cache
directory is fresh, so every build is a real NVRTC compile (the in-memory cache is this process's
own and starts empty); then the same configurations again, all cache hits. The compile processes
are started before the clock (`compile.isolated`'s pool warmed): their start is paid once per
session, not per configuration.

    python benchmarks/tune_compile_throughput.py [--workers 1 2 3] [--arch sm_90] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

KERNEL = """\
#ifndef TILE
#define TILE 16
#endif
#ifndef ITEMS
#define ITEMS 1
#endif
#ifndef UNROLL
#define UNROLL 1
#endif
constexpr int kUnroll = UNROLL;  // #pragma unroll takes a constant, not a macro

/* @cuda-llm
sizes.M = [1, 100, 1024]
sizes.N = [1, 70, 1024]
sizes.K = [1, 33, 1024]
tune.TILE = [8, 16, 32]
tune.ITEMS = [1, 2, 4, 8]
tune.UNROLL = [1, 2, 4]
restrict = ["TILE * TILE * ITEMS <= 8192"]
grid = ["cdiv(N, TILE)", "cdiv(M, TILE * ITEMS)"]
block = ["TILE", "TILE"]
args.a = "in float32[M * K]"
args.b = "in float32[K * N]"
args.c = "out float32[M * N]"
args.M = "M"
args.N = "N"
args.K = "K"
*/
extern "C" __global__ void matmul(const float* a, const float* b, float* c, int M, int N, int K) {
    __shared__ float as[TILE * ITEMS][TILE];
    __shared__ float bs[TILE][TILE];
    int col = blockIdx.x * TILE + threadIdx.x;
    int row0 = blockIdx.y * TILE * ITEMS + threadIdx.y;
    float acc[ITEMS];
#pragma unroll
    for (int r = 0; r < ITEMS; ++r) acc[r] = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
#pragma unroll
        for (int r = 0; r < ITEMS; ++r) {
            int row = row0 + r * TILE;
            int k = k0 + threadIdx.x;
            as[threadIdx.y + r * TILE][threadIdx.x] = (row < M && k < K) ? a[row * K + k] : 0.0f;
        }
        int kb = k0 + threadIdx.y;
        bs[threadIdx.y][threadIdx.x] = (kb < K && col < N) ? b[kb * N + col] : 0.0f;
        __syncthreads();
#pragma unroll kUnroll
        for (int k = 0; k < TILE; ++k) {
#pragma unroll
            for (int r = 0; r < ITEMS; ++r)
                acc[r] += as[threadIdx.y + r * TILE][k] * bs[k][threadIdx.x];
        }
        __syncthreads();
    }
#pragma unroll
    for (int r = 0; r < ITEMS; ++r) {
        int row = row0 + r * TILE;
        if (row < M && col < N) c[row * N + col] = acc[r];
    }
}
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = []
    for workers in args.workers:
        with tempfile.TemporaryDirectory() as cache:
            os.environ["CUDA_LLM_CACHE_DIR"] = cache
            results.append(_measure(workers, args.arch))
    if args.json:
        print(json.dumps({"cpus": os.cpu_count(), "runs": results}, indent=2))
    else:
        print(
            f"{os.cpu_count()} CPUs; {results[0]['configurations']} configurations of a tiled "
            f"matmul for {args.arch}"
        )
        for r in results:
            print(
                f"workers {r['workers']}: {r['compiled_per_s']:.2f} configurations/s compiled "
                f"({r['compile_s']:.1f} s, {r['failed']} failed), "
                f"{r['cached_per_s']:.0f}/s from the cache; {r['nvrtc_compiles']} NVRTC "
                f"compiles, load average {r['load_average']:.1f}"
            )
    return 0


def _measure(workers: int, arch: str) -> dict[str, float | int]:
    # imported after CUDA_LLM_CACHE_DIR is set; a fresh in-memory cache per run
    from cuda_llm_lsp.compile import cache as compile_cache
    from cuda_llm_lsp.compile.isolated import shared_pool
    from cuda_llm_lsp.config import Settings
    from cuda_llm_lsp.evaluate.candidate import CandidateRejected
    from cuda_llm_lsp.source.kernels import find_kernels
    from cuda_llm_lsp.source.spec import parse_spec
    from cuda_llm_lsp.tune.search import TuneRequest, binary_builder

    compile_cache._shared = compile_cache.CompileCache()  # nothing remembered from the last run
    (kernel,) = find_kernels(KERNEL)
    spec, errors = parse_spec(kernel, KERNEL)
    assert spec is not None and spec.tunables is not None, errors
    configs = list(spec.tunables.configurations())
    build = binary_builder(TuneRequest(KERNEL, "matmul", spec, Settings()), arch)
    pool = shared_pool()
    pool.warm()
    build(dict(spec.tunables.default))  # the processes have loaded NVRTC
    configs = [c for c in configs if c != spec.tunables.default]
    timings = []
    failed = 0
    before = pool.compiles
    for _ in range(2):  # compiled, then all from the cache
        start = time.perf_counter()
        with ThreadPoolExecutor(workers) as threads:
            built = list(threads.map(build, configs))
        timings.append(time.perf_counter() - start)
        failed = sum(isinstance(b, CandidateRejected) for b in built)
    return {
        "workers": workers,
        "configurations": len(configs),
        "compile_s": timings[0],
        "compiled_per_s": len(configs) / timings[0],
        "cached_per_s": len(configs) / timings[1],
        "failed": failed,
        "nvrtc_compiles": pool.compiles - before,  # one per configuration: no hit on the first pass
        "load_average": os.getloadavg()[0],
    }


if __name__ == "__main__":
    sys.exit(main())
