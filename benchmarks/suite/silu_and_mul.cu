// LLM kernels: SiLU-and-mul (the SwiGLU MLP gate): x is [tokens, 2 * d] holding the gate in
// the first half of each row and the up projection in the second; out[t, j] =
// silu(x[t, j]) * x[t, d + j]. BF16 is the templated kernel (tested through `instance`), FP32
// a plain extern "C" one. First version: one thread per output element.
#include <cstdio>
#include <cuda_runtime.h>
#include <cuda_bf16.h>

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v)
{
    return __float2bfloat16(v);
}

/* @cuda-llm
sizes.tokens = [1, 5, 100, 4096]
sizes.d = [1, 33, 1000, 4096]
tune.THREADS = [256, 64, 128, 512, 1024]
grid = "cdiv(tokens * d, THREADS)"
block = "THREADS"
instance = "silu_and_mul<__nv_bfloat16>"
args.x = "bfloat16[tokens * 2 * d]"
args.out = "out bfloat16[tokens * d]"
args.tokens = "tokens"
args.d = "d"
init.x = "normal(0, 2)"
flops = "6 * tokens * d"
*/
template <typename T>
__global__ void silu_and_mul(const T* x, T* out, int tokens, int d)
{
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long long)tokens * d) return;
    long long t = idx / d;
    int j = idx % d;
    float g = to_float(x[t * 2 * d + j]);
    float u = to_float(x[t * 2 * d + d + j]);
    out[idx] = from_float<T>(g / (1.0f + expf(-g)) * u);
}

/* @cuda-llm
sizes.tokens = [1, 5, 100, 4096]
sizes.d = [1, 33, 1000, 4096]
tune.THREADS = [256, 64, 128, 512, 1024]
grid = "cdiv(tokens * d, THREADS)"
block = "THREADS"
args.x = "float32[tokens * 2 * d]"
args.out = "out float32[tokens * d]"
args.tokens = "tokens"
args.d = "d"
init.x = "normal(0, 2)"
flops = "6 * tokens * d"
*/
extern "C" __global__ void silu_and_mul_f32(const float* x, float* out, int tokens, int d)
{
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long long)tokens * d) return;
    long long t = idx / d;
    int j = idx % d;
    float g = x[t * 2 * d + j];
    float u = x[t * 2 * d + d + j];
    out[idx] = g / (1.0f + expf(-g)) * u;
}

int main()
{
    const int tokens = 100, d = 1000;
    int blocks = (tokens * d + 255) / 256;
    float *x, *out;
    cudaMalloc(&x, (size_t)tokens * 2 * d * sizeof(float));
    cudaMalloc(&out, (size_t)tokens * d * sizeof(float));
    cudaMemset(x, 0, (size_t)tokens * 2 * d * sizeof(float));
    silu_and_mul_f32<<<blocks, 256>>>(x, out, tokens, d);
    __nv_bfloat16 *hx, *hout;
    cudaMalloc(&hx, (size_t)tokens * 2 * d * sizeof(__nv_bfloat16));
    cudaMalloc(&hout, (size_t)tokens * d * sizeof(__nv_bfloat16));
    cudaMemset(hx, 0, (size_t)tokens * 2 * d * sizeof(__nv_bfloat16));
    silu_and_mul<__nv_bfloat16><<<blocks, 256>>>(hx, hout, tokens, d);
    cudaError_t err = cudaDeviceSynchronize();
    printf("silu_and_mul: %s\n", cudaGetErrorString(err));
    cudaFree(x); cudaFree(out); cudaFree(hx); cudaFree(hout);
    return err == cudaSuccess ? 0 : 1;
}
