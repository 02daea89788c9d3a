// expect: cheat
// why: a half-precision running sum
#include <cuda_fp16.h>
extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= M || col >= N) return;
    const float* a = A + (size_t)row * K;
    __half acc = __float2half(0.f);
    for (int k = 0; k < K; ++k) acc = __hadd(acc, __float2half(a[k] * B[(size_t)k * N + col]));
    C[(size_t)row * N + col] = __half2float(acc);
}
