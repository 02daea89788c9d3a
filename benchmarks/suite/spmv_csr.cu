// Sparse: y = A x with A in CSR format (row_ptr, col_idx, vals), FP32.
// First version ("scalar CSR"): one thread per row. The matrix comes from the `inputs` hook.
#include <cstdio>
#include <cuda_runtime.h>

/* @cuda-llm
sizes.rows = [1, 17, 1000, 1048576]
sizes.cols = [1, 19, 999, 1048576]
sizes.nnz = [1, 50, 5000, 8388608]
grid = "cdiv(rows, 256)"
block = 256
inputs = "sparse_inputs.py:spmv_csr"
args.row_ptr = "int32[rows + 1]"
args.col_idx = "int32[nnz]"
args.vals = "float32[nnz]"
args.x = "float32[cols]"
args.y = "out float32[rows]"
args.rows = "rows"
flops = "2 * nnz"
*/
extern "C" __global__ void spmv_csr_f32(const int* row_ptr, const int* col_idx, const float* vals,
                                        const float* x, float* y, int rows)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        float sum = 0.0f;
        for (int j = row_ptr[r]; j < row_ptr[r + 1]; ++j) {
            sum += vals[j] * x[col_idx[j]];
        }
        y[r] = sum;
    }
}

int main()
{
    // A 4 x 4 identity matrix times a vector of ones.
    const int rows = 4;
    int h_row_ptr[rows + 1] = {0, 1, 2, 3, 4};
    int h_col[rows] = {0, 1, 2, 3};
    float h_vals[rows] = {1, 1, 1, 1};
    float h_x[rows] = {1, 1, 1, 1};
    int *row_ptr, *col_idx;
    float *vals, *x, *y;
    cudaMalloc(&row_ptr, sizeof(h_row_ptr));
    cudaMalloc(&col_idx, sizeof(h_col));
    cudaMalloc(&vals, sizeof(h_vals));
    cudaMalloc(&x, sizeof(h_x));
    cudaMalloc(&y, rows * sizeof(float));
    cudaMemcpy(row_ptr, h_row_ptr, sizeof(h_row_ptr), cudaMemcpyHostToDevice);
    cudaMemcpy(col_idx, h_col, sizeof(h_col), cudaMemcpyHostToDevice);
    cudaMemcpy(vals, h_vals, sizeof(h_vals), cudaMemcpyHostToDevice);
    cudaMemcpy(x, h_x, sizeof(h_x), cudaMemcpyHostToDevice);
    spmv_csr_f32<<<1, 256>>>(row_ptr, col_idx, vals, x, y, rows);
    float h_y[rows];
    cudaMemcpy(h_y, y, sizeof(h_y), cudaMemcpyDeviceToHost);
    printf("spmv_csr: y = %g %g %g %g\n", h_y[0], h_y[1], h_y[2], h_y[3]);
    cudaFree(row_ptr); cudaFree(col_idx); cudaFree(vals); cudaFree(x); cudaFree(y);
    return 0;
}
