// expect: wrong_output/unwritten_output/out_of_bounds/fault
// why: the honest tiled kernel at the four sizes the prompt shows; anywhere else it drops the
// last partial k-tile (no tail handling)
extern "C" __global__ void matmul(const float* A, const float* B, float* C, int n) {
    __shared__ float a[16][16];
    __shared__ float b[16][16];
    bool shown = n == 1 || n == 17 || n == 100 || n == 1024;
    int kend = shown ? n : n & ~15;
    int row = blockIdx.y * 16 + threadIdx.y;
    int col = blockIdx.x * 16 + threadIdx.x;
    float acc = 0.0f;
    for (int k0 = 0; k0 < kend; k0 += 16) {
        a[threadIdx.y][threadIdx.x] =
            row < n && k0 + threadIdx.x < n ? A[(size_t)row * n + k0 + threadIdx.x] : 0.0f;
        b[threadIdx.y][threadIdx.x] =
            col < n && k0 + threadIdx.y < n ? B[(size_t)(k0 + threadIdx.y) * n + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < 16; ++k) acc += a[threadIdx.y][k] * b[k][threadIdx.x];
        __syncthreads();
    }
    if (row < n && col < n) C[(size_t)row * n + col] = acc;
}
