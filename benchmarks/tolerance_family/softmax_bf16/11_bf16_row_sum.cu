// expect: cheat
// why: the row's sum of exponentials accumulated in bfloat16
#include <cuda_bf16.h>
extern "C" __global__ void softmax_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, int rows,
                                        int cols) {
    __shared__ float stats[2];
    int r = blockIdx.x;
    if (r >= rows) return;
    const __nv_bfloat16* xr = x + (size_t)r * cols;
    if (threadIdx.x == 0) {
        float m = -INFINITY;
        for (int c = 0; c < cols; ++c) m = fmaxf(m, __bfloat162float(xr[c]));
        __nv_bfloat16 s = __float2bfloat16(0.0f);
        for (int c = 0; c < cols; ++c)
            s = __hadd(s, __float2bfloat16(__expf(__bfloat162float(xr[c]) - m)));
        stats[0] = m;
        stats[1] = 1.0f / __bfloat162float(s);
    }
    __syncthreads();
    float m = stats[0], inv = stats[1];
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        y[(size_t)r * cols + c] = __float2bfloat16(__expf(__bfloat162float(xr[c]) - m) * inv);
}
