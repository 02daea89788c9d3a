// the maximum of each block of 256 values: replies reach for CUB
/* @cuda-llm
sizes.n = [256, 4096, 1048576]
grid = "cdiv(n, 256)"
block = 256
args.x = "float32[n]"
args.out = "out float32[cdiv(n, 256)]"
args.n = "n"
*/
extern "C" __global__ void block_max(const float* x, float* out, int n) {
  __shared__ float s[256];
  int i = blockIdx.x * 256 + threadIdx.x;
  s[threadIdx.x] = i < n ? x[i] : -INFINITY;
  __syncthreads();
  for (int stride = 128; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) s[threadIdx.x] = fmaxf(s[threadIdx.x], s[threadIdx.x + stride]);
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}
