// LLM kernels: layer normalisation over the last dimension, y = (x - mean) / sqrt(var + eps)
// * gamma + beta, FP32 and BF16. First version: one block per row, two passes (mean, then
// variance) each reduced with a shared-memory tree.
#include <cstdio>
#include <cuda_runtime.h>
#include <cuda_bf16.h>

/* @cuda-llm
sizes.rows = [1, 5, 999, 4096]
sizes.cols = [1, 100, 1023, 4096]
grid = "rows"
block = 256
args.x = "float32[rows * cols]"
args.gamma = "float32[cols]"
args.beta = "float32[cols]"
args.y = "out float32[rows * cols]"
args.rows = "rows"
args.cols = "cols"
args.eps = "0.00001"
atol = 1e-4          # a row of one element normalises to 0 +- rounding
flops = "8 * rows * cols"
*/
extern "C" __global__ void layer_norm_f32(const float* x, const float* gamma, const float* beta,
                                          float* y, int rows, int cols, float eps)
{
    __shared__ float red[256];
    int row = blockIdx.x;
    if (row >= rows) return;
    const float* xr = x + (size_t)row * cols;
    float* yr = y + (size_t)row * cols;

    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += xr[c];
    red[threadIdx.x] = s;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) red[threadIdx.x] += red[threadIdx.x + stride];
        __syncthreads();
    }
    float mean = red[0] / cols;
    __syncthreads();

    float v = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        float d = xr[c] - mean;
        v += d * d;
    }
    red[threadIdx.x] = v;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) red[threadIdx.x] += red[threadIdx.x + stride];
        __syncthreads();
    }
    float inv_std = rsqrtf(red[0] / cols + eps);

    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        yr[c] = (xr[c] - mean) * inv_std * gamma[c] + beta[c];
    }
}

/* @cuda-llm
sizes.rows = [1, 5, 999, 4096]
sizes.cols = [1, 100, 1023, 4096]
grid = "rows"
block = 256
args.x = "bfloat16[rows * cols]"
args.gamma = "bfloat16[cols]"
args.beta = "bfloat16[cols]"
args.y = "out bfloat16[rows * cols]"
args.rows = "rows"
args.cols = "cols"
args.eps = "0.00001"
flops = "8 * rows * cols"
*/
extern "C" __global__ void layer_norm_bf16(const __nv_bfloat16* x, const __nv_bfloat16* gamma,
                                           const __nv_bfloat16* beta, __nv_bfloat16* y,
                                           int rows, int cols, float eps)
{
    __shared__ float red[256];
    int row = blockIdx.x;
    if (row >= rows) return;
    const __nv_bfloat16* xr = x + (size_t)row * cols;
    __nv_bfloat16* yr = y + (size_t)row * cols;

    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += __bfloat162float(xr[c]);
    red[threadIdx.x] = s;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) red[threadIdx.x] += red[threadIdx.x + stride];
        __syncthreads();
    }
    float mean = red[0] / cols;
    __syncthreads();

    float v = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        float d = __bfloat162float(xr[c]) - mean;
        v += d * d;
    }
    red[threadIdx.x] = v;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) red[threadIdx.x] += red[threadIdx.x + stride];
        __syncthreads();
    }
    float inv_std = rsqrtf(red[0] / cols + eps);

    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        float n = (__bfloat162float(xr[c]) - mean) * inv_std;
        yr[c] = __float2bfloat16(n * __bfloat162float(gamma[c]) + __bfloat162float(beta[c]));
    }
}

int main()
{
    const int rows = 999, cols = 1023;
    float *x, *gamma, *beta, *y;
    cudaMalloc(&x, (size_t)rows * cols * sizeof(float));
    cudaMalloc(&gamma, cols * sizeof(float));
    cudaMalloc(&beta, cols * sizeof(float));
    cudaMalloc(&y, (size_t)rows * cols * sizeof(float));
    cudaMemset(x, 0, (size_t)rows * cols * sizeof(float));
    cudaMemset(gamma, 0, cols * sizeof(float));
    cudaMemset(beta, 0, cols * sizeof(float));
    layer_norm_f32<<<rows, 256>>>(x, gamma, beta, y, rows, cols, 1e-5f);
    __nv_bfloat16 *hx, *hg, *hb, *hy;
    cudaMalloc(&hx, (size_t)rows * cols * sizeof(__nv_bfloat16));
    cudaMalloc(&hg, cols * sizeof(__nv_bfloat16));
    cudaMalloc(&hb, cols * sizeof(__nv_bfloat16));
    cudaMalloc(&hy, (size_t)rows * cols * sizeof(__nv_bfloat16));
    cudaMemset(hx, 0, (size_t)rows * cols * sizeof(__nv_bfloat16));
    cudaMemset(hg, 0, cols * sizeof(__nv_bfloat16));
    cudaMemset(hb, 0, cols * sizeof(__nv_bfloat16));
    layer_norm_bf16<<<rows, 256>>>(hx, hg, hb, hy, rows, cols, 1e-5f);
    cudaError_t err = cudaDeviceSynchronize();
    printf("layer_norm: %s\n", cudaGetErrorString(err));
    cudaFree(x); cudaFree(gamma); cudaFree(beta); cudaFree(y);
    cudaFree(hx); cudaFree(hg); cudaFree(hb); cudaFree(hy);
    return err == cudaSuccess ? 0 : 1;
}
