// Basic algebra: matrix transpose (rows x cols -> cols x rows), FP32.
// First version: one thread per element; reads are coalesced, writes are strided.
#include <cstdio>
#include <cuda_runtime.h>

/* @cuda-llm
sizes.rows = [1, 17, 1000, 4096]
sizes.cols = [1, 33, 999, 4096]
tune.BLOCK_X = [16, 8, 32, 64, 128]
tune.BLOCK_Y = [16, 1, 2, 4, 8, 32]
restrict = ["BLOCK_X * BLOCK_Y <= 1024", "BLOCK_X * BLOCK_Y >= 32"]
grid = ["cdiv(cols, BLOCK_X)", "cdiv(rows, BLOCK_Y)"]
block = ["BLOCK_X", "BLOCK_Y"]
args.in = "float32[rows * cols]"
args.out = "out float32[rows * cols]"
args.rows = "rows"
args.cols = "cols"
*/
extern "C" __global__ void transpose_f32(const float* in, float* out, int rows, int cols)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && c < cols) {
        out[(size_t)c * rows + r] = in[(size_t)r * cols + c];
    }
}

int main()
{
    const int rows = 1000, cols = 999;
    float *in, *out;
    cudaMalloc(&in, (size_t)rows * cols * sizeof(float));
    cudaMalloc(&out, (size_t)rows * cols * sizeof(float));
    cudaMemset(in, 0, (size_t)rows * cols * sizeof(float));
    dim3 block(16, 16);
    dim3 grid((cols + 15) / 16, (rows + 15) / 16);
    transpose_f32<<<grid, block>>>(in, out, rows, cols);
    cudaError_t err = cudaDeviceSynchronize();
    printf("transpose: %s\n", cudaGetErrorString(err));
    cudaFree(in); cudaFree(out);
    return err == cudaSuccess ? 0 : 1;
}
