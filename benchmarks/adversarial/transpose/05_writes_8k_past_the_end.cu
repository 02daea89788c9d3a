// expect: out_of_bounds/fault/sanitizer
// why: correct, plus one store 8 KiB past the end of `out` at large sizes only
extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols) {
    __shared__ float tile[32][33];
    int x = blockIdx.x * 32 + threadIdx.x;
    int y0 = blockIdx.y * 32;
    for (int j = threadIdx.y; j < 32; j += 8) {
        int y = y0 + j;
        if (x < cols && y < rows) tile[j][threadIdx.x] = in[(size_t)y * cols + x];
    }
    __syncthreads();
    int ox = y0 + threadIdx.x;
    for (int j = threadIdx.y; j < 32; j += 8) {
        int oy = blockIdx.x * 32 + j;
        if (ox < rows && oy < cols) out[(size_t)oy * rows + ox] = tile[threadIdx.x][j];
    }
    size_t n = (size_t)rows * cols;
    if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0 && threadIdx.y == 0 && n > 1000000)
        out[n + 2048] = 0.0f;
}
