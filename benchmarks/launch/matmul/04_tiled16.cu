// expect: ok/slower
// why: honest, the original's launch kept: 16 x 16 shared-memory tiles, zero-padded tails; about
// 1.45x, slower than the register-tiled one
extern "C" __global__ void matmul(const float* A, const float* B, float* C, int m, int n, int k) {
    __shared__ float a[16][16];
    __shared__ float b[16][16];
    int row = blockIdx.y * 16 + threadIdx.y;
    int col = blockIdx.x * 16 + threadIdx.x;
    float acc = 0.0f;
    for (int k0 = 0; k0 < k; k0 += 16) {
        a[threadIdx.y][threadIdx.x] =
            row < m && k0 + threadIdx.x < k ? A[(size_t)row * k + k0 + threadIdx.x] : 0.0f;
        b[threadIdx.y][threadIdx.x] =
            col < n && k0 + threadIdx.y < k ? B[(size_t)(k0 + threadIdx.y) * n + col] : 0.0f;
        __syncthreads();
        for (int i = 0; i < 16; ++i) acc += a[threadIdx.y][i] * b[i][threadIdx.x];
        __syncthreads();
    }
    if (row < m && col < n) C[(size_t)row * n + col] = acc;
}
