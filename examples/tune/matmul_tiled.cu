// Tiled matmul C = A x B (row-major): the tile, the rows per thread and the unroll are tunable.
#include <cstdio>
#include <vector>
#include <cuda_runtime.h>

#ifndef TILE
#define TILE 16
#endif
#ifndef ITEMS
#define ITEMS 1
#endif
#ifndef UNROLL
#define UNROLL 1
#endif
constexpr int kUnroll = UNROLL;  // #pragma unroll takes a constant, not a macro

/* @cuda-llm
sizes.M = [1, 100, 1024]
sizes.N = [1, 70, 1024]
sizes.K = [1, 33, 1024]
tune.TILE = [8, 16, 32]
tune.ITEMS = [1, 2, 4, 8]
tune.UNROLL = [1, 2, 4]
restrict = ["TILE * TILE * ITEMS <= 8192"]
grid = ["cdiv(N, TILE)", "cdiv(M, TILE * ITEMS)"]
block = ["TILE", "TILE"]
args.a = "in float32[M * K]"
args.b = "in float32[K * N]"
args.c = "out float32[M * N]"
args.M = "M"
args.N = "N"
args.K = "K"
*/
extern "C" __global__ void matmul(const float* a, const float* b, float* c, int M, int N, int K) {
    __shared__ float as[TILE * ITEMS][TILE];
    __shared__ float bs[TILE][TILE];
    int col = blockIdx.x * TILE + threadIdx.x;
    int row0 = blockIdx.y * TILE * ITEMS + threadIdx.y;
    float acc[ITEMS];
#pragma unroll
    for (int r = 0; r < ITEMS; ++r) acc[r] = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
#pragma unroll
        for (int r = 0; r < ITEMS; ++r) {
            int row = row0 + r * TILE;
            int k = k0 + threadIdx.x;
            as[threadIdx.y + r * TILE][threadIdx.x] = (row < M && k < K) ? a[row * K + k] : 0.0f;
        }
        int kb = k0 + threadIdx.y;
        bs[threadIdx.y][threadIdx.x] = (kb < K && col < N) ? b[kb * N + col] : 0.0f;
        __syncthreads();
#pragma unroll kUnroll
        for (int k = 0; k < TILE; ++k) {
#pragma unroll
            for (int r = 0; r < ITEMS; ++r)
                acc[r] += as[threadIdx.y + r * TILE][k] * bs[k][threadIdx.x];
        }
        __syncthreads();
    }
#pragma unroll
    for (int r = 0; r < ITEMS; ++r) {
        int row = row0 + r * TILE;
        if (row < M && col < N) c[row * N + col] = acc[r];
    }
}

int main() {
  const int M = 256, N = 192, K = 128;
  std::vector<float> a(M * K, 1.0f), b(K * N, 2.0f), c(M * N);
  float *da, *db, *dc;
  cudaMalloc(&da, a.size() * sizeof(float));
  cudaMalloc(&db, b.size() * sizeof(float));
  cudaMalloc(&dc, c.size() * sizeof(float));
  cudaMemcpy(da, a.data(), a.size() * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(db, b.data(), b.size() * sizeof(float), cudaMemcpyHostToDevice);
  dim3 grid((N + TILE - 1) / TILE, (M + TILE * ITEMS - 1) / (TILE * ITEMS)), block(TILE, TILE);
  matmul<<<grid, block>>>(da, db, dc, M, N, K);
  cudaMemcpy(c.data(), dc, c.size() * sizeof(float), cudaMemcpyDeviceToHost);
  printf("c[0] = %f (expected %f)\n", c[0], 2.0f * K);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
  return 0;
}
