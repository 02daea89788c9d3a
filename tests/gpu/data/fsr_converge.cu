// y = 2x, computed the slow way: a fixed-point iteration that converges to 2x (the FSR GPU test's
// planted-speedup kernel: 64 iterations reach the same fixed point as 1024, about 10x sooner).
#include <cstdio>
#include <vector>
#include <cuda_runtime.h>

#define ITERATIONS 1024

/* @cuda-llm
sizes.n = [1, 1000, 4097, 8388608]
grid = "cdiv(n, 256)"
block = 256
args.x = "float32[n]"
args.y = "out float32[n]"
args.n = "n"
*/
extern "C" __global__ void converge(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = x[i], acc = 0.0f;
    for (int k = 0; k < ITERATIONS; ++k) acc = fmaf(acc, 0.5f, v);
    y[i] = acc;
  }
}

int main() {
  const int n = 1 << 20;
  std::vector<float> host(n, 1.0f);
  float *x, *y;
  cudaMalloc(&x, n * sizeof(float));
  cudaMalloc(&y, n * sizeof(float));
  cudaMemcpy(x, host.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  converge<<<(n + 255) / 256, 256>>>(x, y, n);
  cudaMemcpy(host.data(), y, n * sizeof(float), cudaMemcpyDeviceToHost);
  printf("y[0] = %f (expected 2)\n", host[0]);
  cudaFree(x);
  cudaFree(y);
  return 0;
}
