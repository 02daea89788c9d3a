// expect: cheat
// why: float sums of 64 products, each rounded to bfloat16 before they are added up
#include <cuda_bf16.h>
extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= M || col >= N) return;
    const float* a = A + (size_t)row * K;
    float total = 0.f, part = 0.f;
    for (int k = 0; k < K; ++k) {
        part += a[k] * B[(size_t)k * N + col];
        if ((k & 63) == 63) { total += __bfloat162float(__float2bfloat16(part)); part = 0.f; }
    }
    C[(size_t)row * N + col] = total + part;
}
