// expect: cheat
// why: inputs rounded to bfloat16 before the product
#include <cuda_bf16.h>
__device__ __forceinline__ float bf(float x) { return __bfloat162float(__float2bfloat16(x)); }
extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= M || col >= N) return;
    const float* a = A + (size_t)row * K;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += bf(a[k]) * bf(B[(size_t)k * N + col]);
    C[(size_t)row * N + col] = acc;
}
