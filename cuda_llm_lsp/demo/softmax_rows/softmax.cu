// Row-wise softmax of a rows x cols matrix: one block per row, max and sum in shared memory.
#include <math.h>
#include <cstdio>
#include <vector>
#include <cuda_runtime.h>

/* @cuda-llm
sizes.rows = [1, 3, 100, 4096]
sizes.cols = [1, 31, 1000, 4096]
grid = "rows"
block = 128
args.in = "float32[rows * cols]"
args.out = "out float32[rows * cols]"
args.rows = "rows"
args.cols = "cols"
init.in = "normal(0, 4)"
*/
extern "C" __global__ void softmax_rows(const float* in, float* out, int rows, int cols) {
  __shared__ float scratch[128];
  int row = blockIdx.x;
  if (row >= rows) return;
  const float* x = in + (size_t)row * cols;
  float* y = out + (size_t)row * cols;

  float local_max = -INFINITY;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) local_max = fmaxf(local_max, x[c]);
  scratch[threadIdx.x] = local_max;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) scratch[threadIdx.x] = fmaxf(scratch[threadIdx.x], scratch[threadIdx.x + s]);
    __syncthreads();
  }
  float row_max = scratch[0];
  __syncthreads();

  float local_sum = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) local_sum += expf(x[c] - row_max);
  scratch[threadIdx.x] = local_sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) scratch[threadIdx.x] += scratch[threadIdx.x + s];
    __syncthreads();
  }
  float inv_sum = 1.0f / scratch[0];
  for (int c = threadIdx.x; c < cols; c += blockDim.x) y[c] = expf(x[c] - row_max) * inv_sum;
}

int main() {
  const int rows = 512, cols = 1000;
  std::vector<float> host(rows * cols, 0.5f);
  float *in, *out;
  cudaMalloc(&in, host.size() * sizeof(float));
  cudaMalloc(&out, host.size() * sizeof(float));
  cudaMemcpy(in, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice);
  softmax_rows<<<rows, 128>>>(in, out, rows, cols);
  cudaMemcpy(host.data(), out, host.size() * sizeof(float), cudaMemcpyDeviceToHost);
  printf("out[0] = %f (expected %f)\n", host[0], 1.0f / cols);
  cudaFree(in);
  cudaFree(out);
  return 0;
}
