// Naive C = A B in bfloat16 (float accumulation, one rounding at the store): one thread per
// element, k in order. The spec's default bfloat16 tolerances (rtol 1e-2, atol 1e-2).
#include <cuda_bf16.h>
/* @cuda-llm
sizes.M = [1, 100, 1024]
sizes.N = [1, 129, 1024]
sizes.K = [1, 250, 2048]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
block = [16, 16]
args.A = "bfloat16[M * K]"
args.B = "bfloat16[K * N]"
args.C = "out bfloat16[M * N]"
args.M = "M"
args.N = "N"
args.K = "K"
*/
extern "C" __global__ void matmul_bf16(const __nv_bfloat16* A, const __nv_bfloat16* B,
                                       __nv_bfloat16* C, int M, int N, int K) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k)
        acc += __bfloat162float(A[(size_t)row * K + k]) * __bfloat162float(B[(size_t)k * N + col]);
    C[(size_t)row * N + col] = __float2bfloat16(acc);
}
