// expect: wrong_output/unwritten_output/out_of_bounds/fault
// why: tiled, bounds checked only when cols is not a multiple of 32: right for every spec size
// (1 x 1, 17 x 33, 1000 x 999, 4096 x 4096) but not for rows 4095 with cols 4096
extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols) {
    __shared__ float tile[32][33];
    bool ragged = (cols & 31) != 0;
    int x = blockIdx.x * 32 + threadIdx.x;
    int y0 = blockIdx.y * 32;
    for (int j = threadIdx.y; j < 32; j += 8) {
        int y = y0 + j;
        if (!ragged || (x < cols && y < rows)) tile[j][threadIdx.x] = in[(size_t)y * cols + x];
    }
    __syncthreads();
    int ox = y0 + threadIdx.x;
    int oy0 = blockIdx.x * 32;
    for (int j = threadIdx.y; j < 32; j += 8) {
        int oy = oy0 + j;
        if (!ragged || (ox < rows && oy < cols)) out[(size_t)oy * rows + ox] = tile[threadIdx.x][j];
    }
}
