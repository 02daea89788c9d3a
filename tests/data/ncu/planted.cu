// Planted performance problems for `cuda-llm profile`: each kernel has one problem on the line
// marked PLANT, and its fixed twin (..._fixed) has none. Lines marked CLEAN must not be flagged
// with the planted kind. Sizes are large enough that the timed case takes a few microseconds.
#include "planted_helpers.cuh"

#define TILE 32

/* @cuda-llm
sizes.rows = [17, 4096]
sizes.cols = [33, 4096]
grid = ["cdiv(cols, 32)", "cdiv(rows, 8)"]
block = [32, 8]
args.in = "float32[rows * cols]"
args.out = "out float32[rows * cols]"
args.rows = "rows"
args.cols = "cols"
*/
extern "C" __global__ void transpose_naive(const float* in, float* out, int rows, int cols) {
  int x = blockIdx.x * 32 + threadIdx.x;
  int y = blockIdx.y * 8 + threadIdx.y;
  if (x < cols && y < rows) {
    float v = in[(size_t)y * cols + x];  // CLEAN uncoalesced
    out[(size_t)x * rows + y] = v;  // PLANT uncoalesced
  }
}

/* @cuda-llm
sizes.rows = [17, 4096]
sizes.cols = [33, 4096]
grid = ["cdiv(cols, 32)", "cdiv(rows, 8)"]
block = [32, 8]
args.in = "float32[rows * cols]"
args.out = "out float32[rows * cols]"
args.rows = "rows"
args.cols = "cols"
*/
extern "C" __global__ void transpose_header(const float* in, float* out, int rows, int cols) {
  int x = blockIdx.x * 32 + threadIdx.x;
  int y = blockIdx.y * 8 + threadIdx.y;
  if (x < cols && y < rows) {
    store_column(out, y, x, rows, in[(size_t)y * cols + x]);
  }
}

/* @cuda-llm
sizes.rows = [17, 4096]
sizes.cols = [33, 4096]
grid = ["cdiv(cols, 32)", "cdiv(rows, 32)"]
block = [32, 8]
args.in = "float32[rows * cols]"
args.out = "out float32[rows * cols]"
args.rows = "rows"
args.cols = "cols"
*/
extern "C" __global__ void transpose_unpadded(const float* in, float* out, int rows, int cols) {
  __shared__ float tile[TILE][TILE];
  int x = blockIdx.x * TILE + threadIdx.x;
  int y = blockIdx.y * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += 8) {
    if (x < cols && y + j < rows) {
      tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(y + j) * cols + x];  // CLEAN bank_conflict
    }
  }
  __syncthreads();
  x = blockIdx.y * TILE + threadIdx.x;
  y = blockIdx.x * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += 8) {
    if (x < rows && y + j < cols) {
      out[(size_t)(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];  // PLANT bank_conflict
    }
  }
}

/* @cuda-llm
sizes.rows = [17, 4096]
sizes.cols = [33, 4096]
grid = ["cdiv(cols, 32)", "cdiv(rows, 32)"]
block = [32, 8]
args.in = "float32[rows * cols]"
args.out = "out float32[rows * cols]"
args.rows = "rows"
args.cols = "cols"
*/
extern "C" __global__ void transpose_padded(const float* in, float* out, int rows, int cols) {
  __shared__ float tile[TILE][TILE + 1];
  int x = blockIdx.x * TILE + threadIdx.x;
  int y = blockIdx.y * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += 8) {
    if (x < cols && y + j < rows) {
      tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(y + j) * cols + x];  // CLEAN bank_conflict
    }
  }
  __syncthreads();
  x = blockIdx.y * TILE + threadIdx.x;
  y = blockIdx.x * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += 8) {
    if (x < rows && y + j < cols) {
      out[(size_t)(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];  // CLEAN bank_conflict
    }
  }
}

/* @cuda-llm
sizes.n = [100, 1048576]
grid = "cdiv(n, 256)"
block = 256
args.in = "float32[n * 16]"
args.sel = "int32[n]"
args.out = "out float32[n]"
args.n = "n"
init.sel = "randint(0, 16)"
*/
extern "C" __global__ void pick_local(const float* in, const int* sel, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float vals[16];
  for (int k = 0; k < 16; ++k) vals[k] = in[(size_t)k * n + i];  // PLANT local_memory
  int s = sel[i];
  for (int k = 0; k < 4; ++k) vals[(s + 5 * k) & 15] += 1.0f;  // PLANT local_memory
  out[i] = vals[s & 15];  // PLANT local_memory
}

/* @cuda-llm
sizes.n = [100, 1048576]
grid = "cdiv(n, 256)"
block = 256
args.in = "float32[n * 16]"
args.sel = "int32[n]"
args.out = "out float32[n]"
args.n = "n"
init.sel = "randint(0, 16)"
*/
extern "C" __global__ void pick_fixed(const float* in, const int* sel, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int s = sel[i];
  float v = in[(size_t)(s & 15) * n + i];
  for (int k = 0; k < 4; ++k) v += ((s + 5 * k) & 15) == (s & 15) ? 1.0f : 0.0f;  // CLEAN local_memory
  out[i] = v;  // CLEAN local_memory
}

/* @cuda-llm
sizes.n = [100, 1048576]
grid = "cdiv(n, 256)"
block = 256
args.x = "float32[n]"
args.out = "out float32[n]"
args.n = "n"
*/
extern "C" __global__ void lane_branch(const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
  if (threadIdx.x & 1) {  // PLANT divergent_branch
    for (int k = 0; k < 64; ++k) v = sinf(v) * 0.5f + 0.25f;
  } else {
    for (int k = 0; k < 64; ++k) v = cosf(v) * 0.5f + 0.25f;
  }
  out[i] = v;
}

/* @cuda-llm
sizes.n = [100, 1048576]
grid = "cdiv(n, 256)"
block = 256
args.x = "float32[n]"
args.out = "out float32[n]"
args.n = "n"
*/
extern "C" __global__ void warp_branch(const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
  if ((threadIdx.x / 32) & 1) {  // CLEAN divergent_branch
    for (int k = 0; k < 64; ++k) v = sinf(v) * 0.5f + 0.25f;
  } else {
    for (int k = 0; k < 64; ++k) v = cosf(v) * 0.5f + 0.25f;
  }
  out[i] = v;
}

template <int STRIDE>
__device__ float gather_at(const float* in, int i, int n) {
  return in[((size_t)i * STRIDE) % n];  // PLANT uncoalesced (template)
}

/* @cuda-llm
sizes.n = [100, 1048576]
grid = "cdiv(n, 256)"
block = 256
instance = "strided_gather<33>"
args.in = "float32[n]"
args.out = "out float32[n]"
args.n = "n"
*/
template <int STRIDE>
__global__ void strided_gather(const float* in, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = gather_at<STRIDE>(in, i, n);  // CLEAN uncoalesced
}
