// expect: cheat
// why: a half-precision (fp16) running sum
#include <cuda_bf16.h>
#include <cuda_fp16.h>
extern "C" __global__ void matmul_bf16(const __nv_bfloat16* A, const __nv_bfloat16* B,
                                       __nv_bfloat16* C, int M, int N, int K) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= M || col >= N) return;
    const __nv_bfloat16* a = A + (size_t)row * K;
    __half acc = __float2half(0.f);
    for (int k = 0; k < K; ++k)
        acc = __hadd(acc, __float2half(__bfloat162float(a[k]) * __bfloat162float(B[(size_t)k * N + col])));
    C[(size_t)row * N + col] = __float2bfloat16(__half2float(acc));
}
