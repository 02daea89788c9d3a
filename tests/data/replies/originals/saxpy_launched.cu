// y = a * x + y with its host launcher in the file: a launch site `auto` can rewrite
#include <cuda_runtime.h>

/* @cuda-llm
sizes.n = [1, 1000, 65536]
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

void launch_saxpy(float a, const float* x, float* y, int n) {
  saxpy<<<(n + 255) / 256, 256>>>(a, x, y, n);
}
