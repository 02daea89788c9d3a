#ifndef BLOCK
#define BLOCK 128
#endif

/* @cuda-llm
sizes.n = [1, 1000, 100000]
tune.BLOCK = [128, 256, 1024]
grid = "cdiv(n, BLOCK)"
block = "BLOCK"
args.x = "in float32[n]"
args.y = "out float32[n]"
args.n = "n"
*/
extern "C" __global__ void scale(const float* x, float* y, int n) {
    int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) {
        y[i] = 2.0f * x[i];
    }
}

/* @cuda-llm
sizes.n = [1, 1000]
grid = "cdiv(n, 256)"
block = 256
args.x = "in float32[n]"
args.y = "out float32[n]"
args.n = "n"
*/
extern "C" __global__ void copy(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = x[i];
    }
}
