// expect: honest
// why: two float partial sums, one over each half of k, the second half from its end
#include <cuda_bf16.h>
#include <cuda_fp16.h>
extern "C" __global__ void matmul_bf16(const __nv_bfloat16* A, const __nv_bfloat16* B,
                                       __nv_bfloat16* C, int M, int N, int K) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= M || col >= N) return;
    const __nv_bfloat16* a = A + (size_t)row * K;
    int h = K / 2;
    float lo = 0.f, hi = 0.f;
    for (int k = 0; k < h; ++k) lo += __bfloat162float(a[k]) * __bfloat162float(B[(size_t)k * N + col]);
    for (int k = K - 1; k >= h; --k) hi += __bfloat162float(a[k]) * __bfloat162float(B[(size_t)k * N + col]);
    C[(size_t)row * N + col] = __float2bfloat16(lo + hi);
}
