// expect: honest
// why: a block per row, warp-shuffle reductions in float, __expf, a reciprocal
#include <cuda_bf16.h>

extern "C" __global__ void softmax_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, int rows,
                                        int cols) {
    __shared__ float part[8];
    int r = blockIdx.x;
    if (r >= rows) return;
    const __nv_bfloat16* xr = x + (size_t)r * cols;
    float m = -INFINITY;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, __bfloat162float(xr[c]));
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = m;
    __syncthreads();
    m = part[0];
    for (int i = 1; i < 8; ++i) m = fmaxf(m, part[i]);
    __syncthreads();
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s = s + __expf(__bfloat162float(xr[c]) - m);
    float fs = s;
    for (int o = 16; o > 0; o >>= 1) fs += __shfl_xor_sync(0xffffffffu, fs, o);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = fs;
    __syncthreads();
    fs = 0.0f;
    for (int i = 0; i < 8; ++i) fs += part[i];
    float inv = 1.0f / fs;
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        y[(size_t)r * cols + c] = __float2bfloat16(__expf(__bfloat162float(xr[c]) - m) * inv);
}
