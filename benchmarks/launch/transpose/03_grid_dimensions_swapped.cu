// expect: unwritten_output
// why: the tiled kernel with its grid's x and y swapped (rows first): right for square matrices
// only; with more columns than rows the last column tiles are never written
/* @cuda-llm launch
grid = ["cdiv(rows, 32)", "cdiv(cols, 32)"]
block = [32, 8]
*/
extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols) {
    __shared__ float tile[32][33];
    int x = blockIdx.x * 32 + threadIdx.x;
    int y0 = blockIdx.y * 32;
    for (int j = threadIdx.y; j < 32; j += blockDim.y) {
        int y = y0 + j;
        if (x < cols && y < rows) tile[j][threadIdx.x] = in[(size_t)y * cols + x];
    }
    __syncthreads();
    int ox = y0 + threadIdx.x;
    int oy0 = blockIdx.x * 32;
    for (int j = threadIdx.y; j < 32; j += blockDim.y) {
        int oy = oy0 + j;
        if (ox < rows && oy < cols) out[(size_t)oy * rows + ox] = tile[threadIdx.x][j];
    }
}
