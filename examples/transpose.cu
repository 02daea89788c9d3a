// out = transpose(in) for a rows x cols row-major matrix, through a padded shared tile.
#include <cstdio>
#include <vector>
#include <cuda_runtime.h>

#define TILE 32
#define ROWS_PER_PASS 8

/* @cuda-llm
sizes.rows = [1, 17, 1000, 4096]
sizes.cols = [1, 33, 999, 4096]
grid = ["cdiv(cols, 32)", "cdiv(rows, 32)"]
block = [32, 8]
args.in = "float32[rows * cols]"
args.out = "out float32[rows * cols]"
args.rows = "rows"
args.cols = "cols"
*/
__global__ void transpose(const float* in, float* out, int rows, int cols) {
  __shared__ float tile[TILE][TILE + 1];
  int x = blockIdx.x * TILE + threadIdx.x;
  int y = blockIdx.y * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += ROWS_PER_PASS) {
    if (x < cols && y + j < rows) {
      tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(y + j) * cols + x];
    }
  }
  __syncthreads();
  x = blockIdx.y * TILE + threadIdx.x;
  y = blockIdx.x * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += ROWS_PER_PASS) {
    if (x < rows && y + j < cols) {
      out[(size_t)(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
    }
  }
}

int main() {
  const int rows = 1024, cols = 768;
  std::vector<float> host(rows * cols);
  for (int i = 0; i < rows * cols; ++i) host[i] = static_cast<float>(i);
  float *in, *out;
  cudaMalloc(&in, host.size() * sizeof(float));
  cudaMalloc(&out, host.size() * sizeof(float));
  cudaMemcpy(in, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice);
  dim3 block(TILE, ROWS_PER_PASS);
  dim3 grid((cols + TILE - 1) / TILE, (rows + TILE - 1) / TILE);
  transpose<<<grid, block>>>(in, out, rows, cols);
  cudaMemcpy(host.data(), out, host.size() * sizeof(float), cudaMemcpyDeviceToHost);
  printf("out[1] = %f (expected %d)\n", host[1], cols);
  cudaFree(in);
  cudaFree(out);
  return 0;
}
