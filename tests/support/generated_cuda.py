"""Generated CUDA files of a given length for latency tests and benchmarks (issue 17).

Each block is a `__device__` helper, a test spec and a kernel with shared memory and a loop:
25 lines, so 3,000 lines hold 120 kernels. `edit` changes the middle kernel alone (a constant,
and with `tile` its shared array's size), the way a user edits one kernel of a big file.
"""

from __future__ import annotations

from dataclasses import dataclass

_BLOCK = """\
__device__ __forceinline__ float helper_{i}(float v, float s) {{
    return v * s + {i}.0f;
}}

/* @cuda-llm
sizes.n = [1, 1000]
grid = "cdiv(n, 256)"
block = 256
args.x = "float32[n]"
args.y = "out float32[n]"
args.n = "n"
*/
extern "C" __global__ void kernel_{i}(const float* x, float* y, int n) {{
    __shared__ float tile[{tile}];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? x[i] : 0.0f;
    tile[threadIdx.x] = helper_{i}(v, {scale}f);
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {{
        if (threadIdx.x < s) tile[threadIdx.x] += tile[threadIdx.x + s];
        __syncthreads();
    }}
    if (i < n) y[i] = tile[threadIdx.x] + tile[0] * {i};
}}

"""
_HEAD = "#include <cuda_runtime.h>\n\n"
LINES_PER_KERNEL = _BLOCK.count("\n")


@dataclass(frozen=True)
class Generated:
    text: str
    kernels: int
    edited: str  # the name of the kernel `edit` changes


def generate(lines: int, edit: int = 0, tile: int = 256) -> Generated:
    """About `lines` lines; `edit` and `tile` change the middle kernel only."""
    count = max(1, round((lines - _HEAD.count("\n")) / LINES_PER_KERNEL))
    middle = count // 2
    parts = [_HEAD]
    for i in range(count):
        scale = f"{1 + edit * 1e-4:.6f}" if i == middle else "1.000000"
        parts.append(_BLOCK.format(i=i, scale=scale, tile=tile if i == middle else 256))
    return Generated("".join(parts), count, f"kernel_{middle}")
