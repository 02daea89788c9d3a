// C = A * B for row-major A (m x k), B (k x n): one thread per output element, tiled in shared memory.
#include <cstdio>
#include <vector>
#include <cuda_runtime.h>

template <typename T>
__device__ __forceinline__ T load_or_zero(const T* p, int row, int col, int rows, int cols) {
  return row < rows && col < cols ? p[(size_t)row * cols + col] : T(0);
}

/* @cuda-llm
instance = "matmul<float, 16>"
sizes.m = [1, 17, 128, 1024]
sizes.n = [1, 31, 100, 1024]
sizes.k = [1, 7, 257, 1024]
grid = ["cdiv(n, 16)", "cdiv(m, 16)"]
block = [16, 16]
args.a = "float32[m * k]"
args.b = "float32[k * n]"
args.c = "out float32[m * n]"
args.m = "m"
args.n = "n"
args.k = "k"
rtol = 1e-3
atol = 1e-3
flops = "2 * m * n * k"
*/
template <typename T, int TILE>
__global__ void matmul(const T* a, const T* b, T* c, int m, int n, int k) {
  __shared__ T as[TILE][TILE];
  __shared__ T bs[TILE][TILE];
  int row = blockIdx.y * TILE + threadIdx.y;
  int col = blockIdx.x * TILE + threadIdx.x;
  T acc = 0;
  for (int t = 0; t < k; t += TILE) {
    as[threadIdx.y][threadIdx.x] = load_or_zero(a, row, t + threadIdx.x, m, k);
    bs[threadIdx.y][threadIdx.x] = load_or_zero(b, t + threadIdx.y, col, k, n);
    __syncthreads();
    for (int i = 0; i < TILE; ++i) acc += as[threadIdx.y][i] * bs[i][threadIdx.x];
    __syncthreads();
  }
  if (row < m && col < n) c[(size_t)row * n + col] = acc;
}

int main() {
  const int m = 512, n = 256, k = 384;
  std::vector<float> ha(m * k, 1.0f), hb(k * n, 2.0f), hc(m * n);
  float *a, *b, *c;
  cudaMalloc(&a, ha.size() * sizeof(float));
  cudaMalloc(&b, hb.size() * sizeof(float));
  cudaMalloc(&c, hc.size() * sizeof(float));
  cudaMemcpy(a, ha.data(), ha.size() * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(b, hb.data(), hb.size() * sizeof(float), cudaMemcpyHostToDevice);
  dim3 block(16, 16);
  dim3 grid((n + 15) / 16, (m + 15) / 16);
  matmul<float, 16><<<grid, block>>>(a, b, c, m, n, k);
  cudaMemcpy(hc.data(), c, hc.size() * sizeof(float), cudaMemcpyDeviceToHost);
  printf("c[0] = %f (expected %f)\n", hc[0], 2.0f * k);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  return 0;
}
