// y = a * x + y over 2^25 floats (128 MiB each), y read and written: an `inout` buffer.
/* @cuda-llm
sizes.n = [1, 1000, 65537, 33554432]
grid = "cdiv(n, 256)"
block = 256
args.x = "float32[n]"
args.y = "inout float32[n]"
args.a = 1.5
args.n = "n"
*/
extern "C" __global__ void saxpy(const float* x, float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
