// Scientific: Monte Carlo integration of f(x, y) = exp(-(x^2 + y^2)) over the unit square,
// FP32. Each thread draws `samples` points from a counter-based hash RNG seeded by seeds[tid]
// (so every run, and every correct rewrite, draws the same points) and each block writes the
// sum of its threads' sums; the estimate is sum(partial) / (threads * samples).
// First version: one thread per stream, block sum by a shared-memory tree.
#include <cstdio>
#include <cuda_runtime.h>

__device__ __forceinline__ unsigned int pcg_hash(unsigned int v)
{
    unsigned int state = v * 747796405u + 2891336453u;
    unsigned int word = ((state >> ((state >> 28u) + 4u)) ^ state) * 277803737u;
    return (word >> 22u) ^ word;
}

/* @cuda-llm
sizes.threads = [1, 300, 10000, 1048576]
sizes.samples = [1, 17, 64, 256]
grid = "cdiv(threads, 256)"
block = 256
args.seeds = "uint32[threads]"
args.partial = "out float32[cdiv(threads, 256)]"
args.threads = "threads"
args.samples = "samples"
init.seeds = "randint(0, 1000000000)"
rtol = 1e-4
atol = 1e-3
flops = "12 * threads * samples"
*/
extern "C" __global__ void monte_carlo_f32(const unsigned int* seeds, float* partial, int threads,
                                           int samples)
{
    __shared__ float cache[256];
    int tid = blockIdx.x * blockDim.x + threadIdx.x;
    float sum = 0.0f;
    if (tid < threads) {
        unsigned int seed = seeds[tid];
        for (int s = 0; s < samples; ++s) {
            unsigned int hx = pcg_hash(seed ^ (2u * s) * 2654435769u);
            unsigned int hy = pcg_hash(seed ^ (2u * s + 1u) * 2654435769u);
            float x = (hx >> 8) * (1.0f / 16777216.0f);
            float y = (hy >> 8) * (1.0f / 16777216.0f);
            sum += expf(-(x * x + y * y));
        }
    }
    cache[threadIdx.x] = sum;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) cache[threadIdx.x] += cache[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = cache[0];
}

int main()
{
    const int threads = 1 << 16, samples = 64;
    const int blocks = (threads + 255) / 256;
    unsigned int* seeds;
    float* partial;
    cudaMalloc(&seeds, threads * sizeof(unsigned int));
    cudaMalloc(&partial, blocks * sizeof(float));
    cudaMemset(seeds, 0, threads * sizeof(unsigned int));
    monte_carlo_f32<<<blocks, 256>>>(seeds, partial, threads, samples);
    float h_partial[256];
    cudaMemcpy(h_partial, partial, blocks * sizeof(float), cudaMemcpyDeviceToHost);
    double total = 0;
    for (int b = 0; b < blocks; ++b) total += h_partial[b];
    printf("monte_carlo: integral ~ %f (exact 0.557746)\n", total / ((double)threads * samples));
    cudaFree(seeds); cudaFree(partial);
    return 0;
}
