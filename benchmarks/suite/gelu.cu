// LLM kernels: GELU activation (tanh approximation, as in GPT-2 / BERT), FP32 and BF16.
// First version: one thread per element.
#include <cstdio>
#include <cuda_runtime.h>
#include <cuda_bf16.h>

/* @cuda-llm
sizes.n = [1, 1000, 65537, 16777216]
tune.THREADS = [256, 64, 128, 512, 1024]
grid = "cdiv(n, THREADS)"
block = "THREADS"
args.x = "float32[n]"
args.y = "out float32[n]"
args.n = "n"
init.x = "normal(0, 3)"
flops = "10 * n"
*/
extern "C" __global__ void gelu_f32(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        float inner = 0.7978845608f * (v + 0.044715f * v * v * v);
        y[i] = 0.5f * v * (1.0f + tanhf(inner));
    }
}

/* @cuda-llm
sizes.n = [1, 1000, 65537, 16777216]
tune.THREADS = [256, 64, 128, 512, 1024]
grid = "cdiv(n, THREADS)"
block = "THREADS"
args.x = "bfloat16[n]"
args.y = "out bfloat16[n]"
args.n = "n"
init.x = "normal(0, 3)"
flops = "10 * n"
*/
extern "C" __global__ void gelu_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = __bfloat162float(x[i]);
        float inner = 0.7978845608f * (v + 0.044715f * v * v * v);
        y[i] = __float2bfloat16(0.5f * v * (1.0f + tanhf(inner)));
    }
}

int main()
{
    const int n = 1 << 20;
    float *x, *y;
    cudaMalloc(&x, n * sizeof(float));
    cudaMalloc(&y, n * sizeof(float));
    cudaMemset(x, 0, n * sizeof(float));
    gelu_f32<<<(n + 255) / 256, 256>>>(x, y, n);
    __nv_bfloat16 *hx, *hy;
    cudaMalloc(&hx, n * sizeof(__nv_bfloat16));
    cudaMalloc(&hy, n * sizeof(__nv_bfloat16));
    cudaMemset(hx, 0, n * sizeof(__nv_bfloat16));
    gelu_bf16<<<(n + 255) / 256, 256>>>(hx, hy, n);
    cudaError_t err = cudaDeviceSynchronize();
    printf("gelu: %s\n", cudaGetErrorString(err));
    cudaFree(x); cudaFree(y); cudaFree(hx); cudaFree(hy);
    return err == cudaSuccess ? 0 : 1;
}
