// LLM kernels: RMS normalisation, y = x / sqrt(mean(x^2) + eps) * weight, FP32 and BF16.
// First version: one block per row, sum of squares reduced with a shared-memory tree.
#include <cstdio>
#include <cuda_runtime.h>
#include <cuda_bf16.h>

/* @cuda-llm
sizes.rows = [1, 5, 999, 4096]
sizes.cols = [1, 100, 1023, 4096]
grid = "rows"
block = 256
args.x = "float32[rows * cols]"
args.weight = "float32[cols]"
args.y = "out float32[rows * cols]"
args.rows = "rows"
args.cols = "cols"
args.eps = "0.00001"
flops = "4 * rows * cols"
*/
extern "C" __global__ void rms_norm_f32(const float* x, const float* weight, float* y,
                                        int rows, int cols, float eps)
{
    __shared__ float red[256];
    int row = blockIdx.x;
    if (row >= rows) return;
    const float* xr = x + (size_t)row * cols;
    float* yr = y + (size_t)row * cols;

    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += xr[c] * xr[c];
    red[threadIdx.x] = s;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) red[threadIdx.x] += red[threadIdx.x + stride];
        __syncthreads();
    }
    float inv_rms = rsqrtf(red[0] / cols + eps);
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        yr[c] = xr[c] * inv_rms * weight[c];
    }
}

/* @cuda-llm
sizes.rows = [1, 5, 999, 4096]
sizes.cols = [1, 100, 1023, 4096]
grid = "rows"
block = 256
args.x = "bfloat16[rows * cols]"
args.weight = "bfloat16[cols]"
args.y = "out bfloat16[rows * cols]"
args.rows = "rows"
args.cols = "cols"
args.eps = "0.00001"
flops = "4 * rows * cols"
*/
extern "C" __global__ void rms_norm_bf16(const __nv_bfloat16* x, const __nv_bfloat16* weight,
                                         __nv_bfloat16* y, int rows, int cols, float eps)
{
    __shared__ float red[256];
    int row = blockIdx.x;
    if (row >= rows) return;
    const __nv_bfloat16* xr = x + (size_t)row * cols;
    __nv_bfloat16* yr = y + (size_t)row * cols;

    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        float v = __bfloat162float(xr[c]);
        s += v * v;
    }
    red[threadIdx.x] = s;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) red[threadIdx.x] += red[threadIdx.x + stride];
        __syncthreads();
    }
    float inv_rms = rsqrtf(red[0] / cols + eps);
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        yr[c] = __float2bfloat16(__bfloat162float(xr[c]) * inv_rms * __bfloat162float(weight[c]));
    }
}

int main()
{
    const int rows = 999, cols = 1023;
    float *x, *w, *y;
    cudaMalloc(&x, (size_t)rows * cols * sizeof(float));
    cudaMalloc(&w, cols * sizeof(float));
    cudaMalloc(&y, (size_t)rows * cols * sizeof(float));
    cudaMemset(x, 0, (size_t)rows * cols * sizeof(float));
    cudaMemset(w, 0, cols * sizeof(float));
    rms_norm_f32<<<rows, 256>>>(x, w, y, rows, cols, 1e-5f);
    __nv_bfloat16 *hx, *hw, *hy;
    cudaMalloc(&hx, (size_t)rows * cols * sizeof(__nv_bfloat16));
    cudaMalloc(&hw, cols * sizeof(__nv_bfloat16));
    cudaMalloc(&hy, (size_t)rows * cols * sizeof(__nv_bfloat16));
    cudaMemset(hx, 0, (size_t)rows * cols * sizeof(__nv_bfloat16));
    cudaMemset(hw, 0, cols * sizeof(__nv_bfloat16));
    rms_norm_bf16<<<rows, 256>>>(hx, hw, hy, rows, cols, 1e-5f);
    cudaError_t err = cudaDeviceSynchronize();
    printf("rms_norm: %s\n", cudaGetErrorString(err));
    cudaFree(x); cudaFree(w); cudaFree(y); cudaFree(hx); cudaFree(hw); cudaFree(hy);
    return err == cudaSuccess ? 0 : 1;
}
