// expect: cheat
// why: every element rounded to bfloat16 before it is added
#include <cuda_bf16.h>
extern "C" __global__ void colsum(const float* x, float* out, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (blockIdx.y != 0 || c >= cols) return;
    float acc = 0.0f;
    for (int r = 0; r < rows; ++r) acc += __bfloat162float(__float2bfloat16(x[(size_t)r * cols + c]));
    out[c] += acc;
}
