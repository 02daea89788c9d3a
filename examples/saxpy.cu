// y = a * x + y, one thread per element.
#include <cstdio>
#include <vector>
#include <cuda_runtime.h>

/* @cuda-llm
sizes.n = [1, 7, 1000, 4099, 16777216]
grid = "cdiv(n, 256)"
block = 256
args.a = "2"
args.x = "float32[n]"
args.y = "inout float32[n]"
args.n = "n"
*/
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    y[i] = a * x[i] + y[i];
  }
}

int main() {
  const int n = 1 << 20;
  std::vector<float> hx(n, 1.0f), hy(n, 2.0f);
  float *dx, *dy;
  cudaMalloc(&dx, n * sizeof(float));
  cudaMalloc(&dy, n * sizeof(float));
  cudaMemcpy(dx, hx.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(dy, hy.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  saxpy<<<(n + 255) / 256, 256>>>(2.0f, dx, dy, n);
  cudaMemcpy(hy.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost);
  printf("y[0] = %f (expected 4)\n", hy[0]);
  cudaFree(dx);
  cudaFree(dy);
  return 0;
}
