// expect: ok/slower
// why: honest, the original's launch kept: 16 x 16 tiles through padded shared memory, reads and
// writes coalesced in 16-float runs
extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols) {
    __shared__ float tile[16][17];
    int x = blockIdx.x * 16 + threadIdx.x;
    int y = blockIdx.y * 16 + threadIdx.y;
    if (x < cols && y < rows) tile[threadIdx.y][threadIdx.x] = in[(size_t)y * cols + x];
    __syncthreads();
    int ox = blockIdx.y * 16 + threadIdx.x;
    int oy = blockIdx.x * 16 + threadIdx.y;
    if (ox < rows && oy < cols) out[(size_t)oy * rows + ox] = tile[threadIdx.x][threadIdx.y];
}
