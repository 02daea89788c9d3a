// Sparse: y = A x with A in ELL format, FP32: `width` slots per row stored column-major
// (slot k of row r at k * rows + r), padding slots have column -1 and value 0.
// First version: one thread per row. The matrix comes from the `inputs` hook.
#include <cstdio>
#include <cuda_runtime.h>

/* @cuda-llm
sizes.rows = [1, 17, 1000, 1048576]
sizes.cols = [1, 19, 999, 1048576]
sizes.width = [1, 3, 8, 16]
grid = "cdiv(rows, 256)"
block = 256
inputs = "sparse_inputs.py:spmv_ell"
args.col_idx = "int32[rows * width]"
args.vals = "float32[rows * width]"
args.x = "float32[cols]"
args.y = "out float32[rows]"
args.rows = "rows"
args.width = "width"
flops = "2 * rows * width"
*/
extern "C" __global__ void spmv_ell_f32(const int* col_idx, const float* vals, const float* x,
                                        float* y, int rows, int width)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        float sum = 0.0f;
        for (int k = 0; k < width; ++k) {
            int c = col_idx[(size_t)k * rows + r];
            if (c >= 0) {
                sum += vals[(size_t)k * rows + r] * x[c];
            }
        }
        y[r] = sum;
    }
}

int main()
{
    // A 2 x 2 matrix [[2, 0], [1, 3]] with width 2, column-major slots.
    const int rows = 2, width = 2;
    int h_col[rows * width] = {0, 0, -1, 1};
    float h_vals[rows * width] = {2, 1, 0, 3};
    float h_x[2] = {1, 1};
    int* col_idx;
    float *vals, *x, *y;
    cudaMalloc(&col_idx, sizeof(h_col));
    cudaMalloc(&vals, sizeof(h_vals));
    cudaMalloc(&x, sizeof(h_x));
    cudaMalloc(&y, rows * sizeof(float));
    cudaMemcpy(col_idx, h_col, sizeof(h_col), cudaMemcpyHostToDevice);
    cudaMemcpy(vals, h_vals, sizeof(h_vals), cudaMemcpyHostToDevice);
    cudaMemcpy(x, h_x, sizeof(h_x), cudaMemcpyHostToDevice);
    spmv_ell_f32<<<1, 256>>>(col_idx, vals, x, y, rows, width);
    float h_y[rows];
    cudaMemcpy(h_y, y, sizeof(h_y), cudaMemcpyDeviceToHost);
    printf("spmv_ell: y = %g %g\n", h_y[0], h_y[1]);
    cudaFree(col_idx); cudaFree(vals); cudaFree(x); cudaFree(y);
    return 0;
}
