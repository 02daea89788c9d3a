"""Does where a kernel's buffers lie in device memory change its time? (issue 41)

Two runs of the evaluator can disagree by more than their own confidence intervals on a short
memory-bound kernel. This times one kernel in ONE process on several placements of its buffers
(fresh allocations, a spacer of random size between them), each placement's median over many
launches, with an L2 flush before each launch of one of three kinds: a memset over twice the L2
(the evaluator's flush until issue 41: it leaves L2 full of dirty lines), a read of the same
buffer (`device_checks`' `cl_flush`, the evaluator's flush now: it leaves clean lines), or none.
If the placements' medians spread as much as two processes do, placement is the between-run
noise; the memset and read columns show what the flush's own write-back added to the kernel.

    python benchmarks/timing_placement.py                      # 8 placements, 300 launches each
    python benchmarks/timing_placement.py --placements 12 --launches 500
"""

from __future__ import annotations

import argparse
import ctypes
import random
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SOURCE = """extern "C" __global__ void twice(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
"""
N = 4 << 20
FLUSHES = ("memset", "read", "none")  # the L2 flush before each launch (module docstring)


def _ok(result: Any) -> Any:
    err, *rest = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        raise RuntimeError(f"CUDA error {err}")
    return rest[0] if len(rest) == 1 else rest


def _cubin(nvrtc: Any, arch: str) -> bytes:
    prog = _ok(nvrtc.nvrtcCreateProgram(SOURCE.encode(), b"twice.cu", 0, [], []))
    _ok(nvrtc.nvrtcCompileProgram(prog, 1, [f"--gpu-architecture={arch}".encode()]))
    size = _ok(nvrtc.nvrtcGetCUBINSize(prog))
    data = bytearray(size)
    _ok(nvrtc.nvrtcGetCUBIN(prog, data))
    return bytes(data)


def main() -> int:
    from cuda.bindings import driver as d
    from cuda.bindings import nvrtc

    from cuda_llm_lsp.evaluate import device_checks
    from cuda_llm_lsp.evaluate.worker import helper_cubin

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--placements", type=int, default=8)
    parser.add_argument("--launches", type=int, default=300)
    args = parser.parse_args()

    _ok(d.cuInit(0))
    dev = _ok(d.cuDeviceGet(0))
    ctx = _ok(d.cuDevicePrimaryCtxRetain(dev))
    _ok(d.cuCtxSetCurrent(ctx))
    attr = d.CUdevice_attribute
    major = _ok(d.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev))
    minor = _ok(d.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev))
    l2 = _ok(d.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev))
    module = _ok(d.cuModuleLoadData(_cubin(nvrtc, f"sm_{major}{minor}")))
    fn = _ok(d.cuModuleGetFunction(module, b"twice"))
    helpers = _ok(d.cuModuleLoadData(helper_cubin(f"sm_{major}{minor}")))
    read_flush = _ok(d.cuModuleGetFunction(helpers, b"cl_flush"))
    stream = _ok(d.cuStreamCreate(0))
    flush_words = max(2 * l2, 64 << 20) // 4
    flush_buf = _ok(d.cuMemAlloc(flush_words * 4))
    _ok(d.cuMemsetD32Async(flush_buf, 0, flush_words, stream))
    start, end = _ok(d.cuEventCreate(0)), _ok(d.cuEventCreate(0))
    rng = random.Random(41)
    kept: list[Any] = []

    def launch(kernel: Any, grid: int, *args: Any) -> None:
        params = (ctypes.c_void_p * len(args))(*(ctypes.addressof(a) for a in args))
        _ok(d.cuLaunchKernel(kernel, grid, 1, 1, 256, 1, 1, 0, stream, ctypes.addressof(params), 0))

    def time_once(x: Any, y: Any, flush: str) -> float:
        if flush == "memset":
            _ok(d.cuMemsetD32Async(flush_buf, rng.randrange(1 << 16), flush_words, stream))
        elif flush == "read":
            vectors = flush_words // 4
            grid = min(-(-vectors // 256), device_checks.MAX_BLOCKS)
            launch(read_flush, grid, ctypes.c_uint64(int(flush_buf)), ctypes.c_uint64(vectors),
                   ctypes.c_uint32(device_checks.FLUSH_NEVER))  # fmt: skip
        _ok(d.cuEventRecord(start, stream))
        launch(fn, N // 256, ctypes.c_uint64(int(x)), ctypes.c_uint64(int(y)), ctypes.c_int(N))
        _ok(d.cuEventRecord(end, stream))
        _ok(d.cuEventSynchronize(end))
        return float(_ok(d.cuEventElapsedTime(start, end)))

    rows = []
    for p in range(args.placements):
        kept.append(_ok(d.cuMemAlloc(rng.randrange(1, 64) << 20)))  # a spacer
        x, y = _ok(d.cuMemAlloc(N * 4)), _ok(d.cuMemAlloc(N * 4))
        kept += [x, y]
        _ok(d.cuMemsetD32Async(x, 0x3F800000, N, stream))
        for _ in range(20):
            time_once(x, y, "memset")
        row = {}
        for flush in FLUSHES:
            samples = [time_once(x, y, flush) for _ in range(args.launches)]
            row[flush] = statistics.median(samples)
        rows.append((p, int(x), row))
    print("| placement | x address | " + " | ".join(f"median ms, {f}" for f in FLUSHES) + " |")
    print("|---:|---:|" + "---:|" * len(FLUSHES))
    for p, x, row in rows:
        print(f"| {p} | {x:#x} | " + " | ".join(f"{row[f]:.5f}" for f in FLUSHES) + " |")
    for flush in FLUSHES:
        medians = [row[flush] for _, _, row in rows]
        spread = (max(medians) - min(medians)) / min(medians) * 100
        print(f"{flush}: placements' medians spread {spread:.2f}% (min {min(medians):.5f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
