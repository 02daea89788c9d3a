// expect: cheat
// why: the block reductions of the sum and of the centred squares done in half precision
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
#include <cuda_fp16.h>
__device__ float block_sum_half(float v) {  /* every addition of the reduction in half */
    __shared__ __half warp[8];
    __half h = __float2half(v);
    for (int o = 16; o > 0; o >>= 1) h = __hadd(h, __shfl_xor_sync(0xffffffffu, h, o));
    if ((threadIdx.x & 31) == 0) warp[threadIdx.x >> 5] = h;
    __syncthreads();
    __half t = __float2half(0.0f);
    for (int i = 0; i < 8; ++i) t = __hadd(t, warp[i]);
    __syncthreads();
    return __half2float(t);
}
extern "C" __global__ void layernorm(const float* x, float* y, int rows, int cols) {
    int r = blockIdx.x;
    if (r >= rows) return;
    const float* xr = x + (size_t)r * cols;
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += xr[c];
    float mean = block_sum(s) / cols;
    float q = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) q += (xr[c] - mean) * (xr[c] - mean);
    float rstd = 1.0f / sqrtf(block_sum_half(q) / cols + 1e-5f);
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        y[(size_t)r * cols + c] = (xr[c] - mean) * rstd;
}
