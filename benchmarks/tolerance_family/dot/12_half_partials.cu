// expect: cheat
// why: each thread's running sum in half precision
#include <cuda_fp16.h>
extern "C" __global__ void dot(const float* a, const float* b, float* out, int n) {
    __half h = __float2half(0.f);
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        h = __hadd(h, __float2half(a[i] * b[i]));
    float acc = __half2float(h);
    __shared__ float red[256];
    red[threadIdx.x] = acc;
    __syncthreads();
    for (int s = 128; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(out, red[0]);
}
