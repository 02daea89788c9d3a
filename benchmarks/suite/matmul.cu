// Basic algebra: dense matrix multiply C = A B (row-major; A is M x K, B is K x N), FP32 and
// BF16 (float accumulation, BF16 result). First version: one thread per element of C.
#include <cstdio>
#include <cuda_runtime.h>
#include <cuda_bf16.h>

/* @cuda-llm
sizes.M = [1, 17, 100, 2048]
sizes.N = [1, 33, 129, 2048]
sizes.K = [1, 7, 250, 2048]
tune.BLOCK_X = [16, 8, 32, 64, 128]
tune.BLOCK_Y = [16, 1, 2, 4, 8, 32]
restrict = ["BLOCK_X * BLOCK_Y <= 1024", "BLOCK_X * BLOCK_Y >= 32"]
grid = ["cdiv(N, BLOCK_X)", "cdiv(M, BLOCK_Y)"]
block = ["BLOCK_X", "BLOCK_Y"]
args.A = "float32[M * K]"
args.B = "float32[K * N]"
args.C = "out float32[M * N]"
args.M = "M"
args.N = "N"
args.K = "K"
atol = 1e-3          # K-long sums: another summation order moves them by ~1e-5..1e-4
flops = "2 * M * N * K"
*/
extern "C" __global__ void matmul_f32(const float* A, const float* B, float* C, int M, int N, int K)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        float sum = 0.0f;
        for (int k = 0; k < K; ++k) {
            sum += A[(size_t)row * K + k] * B[(size_t)k * N + col];
        }
        C[(size_t)row * N + col] = sum;
    }
}

/* @cuda-llm
sizes.M = [1, 17, 100, 2048]
sizes.N = [1, 33, 129, 2048]
sizes.K = [1, 7, 250, 2048]
tune.BLOCK_X = [16, 8, 32, 64, 128]
tune.BLOCK_Y = [16, 1, 2, 4, 8, 32]
restrict = ["BLOCK_X * BLOCK_Y <= 1024", "BLOCK_X * BLOCK_Y >= 32"]
grid = ["cdiv(N, BLOCK_X)", "cdiv(M, BLOCK_Y)"]
block = ["BLOCK_X", "BLOCK_Y"]
args.A = "bfloat16[M * K]"
args.B = "bfloat16[K * N]"
args.C = "out bfloat16[M * N]"
args.M = "M"
args.N = "N"
args.K = "K"
flops = "2 * M * N * K"
*/
extern "C" __global__ void matmul_bf16(const __nv_bfloat16* A, const __nv_bfloat16* B,
                                       __nv_bfloat16* C, int M, int N, int K)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        float sum = 0.0f;
        for (int k = 0; k < K; ++k) {
            sum += __bfloat162float(A[(size_t)row * K + k]) * __bfloat162float(B[(size_t)k * N + col]);
        }
        C[(size_t)row * N + col] = __float2bfloat16(sum);
    }
}

int main()
{
    const int M = 512, N = 512, K = 512;
    float *A, *B, *C;
    cudaMalloc(&A, (size_t)M * K * sizeof(float));
    cudaMalloc(&B, (size_t)K * N * sizeof(float));
    cudaMalloc(&C, (size_t)M * N * sizeof(float));
    cudaMemset(A, 0, (size_t)M * K * sizeof(float));
    cudaMemset(B, 0, (size_t)K * N * sizeof(float));
    dim3 block(16, 16);
    dim3 grid((N + 15) / 16, (M + 15) / 16);
    matmul_f32<<<grid, block>>>(A, B, C, M, N, K);
    __nv_bfloat16 *hA, *hB, *hC;
    cudaMalloc(&hA, (size_t)M * K * sizeof(__nv_bfloat16));
    cudaMalloc(&hB, (size_t)K * N * sizeof(__nv_bfloat16));
    cudaMalloc(&hC, (size_t)M * N * sizeof(__nv_bfloat16));
    cudaMemset(hA, 0, (size_t)M * K * sizeof(__nv_bfloat16));
    cudaMemset(hB, 0, (size_t)K * N * sizeof(__nv_bfloat16));
    matmul_bf16<<<grid, block>>>(hA, hB, hC, M, N, K);
    cudaError_t err = cudaDeviceSynchronize();
    printf("matmul: %s\n", cudaGetErrorString(err));
    cudaFree(A); cudaFree(B); cudaFree(C); cudaFree(hA); cudaFree(hB); cudaFree(hC);
    return err == cudaSuccess ? 0 : 1;
}
