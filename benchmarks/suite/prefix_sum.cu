// Basic algebra: inclusive prefix sum (cumulative sum) of every row of an int32 matrix.
// First version: one block per row; the row is scanned 256 elements at a time with a
// Hillis-Steele scan in shared memory, carrying the running total from chunk to chunk.
// Integers make the result exact, so any correct scan order gives the same answer.
#include <cstdio>
#include <cuda_runtime.h>

/* @cuda-llm
sizes.rows = [1, 3, 100, 4096]
sizes.cols = [1, 1000, 257, 4096]
grid = "rows"
block = 256
args.in = "int32[rows * cols]"
args.out = "out int32[rows * cols]"
args.rows = "rows"
args.cols = "cols"
init.in = "randint(0, 100)"
flops = "rows * cols"
*/
extern "C" __global__ void prefix_sum_rows_i32(const int* in, int* out, int rows, int cols)
{
    __shared__ int buf[256];
    int row = blockIdx.x;
    if (row >= rows) return;
    const int* src = in + (size_t)row * cols;
    int* dst = out + (size_t)row * cols;
    int carry = 0;
    for (int start = 0; start < cols; start += blockDim.x) {
        int c = start + threadIdx.x;
        buf[threadIdx.x] = (c < cols) ? src[c] : 0;
        __syncthreads();
        for (int offset = 1; offset < blockDim.x; offset *= 2) {
            int add = (threadIdx.x >= offset) ? buf[threadIdx.x - offset] : 0;
            __syncthreads();
            buf[threadIdx.x] += add;
            __syncthreads();
        }
        if (c < cols) {
            dst[c] = carry + buf[threadIdx.x];
        }
        carry += buf[blockDim.x - 1];
        __syncthreads();
    }
}

int main()
{
    const int rows = 100, cols = 257;
    int *in, *out;
    cudaMalloc(&in, (size_t)rows * cols * sizeof(int));
    cudaMalloc(&out, (size_t)rows * cols * sizeof(int));
    cudaMemset(in, 0, (size_t)rows * cols * sizeof(int));
    prefix_sum_rows_i32<<<rows, 256>>>(in, out, rows, cols);
    cudaError_t err = cudaDeviceSynchronize();
    printf("prefix_sum: %s\n", cudaGetErrorString(err));
    cudaFree(in); cudaFree(out);
    return err == cudaSuccess ? 0 : 1;
}
