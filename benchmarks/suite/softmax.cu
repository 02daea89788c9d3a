// LLM kernels: row-wise softmax over the last dimension (rows x cols), FP32 and BF16.
// First version: one thread per row, three passes (max, sum of exponentials, normalise).
#include <cstdio>
#include <cuda_runtime.h>
#include <cuda_bf16.h>

/* @cuda-llm
sizes.rows = [1, 7, 1000, 4096]
sizes.cols = [1, 33, 1000, 4096]
tune.THREADS = [128, 64, 256, 512, 1024]
grid = "cdiv(rows, THREADS)"
block = "THREADS"
args.x = "float32[rows * cols]"
args.y = "out float32[rows * cols]"
args.rows = "rows"
args.cols = "cols"
init.x = "normal(0, 2)"
flops = "5 * rows * cols"
*/
extern "C" __global__ void softmax_f32(const float* x, float* y, int rows, int cols)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* xr = x + (size_t)r * cols;
    float* yr = y + (size_t)r * cols;
    float m = __int_as_float(0xff800000);  // -infinity
    for (int c = 0; c < cols; ++c) m = fmaxf(m, xr[c]);
    float sum = 0.0f;
    for (int c = 0; c < cols; ++c) sum += expf(xr[c] - m);
    for (int c = 0; c < cols; ++c) yr[c] = expf(xr[c] - m) / sum;
}

/* @cuda-llm
sizes.rows = [1, 7, 1000, 4096]
sizes.cols = [1, 33, 1000, 4096]
tune.THREADS = [128, 64, 256, 512, 1024]
grid = "cdiv(rows, THREADS)"
block = "THREADS"
args.x = "bfloat16[rows * cols]"
args.y = "out bfloat16[rows * cols]"
args.rows = "rows"
args.cols = "cols"
init.x = "normal(0, 2)"
flops = "5 * rows * cols"
*/
extern "C" __global__ void softmax_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, int rows, int cols)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const __nv_bfloat16* xr = x + (size_t)r * cols;
    __nv_bfloat16* yr = y + (size_t)r * cols;
    float m = __int_as_float(0xff800000);  // -infinity
    for (int c = 0; c < cols; ++c) m = fmaxf(m, __bfloat162float(xr[c]));
    float sum = 0.0f;
    for (int c = 0; c < cols; ++c) sum += expf(__bfloat162float(xr[c]) - m);
    for (int c = 0; c < cols; ++c) yr[c] = __float2bfloat16(expf(__bfloat162float(xr[c]) - m) / sum);
}

int main()
{
    const int rows = 1000, cols = 1000;
    float *x, *y;
    cudaMalloc(&x, (size_t)rows * cols * sizeof(float));
    cudaMalloc(&y, (size_t)rows * cols * sizeof(float));
    cudaMemset(x, 0, (size_t)rows * cols * sizeof(float));
    softmax_f32<<<(rows + 127) / 128, 128>>>(x, y, rows, cols);
    __nv_bfloat16 *hx, *hy;
    cudaMalloc(&hx, (size_t)rows * cols * sizeof(__nv_bfloat16));
    cudaMalloc(&hy, (size_t)rows * cols * sizeof(__nv_bfloat16));
    cudaMemset(hx, 0, (size_t)rows * cols * sizeof(__nv_bfloat16));
    softmax_bf16<<<(rows + 127) / 128, 128>>>(hx, hy, rows, cols);
    cudaError_t err = cudaDeviceSynchronize();
    printf("softmax: %s\n", cudaGetErrorString(err));
    cudaFree(x); cudaFree(y); cudaFree(hx); cudaFree(hy);
    return err == cudaSuccess ? 0 : 1;
}
