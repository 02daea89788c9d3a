// expect: honest
// why: four float accumulators over k (k mod 4), added at the end
#include <cuda_bf16.h>
#include <cuda_fp16.h>
extern "C" __global__ void matmul_bf16(const __nv_bfloat16* A, const __nv_bfloat16* B,
                                       __nv_bfloat16* C, int M, int N, int K) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= M || col >= N) return;
    const __nv_bfloat16* a = A + (size_t)row * K;
    float s[4] = {0.f, 0.f, 0.f, 0.f};
    for (int k = 0; k < K; ++k)
        s[k & 3] += __bfloat162float(a[k]) * __bfloat162float(B[(size_t)k * N + col]);
    C[(size_t)row * N + col] = __float2bfloat16((s[0] + s[1]) + (s[2] + s[3]));
}
