// LLM kernels: rotary position embedding (RoPE, "rotate half" / GPT-NeoX layout) applied in
// place to q[tokens, heads, dim]; cos/sin tables are [tokens, dim / 2]. FP32 and BF16.
// First version: one thread per rotated pair.
#include <cstdio>
#include <cuda_runtime.h>
#include <cuda_bf16.h>

/* @cuda-llm
sizes.tokens = [1, 7, 100, 4096]
sizes.heads = [1, 3, 8, 32]
sizes.dim = [2, 64, 128, 128]
tune.THREADS = [256, 64, 128, 512, 1024]
grid = "cdiv(tokens * heads * (dim / 2), THREADS)"
block = "THREADS"
args.q = "inout float32[tokens * heads * dim]"
args.cos_t = "float32[tokens * (dim / 2)]"
args.sin_t = "float32[tokens * (dim / 2)]"
args.tokens = "tokens"
args.heads = "heads"
args.dim = "dim"
flops = "3 * tokens * heads * dim"
*/
extern "C" __global__ void rope_f32(float* q, const float* cos_t, const float* sin_t,
                                    int tokens, int heads, int dim)
{
    int half = dim / 2;
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long total = (long long)tokens * heads * half;
    if (idx >= total) return;
    int i = idx % half;
    long long th = idx / half;  // token * heads + head
    int t = th / heads;
    float* v = q + th * dim;
    float c = cos_t[(size_t)t * half + i];
    float s = sin_t[(size_t)t * half + i];
    float x1 = v[i];
    float x2 = v[i + half];
    v[i] = x1 * c - x2 * s;
    v[i + half] = x2 * c + x1 * s;
}

/* @cuda-llm
sizes.tokens = [1, 7, 100, 4096]
sizes.heads = [1, 3, 8, 32]
sizes.dim = [2, 64, 128, 128]
tune.THREADS = [256, 64, 128, 512, 1024]
grid = "cdiv(tokens * heads * (dim / 2), THREADS)"
block = "THREADS"
args.q = "inout bfloat16[tokens * heads * dim]"
args.cos_t = "bfloat16[tokens * (dim / 2)]"
args.sin_t = "bfloat16[tokens * (dim / 2)]"
args.tokens = "tokens"
args.heads = "heads"
args.dim = "dim"
flops = "3 * tokens * heads * dim"
*/
extern "C" __global__ void rope_bf16(__nv_bfloat16* q, const __nv_bfloat16* cos_t,
                                     const __nv_bfloat16* sin_t, int tokens, int heads, int dim)
{
    int half = dim / 2;
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long total = (long long)tokens * heads * half;
    if (idx >= total) return;
    int i = idx % half;
    long long th = idx / half;
    int t = th / heads;
    __nv_bfloat16* v = q + th * dim;
    float c = __bfloat162float(cos_t[(size_t)t * half + i]);
    float s = __bfloat162float(sin_t[(size_t)t * half + i]);
    float x1 = __bfloat162float(v[i]);
    float x2 = __bfloat162float(v[i + half]);
    v[i] = __float2bfloat16(x1 * c - x2 * s);
    v[i + half] = __float2bfloat16(x2 * c + x1 * s);
}

int main()
{
    const int tokens = 100, heads = 8, dim = 128;
    const size_t nq = (size_t)tokens * heads * dim, nt = (size_t)tokens * (dim / 2);
    float *q, *c, *s;
    cudaMalloc(&q, nq * sizeof(float));
    cudaMalloc(&c, nt * sizeof(float));
    cudaMalloc(&s, nt * sizeof(float));
    cudaMemset(q, 0, nq * sizeof(float));
    cudaMemset(c, 0, nt * sizeof(float));
    cudaMemset(s, 0, nt * sizeof(float));
    int blocks = (int)((tokens * heads * (dim / 2) + 255) / 256);
    rope_f32<<<blocks, 256>>>(q, c, s, tokens, heads, dim);
    __nv_bfloat16 *hq, *hc, *hs;
    cudaMalloc(&hq, nq * sizeof(__nv_bfloat16));
    cudaMalloc(&hc, nt * sizeof(__nv_bfloat16));
    cudaMalloc(&hs, nt * sizeof(__nv_bfloat16));
    cudaMemset(hq, 0, nq * sizeof(__nv_bfloat16));
    cudaMemset(hc, 0, nt * sizeof(__nv_bfloat16));
    cudaMemset(hs, 0, nt * sizeof(__nv_bfloat16));
    rope_bf16<<<blocks, 256>>>(hq, hc, hs, tokens, heads, dim);
    cudaError_t err = cudaDeviceSynchronize();
    printf("rope: %s\n", cudaGetErrorString(err));
    cudaFree(q); cudaFree(c); cudaFree(s); cudaFree(hq); cudaFree(hc); cudaFree(hs);
    return err == cudaSuccess ? 0 : 1;
}
