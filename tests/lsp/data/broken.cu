#include <vector>
#include <cstdio>
#include <cuda_runtime.h>

extern "C" __global__ void scale(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = v * undefined_factor;
    }
}

int main() {
    std::vector<float> host(1024, 1.0f);
    float *x = nullptr, *y = nullptr;
    cudaMalloc(&x, host.size() * sizeof(float));
    cudaMalloc(&y, host.size() * sizeof(float));
    cudaMemcpy(x, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice);
    scale<<<4, 256>>>(x, y, 1024);
    cudaDeviceSynchronize();
    printf("done\n");
    return 0;
}
