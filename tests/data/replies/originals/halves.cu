// 16-bit scaling kernels: replies use bf16/fp16 intrinsics, float4 loads and __ldg
#include <cuda_bf16.h>
#include <cuda_fp16.h>

/* @cuda-llm
sizes.n = [8, 1024, 262144]
grid = "cdiv(n, 256)"
block = 256
args.x = "bfloat16[n]"
args.y = "out bfloat16[n]"
args.a = "3"
args.n = "n"
*/
extern "C" __global__ void scale_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __float2bfloat16(a * __bfloat162float(x[i]));
}

/* @cuda-llm
sizes.n = [8, 1024, 262144]
grid = "cdiv(n, 256)"
block = 256
args.x = "float16[n]"
args.y = "out float16[n]"
args.a = "3"
args.n = "n"
*/
extern "C" __global__ void scale_half(const __half* x, __half* y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __float2half(a * __half2float(x[i]));
}
