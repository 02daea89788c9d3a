// Basic algebra: dot product of two vectors, FP32 and BF16 inputs (float accumulation).
// Each block reduces its 256 products in shared memory and writes ONE partial sum; the host
// (or a second tiny launch) adds the partials. Writing per-block partials instead of a single
// atomicAdd keeps the result deterministic, so it can be compared with the oracle and across runs.
#include <cstdio>
#include <cuda_runtime.h>
#include <cuda_bf16.h>

/* @cuda-llm
sizes.n = [1, 1000, 65537, 16777216]
grid = "cdiv(n, 256)"
block = 256
args.a = "float32[n]"
args.b = "float32[n]"
args.partial = "out float32[cdiv(n, 256)]"
args.n = "n"
atol = 1e-4          # partial sums of 256 products can be near zero: reordering error ~1e-5
flops = "2 * n"
*/
extern "C" __global__ void dot_f32(const float* a, const float* b, float* partial, int n)
{
    __shared__ float cache[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    cache[threadIdx.x] = (i < n) ? a[i] * b[i] : 0.0f;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) {
            cache[threadIdx.x] += cache[threadIdx.x + stride];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        partial[blockIdx.x] = cache[0];
    }
}

/* @cuda-llm
sizes.n = [1, 1000, 65537, 16777216]
grid = "cdiv(n, 256)"
block = 256
args.a = "bfloat16[n]"
args.b = "bfloat16[n]"
args.partial = "out float32[cdiv(n, 256)]"
args.n = "n"
rtol = 1e-4
atol = 1e-4
flops = "2 * n"
*/
extern "C" __global__ void dot_bf16(const __nv_bfloat16* a, const __nv_bfloat16* b,
                                    float* partial, int n)
{
    __shared__ float cache[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    cache[threadIdx.x] = (i < n) ? __bfloat162float(a[i]) * __bfloat162float(b[i]) : 0.0f;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) {
            cache[threadIdx.x] += cache[threadIdx.x + stride];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        partial[blockIdx.x] = cache[0];
    }
}

int main()
{
    const int n = 1 << 20;
    const int blocks = (n + 255) / 256;
    float *a, *b, *partial;
    cudaMalloc(&a, n * sizeof(float));
    cudaMalloc(&b, n * sizeof(float));
    cudaMalloc(&partial, blocks * sizeof(float));
    cudaMemset(a, 0, n * sizeof(float));
    cudaMemset(b, 0, n * sizeof(float));
    dot_f32<<<blocks, 256>>>(a, b, partial, n);
    __nv_bfloat16 *ha, *hb;
    cudaMalloc(&ha, n * sizeof(__nv_bfloat16));
    cudaMalloc(&hb, n * sizeof(__nv_bfloat16));
    cudaMemset(ha, 0, n * sizeof(__nv_bfloat16));
    cudaMemset(hb, 0, n * sizeof(__nv_bfloat16));
    dot_bf16<<<blocks, 256>>>(ha, hb, partial, n);
    cudaError_t err = cudaDeviceSynchronize();
    printf("dot: %s\n", cudaGetErrorString(err));
    cudaFree(a); cudaFree(b); cudaFree(partial); cudaFree(ha); cudaFree(hb);
    return err == cudaSuccess ? 0 : 1;
}
