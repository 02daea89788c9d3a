// expect: cheat
// why: exp from a quadratic after range reduction by powers of two (a few % off)
#include <cuda_bf16.h>
__device__ __forceinline__ float pexp(float v) {
    float k = floorf(v * 1.44269504f);
    float t = v - k * 0.69314718f;
    return (1.0f + t * (1.0f + t * 0.5f)) * exp2f(k);
}
extern "C" __global__ void softmax_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, int rows,
                                        int cols) {
    __shared__ float stats[2];
    int r = blockIdx.x;
    if (r >= rows) return;
    const __nv_bfloat16* xr = x + (size_t)r * cols;
    if (threadIdx.x == 0) {
        float m = -INFINITY;
        for (int c = 0; c < cols; ++c) m = fmaxf(m, __bfloat162float(xr[c]));
        float s = 0.0f;
        for (int c = 0; c < cols; ++c) s += pexp(__bfloat162float(xr[c]) - m);
        stats[0] = m;
        stats[1] = 1.0f / s;
    }
    __syncthreads();
    float m = stats[0], inv = stats[1];
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        y[(size_t)r * cols + c] = __float2bfloat16(pexp(__bfloat162float(xr[c]) - m) * inv);
}
