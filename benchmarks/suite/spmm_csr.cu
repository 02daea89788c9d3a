// Sparse: C = A B with A sparse in CSR (rows x k), B dense row-major (k x n), C dense
// (rows x n), FP32. First version: one thread per element of C (x over columns of C).
#include <cstdio>
#include <cuda_runtime.h>

/* @cuda-llm
sizes.rows = [1, 17, 1000, 65536]
sizes.k = [1, 20, 999, 65536]
sizes.n = [1, 8, 33, 128]
sizes.nnz = [1, 50, 5000, 1048576]
grid = ["cdiv(n, 32)", "cdiv(rows, 8)"]
block = [32, 8]
inputs = "sparse_inputs.py:spmm_csr"
args.row_ptr = "int32[rows + 1]"
args.col_idx = "int32[nnz]"
args.vals = "float32[nnz]"
args.B = "float32[k * n]"
args.C = "out float32[rows * n]"
args.rows = "rows"
args.n = "n"
flops = "2 * nnz * n"
*/
extern "C" __global__ void spmm_csr_f32(const int* row_ptr, const int* col_idx, const float* vals,
                                        const float* B, float* C, int rows, int n)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && j < n) {
        float sum = 0.0f;
        for (int p = row_ptr[r]; p < row_ptr[r + 1]; ++p) {
            sum += vals[p] * B[(size_t)col_idx[p] * n + j];
        }
        C[(size_t)r * n + j] = sum;
    }
}

int main()
{
    // A = 2 x 2 identity, B = 2 x 3 of ones.
    const int rows = 2, k = 2, n = 3;
    int h_row_ptr[rows + 1] = {0, 1, 2};
    int h_col[2] = {0, 1};
    float h_vals[2] = {1, 1};
    float h_B[k * n] = {1, 1, 1, 1, 1, 1};
    int *row_ptr, *col_idx;
    float *vals, *B, *C;
    cudaMalloc(&row_ptr, sizeof(h_row_ptr));
    cudaMalloc(&col_idx, sizeof(h_col));
    cudaMalloc(&vals, sizeof(h_vals));
    cudaMalloc(&B, sizeof(h_B));
    cudaMalloc(&C, rows * n * sizeof(float));
    cudaMemcpy(row_ptr, h_row_ptr, sizeof(h_row_ptr), cudaMemcpyHostToDevice);
    cudaMemcpy(col_idx, h_col, sizeof(h_col), cudaMemcpyHostToDevice);
    cudaMemcpy(vals, h_vals, sizeof(h_vals), cudaMemcpyHostToDevice);
    cudaMemcpy(B, h_B, sizeof(h_B), cudaMemcpyHostToDevice);
    dim3 block(32, 8);
    dim3 grid((n + 31) / 32, (rows + 7) / 8);
    spmm_csr_f32<<<grid, block>>>(row_ptr, col_idx, vals, B, C, rows, n);
    cudaError_t err = cudaDeviceSynchronize();
    printf("spmm_csr: %s\n", cudaGetErrorString(err));
    cudaFree(row_ptr); cudaFree(col_idx); cudaFree(vals); cudaFree(B); cudaFree(C);
    return err == cudaSuccess ? 0 : 1;
}
