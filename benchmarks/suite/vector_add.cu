// Basic algebra: element-wise vector addition, c = a + b, in FP32 and BF16.
// First version: one thread per element, no vectorised loads.
#include <cstdio>
#include <cuda_runtime.h>
#include <cuda_bf16.h>

/* @cuda-llm
sizes.n = [1, 1000, 65537, 16777216]   # the last case (2^24) is timed
tune.THREADS = [256, 64, 128, 512, 1024]
grid = "cdiv(n, THREADS)"
block = "THREADS"
args.a = "float32[n]"
args.b = "float32[n]"
args.c = "out float32[n]"
args.n = "n"
flops = "n"
*/
extern "C" __global__ void vector_add_f32(const float* a, const float* b, float* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[i] = a[i] + b[i];
    }
}

/* @cuda-llm
sizes.n = [1, 1000, 65537, 16777216]
tune.THREADS = [256, 64, 128, 512, 1024]
grid = "cdiv(n, THREADS)"
block = "THREADS"
args.a = "bfloat16[n]"
args.b = "bfloat16[n]"
args.c = "out bfloat16[n]"
args.n = "n"
flops = "n"
*/
extern "C" __global__ void vector_add_bf16(const __nv_bfloat16* a, const __nv_bfloat16* b,
                                           __nv_bfloat16* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[i] = __float2bfloat16(__bfloat162float(a[i]) + __bfloat162float(b[i]));
    }
}

int main()
{
    const int n = 1 << 20;
    float *a, *b, *c;
    cudaMalloc(&a, n * sizeof(float));
    cudaMalloc(&b, n * sizeof(float));
    cudaMalloc(&c, n * sizeof(float));
    cudaMemset(a, 0, n * sizeof(float));
    cudaMemset(b, 0, n * sizeof(float));
    vector_add_f32<<<(n + 255) / 256, 256>>>(a, b, c, n);
    __nv_bfloat16 *ha, *hb, *hc;
    cudaMalloc(&ha, n * sizeof(__nv_bfloat16));
    cudaMalloc(&hb, n * sizeof(__nv_bfloat16));
    cudaMalloc(&hc, n * sizeof(__nv_bfloat16));
    cudaMemset(ha, 0, n * sizeof(__nv_bfloat16));
    cudaMemset(hb, 0, n * sizeof(__nv_bfloat16));
    vector_add_bf16<<<(n + 255) / 256, 256>>>(ha, hb, hc, n);
    cudaError_t err = cudaDeviceSynchronize();
    printf("vector_add: %s\n", cudaGetErrorString(err));
    cudaFree(a); cudaFree(b); cudaFree(c);
    cudaFree(ha); cudaFree(hb); cudaFree(hc);
    return err == cudaSuccess ? 0 : 1;
}
