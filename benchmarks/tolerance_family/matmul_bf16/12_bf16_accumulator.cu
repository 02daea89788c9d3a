// expect: cheat
// why: a bfloat16 running sum (__hfma on bfloat16 operands)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
extern "C" __global__ void matmul_bf16(const __nv_bfloat16* A, const __nv_bfloat16* B,
                                       __nv_bfloat16* C, int M, int N, int K) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= M || col >= N) return;
    const __nv_bfloat16* a = A + (size_t)row * K;
    __nv_bfloat16 acc = __float2bfloat16(0.f);
    for (int k = 0; k < K; ++k) acc = __hfma(a[k], B[(size_t)k * N + col], acc);
    C[(size_t)row * N + col] = acc;
}
