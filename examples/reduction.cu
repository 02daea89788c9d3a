// Sum of n floats: each block reduces its slice in shared memory, then one atomicAdd.
#include <cstdio>
#include <vector>
#include <numeric>
#include <cuda_runtime.h>

/* @cuda-llm
instance = "block_sum<256>"
sizes.n = [1, 13, 1000, 65537, 16777216]
grid = "cdiv(n, 256)"
block = 256
args.x = "float32[n]"
args.total = "inout float32[1]"
args.n = "n"
init.x = "uniform(0, 1)"      # a sum far from zero: float atomics reorder additions
init.total = "zeros()"
rtol = 1e-3
atol = 1e-3
*/
template <int BLOCK>
__global__ void block_sum(const float* x, float* total, int n) {
  __shared__ float partial[BLOCK];
  int i = blockIdx.x * BLOCK + threadIdx.x;
  partial[threadIdx.x] = i < n ? x[i] : 0.0f;
  __syncthreads();
  for (int stride = BLOCK / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      partial[threadIdx.x] += partial[threadIdx.x + stride];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    atomicAdd(total, partial[0]);
  }
}

int main() {
  const int n = 1 << 20;
  std::vector<float> host(n, 1.0f);
  float *x, *total;
  cudaMalloc(&x, n * sizeof(float));
  cudaMalloc(&total, sizeof(float));
  cudaMemcpy(x, host.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemset(total, 0, sizeof(float));
  block_sum<256><<<(n + 255) / 256, 256>>>(x, total, n);
  float result = 0.0f;
  cudaMemcpy(&result, total, sizeof(float), cudaMemcpyDeviceToHost);
  printf("sum = %f (expected %f)\n", result, std::accumulate(host.begin(), host.end(), 0.0f));
  cudaFree(x);
  cudaFree(total);
  return 0;
}
