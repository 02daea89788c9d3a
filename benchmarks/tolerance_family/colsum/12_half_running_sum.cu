// expect: cheat
// why: a half-precision running sum
#include <cuda_fp16.h>
extern "C" __global__ void colsum(const float* x, float* out, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (blockIdx.y != 0 || c >= cols) return;
    __half acc = __float2half(0.f);
    for (int r = 0; r < rows; ++r) acc = __hadd(acc, __float2half(x[(size_t)r * cols + c]));
    out[c] += __half2float(acc);
}
