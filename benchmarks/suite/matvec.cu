// Basic algebra: matrix-vector product y = A x (A row-major, rows x cols), FP32 and BF16.
// First version: one thread per output row, walking its row sequentially.
#include <cstdio>
#include <cuda_runtime.h>
#include <cuda_bf16.h>

/* @cuda-llm
sizes.rows = [1, 17, 1000, 8192]
sizes.cols = [1, 33, 999, 4096]
tune.THREADS = [128, 64, 256, 512, 1024]
grid = "cdiv(rows, THREADS)"
block = "THREADS"
args.A = "float32[rows * cols]"
args.x = "float32[cols]"
args.y = "out float32[rows]"
args.rows = "rows"
args.cols = "cols"
atol = 1e-3          # sums of 8192 products: a different summation order moves them by ~1e-4
flops = "2 * rows * cols"
*/
extern "C" __global__ void matvec_f32(const float* A, const float* x, float* y, int rows, int cols)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        float sum = 0.0f;
        for (int c = 0; c < cols; ++c) {
            sum += A[(size_t)r * cols + c] * x[c];
        }
        y[r] = sum;
    }
}

/* @cuda-llm
sizes.rows = [1, 17, 1000, 8192]
sizes.cols = [1, 33, 999, 4096]
tune.THREADS = [128, 64, 256, 512, 1024]
grid = "cdiv(rows, THREADS)"
block = "THREADS"
args.A = "bfloat16[rows * cols]"
args.x = "bfloat16[cols]"
args.y = "out bfloat16[rows]"
args.rows = "rows"
args.cols = "cols"
flops = "2 * rows * cols"
*/
extern "C" __global__ void matvec_bf16(const __nv_bfloat16* A, const __nv_bfloat16* x,
                                       __nv_bfloat16* y, int rows, int cols)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        float sum = 0.0f;
        for (int c = 0; c < cols; ++c) {
            sum += __bfloat162float(A[(size_t)r * cols + c]) * __bfloat162float(x[c]);
        }
        y[r] = __float2bfloat16(sum);
    }
}

int main()
{
    const int rows = 1024, cols = 1024;
    float *A, *x, *y;
    cudaMalloc(&A, (size_t)rows * cols * sizeof(float));
    cudaMalloc(&x, cols * sizeof(float));
    cudaMalloc(&y, rows * sizeof(float));
    cudaMemset(A, 0, (size_t)rows * cols * sizeof(float));
    cudaMemset(x, 0, cols * sizeof(float));
    matvec_f32<<<(rows + 127) / 128, 128>>>(A, x, y, rows, cols);
    __nv_bfloat16 *hA, *hx, *hy;
    cudaMalloc(&hA, (size_t)rows * cols * sizeof(__nv_bfloat16));
    cudaMalloc(&hx, cols * sizeof(__nv_bfloat16));
    cudaMalloc(&hy, rows * sizeof(__nv_bfloat16));
    cudaMemset(hA, 0, (size_t)rows * cols * sizeof(__nv_bfloat16));
    cudaMemset(hx, 0, cols * sizeof(__nv_bfloat16));
    matvec_bf16<<<(rows + 127) / 128, 128>>>(hA, hx, hy, rows, cols);
    cudaError_t err = cudaDeviceSynchronize();
    printf("matvec: %s\n", cudaGetErrorString(err));
    cudaFree(A); cudaFree(x); cudaFree(y); cudaFree(hA); cudaFree(hx); cudaFree(hy);
    return err == cudaSuccess ? 0 : 1;
}
