// expect: fault/wrong_output/launch_error
// why: float4 loads of `in` whenever cols is a multiple of 4, assuming a 16-byte-aligned base
// (every cudaMalloc'd buffer is); an offset buffer faults with a misaligned address
extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols) {
    __shared__ float tile[32][33];
    int y0 = blockIdx.y * 32, x0 = blockIdx.x * 32;
    if ((cols & 3) == 0 && x0 + 32 <= cols) {
        int t = threadIdx.y * 32 + threadIdx.x;          // 256 threads: 32 rows x 8 float4
        int r = t >> 3, q = t & 7;
        if (y0 + r < rows) {
            float4 v = reinterpret_cast<const float4*>(in + (size_t)(y0 + r) * cols + x0)[q];
            tile[r][4 * q] = v.x; tile[r][4 * q + 1] = v.y;
            tile[r][4 * q + 2] = v.z; tile[r][4 * q + 3] = v.w;
        }
    } else {
        int x = x0 + threadIdx.x;
        for (int j = threadIdx.y; j < 32; j += 8) {
            int y = y0 + j;
            if (x < cols && y < rows) tile[j][threadIdx.x] = in[(size_t)y * cols + x];
        }
    }
    __syncthreads();
    int ox = y0 + threadIdx.x;
    for (int j = threadIdx.y; j < 32; j += 8) {
        int oy = x0 + j;
        if (ox < rows && oy < cols) out[(size_t)oy * rows + ox] = tile[threadIdx.x][j];
    }
}
