// Tiled transpose through shared memory: the tile and the rows each thread copies are tunable.
#include <cstdio>
#include <vector>
#include <cuda_runtime.h>

#ifndef TILE
#define TILE 16  // the square tile staged in shared memory
#endif
#ifndef BLOCK_ROWS
#define BLOCK_ROWS 16  // threads along y: each copies TILE / BLOCK_ROWS rows of the tile
#endif

/* @cuda-llm
sizes.rows = [1, 17, 1000, 4096]
sizes.cols = [1, 33, 999, 8192]
tune.TILE = [16, 32, 64]
tune.BLOCK_ROWS = [1, 2, 4, 8, 16]
restrict = ["TILE * BLOCK_ROWS <= 1024", "TILE % BLOCK_ROWS == 0"]
grid = ["cdiv(cols, TILE)", "cdiv(rows, TILE)"]
block = ["TILE", "BLOCK_ROWS"]
args.in = "float32[rows * cols]"
args.out = "out float32[rows * cols]"
args.rows = "rows"
args.cols = "cols"
*/
extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols) {
  __shared__ float tile[TILE][TILE + 1];
  int x = blockIdx.x * TILE + threadIdx.x;  // column of in
  int y = blockIdx.y * TILE + threadIdx.y;  // row of in
  for (int j = 0; j < TILE; j += BLOCK_ROWS)
    if (x < cols && y + j < rows) tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(y + j) * cols + x];
  __syncthreads();
  x = blockIdx.y * TILE + threadIdx.x;  // column of out (a row of in)
  y = blockIdx.x * TILE + threadIdx.y;  // row of out (a column of in)
  for (int j = 0; j < TILE; j += BLOCK_ROWS)
    if (x < rows && y + j < cols) out[(size_t)(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}

int main() {
  const int rows = 1000, cols = 999;
  std::vector<float> host(rows * cols);
  for (size_t i = 0; i < host.size(); ++i) host[i] = (float)i;
  float *in, *out;
  cudaMalloc(&in, host.size() * sizeof(float));
  cudaMalloc(&out, host.size() * sizeof(float));
  cudaMemcpy(in, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice);
  dim3 grid((cols + TILE - 1) / TILE, (rows + TILE - 1) / TILE), block(TILE, BLOCK_ROWS);
  transpose<<<grid, block>>>(in, out, rows, cols);
  cudaMemcpy(host.data(), out, host.size() * sizeof(float), cudaMemcpyDeviceToHost);
  printf("out[1] = %f (expected %f)\n", host[1], (float)cols);
  cudaFree(in);
  cudaFree(out);
  return 0;
}
