// expect: cheat
// why: the inputs rounded to bfloat16 before exp
#include <cuda_bf16.h>
__device__ __forceinline__ float bf(float v) { return __bfloat162float(__float2bfloat16(v)); }
__device__ float block_reduce(float v, bool is_max) {
    __shared__ float warp[8];
    for (int o = 16; o > 0; o >>= 1) {
        float w = __shfl_xor_sync(0xffffffffu, v, o);
        v = is_max ? fmaxf(v, w) : v + w;
    }
    if ((threadIdx.x & 31) == 0) warp[threadIdx.x >> 5] = v;
    __syncthreads();
    float t = warp[0];
    for (int i = 1; i < 8; ++i) t = is_max ? fmaxf(t, warp[i]) : t + warp[i];
    __syncthreads();
    return t;
}
extern "C" __global__ void softmax(const float* x, float* y, int rows, int cols) {
    int r = blockIdx.x;
    if (r >= rows) return;
    const float* xr = x + (size_t)r * cols;
    float m = -INFINITY;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, xr[c]);
    m = block_reduce(m, true);
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += expf(bf(xr[c]) - bf(m));
    s = block_reduce(s, false);
    float inv = 1.0f / s;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        float xv = xr[c] - m;
        y[(size_t)r * cols + c] = (expf(bf(xr[c]) - bf(m))) * inv;
    }
}
