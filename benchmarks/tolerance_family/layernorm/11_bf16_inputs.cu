// expect: cheat
// why: the row read as bfloat16 (statistics and output from the rounded values)
#include <cuda_bf16.h>
__device__ float block_sum(float v) {
    __shared__ float warp[8];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) warp[threadIdx.x >> 5] = v;
    __syncthreads();
    float t = 0.0f;
    for (int i = 0; i < 8; ++i) t += warp[i];
    __syncthreads();
    return t;
}
__device__ __forceinline__ float bf(float v) { return __bfloat162float(__float2bfloat16(v)); }
extern "C" __global__ void layernorm(const float* x, float* y, int rows, int cols) {
    int r = blockIdx.x;
    if (r >= rows) return;
    const float* xr = x + (size_t)r * cols;
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += bf(xr[c]);
    float mean = block_sum(s) / cols;
    float q = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) q += (bf(xr[c]) - mean) * (bf(xr[c]) - mean);
    float rstd = 1.0f / sqrtf(block_sum(q) / cols + 1e-5f);
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        y[(size_t)r * cols + c] = (bf(xr[c]) - mean) * rstd;
}
