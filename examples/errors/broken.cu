// A device-code error on line 9, surrounded by host code that must not be reported.
#include <cstdio>
#include <vector>
#include <cuda_runtime.h>

__global__ void scale(float* data, float factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    data[i] = data[i] * facter;
  }
}

int main() {
  std::vector<float> host(1024, 1.0f);
  float* device = nullptr;
  cudaMalloc(&device, host.size() * sizeof(float));
  cudaMemcpy(device, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice);
  scale<<<(1024 + 255) / 256, 256>>>(device, 2.0f, 1024);
  cudaMemcpy(host.data(), device, host.size() * sizeof(float), cudaMemcpyDeviceToHost);
  printf("%f\n", host[0]);
  cudaFree(device);
  return 0;
}
