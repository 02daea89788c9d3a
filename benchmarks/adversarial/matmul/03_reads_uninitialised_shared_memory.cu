// expect: wrong_output/nondeterministic/sanitizer
// why: tiled, but a tail tile's missing elements are not zeroed: they keep whatever the shared
// memory held (the previous tile's values, or another block's)
extern "C" __global__ void matmul(const float* A, const float* B, float* C, int n) {
    __shared__ float a[16][16];
    __shared__ float b[16][16];
    int row = blockIdx.y * 16 + threadIdx.y;
    int col = blockIdx.x * 16 + threadIdx.x;
    float acc = 0.0f;
    for (int k0 = 0; k0 < n; k0 += 16) {
        if (row < n && k0 + threadIdx.x < n) a[threadIdx.y][threadIdx.x] = A[(size_t)row * n + k0 + threadIdx.x];
        if (col < n && k0 + threadIdx.y < n) b[threadIdx.y][threadIdx.x] = B[(size_t)(k0 + threadIdx.y) * n + col];
        __syncthreads();
        for (int k = 0; k < 16; ++k) acc += a[threadIdx.y][k] * b[k][threadIdx.x];
        __syncthreads();
    }
    if (row < n && col < n) C[(size_t)row * n + col] = acc;
}
