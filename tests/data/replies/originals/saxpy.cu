// y = a * x + y: the original most reply shapes answer
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
