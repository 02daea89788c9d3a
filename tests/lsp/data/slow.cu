/* @cuda-llm
sizes.n = [1, 4096]
grid = "cdiv(n, 128)"
block = 128
args.n = "n"
args.src = "float32[n]"
args.dst = "out float32[n]"
*/
extern "C" __global__ void slow_copy(int n, const float* src, float* dst) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i];
}
