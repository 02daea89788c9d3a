#include <cstdio>
#include <math.h>

/* @cuda-llm
sizes.n = [1, 1000, 1048576]
grid = "cdiv(n, 256)"
block = 256
args.n = "n"
args.a = "2.5"
args.x = "float32[n]"
args.y = "inout float32[n]"
*/
extern "C" __global__ void saxpy(int n, float a, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = a * x[i] + y[i];
    }
}

// Ünïcödé comment: kernel names after non-ASCII text keep their columns.
__global__ void /* 😀 */ scale_rows(float* m, int rows, int cols) {
    int r = blockIdx.x;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        m[r * cols + c] *= 0.5f;
    }
}

int main() {
    printf("%f\n", INFINITY);
    return 0;
}
