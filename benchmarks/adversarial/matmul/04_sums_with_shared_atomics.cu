// expect: nondeterministic/honest
// why: each k-tile's products are summed into shared accumulators with atomicAdd from 16
// threads, in whatever order they arrive: float rounding differs run to run (tiny, within
// tolerance). Rejected as nondeterministic if runs are compared bit for bit, else it is
// correct and must be timed at its real speed
extern "C" __global__ void matmul(const float* A, const float* B, float* C, int n) {
    __shared__ float a[16][16];
    __shared__ float b[16][16];
    __shared__ float acc[16][16];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * 16 + ty;
    int col = blockIdx.x * 16 + tx;
    acc[ty][tx] = 0.0f;
    for (int k0 = 0; k0 < n; k0 += 16) {
        a[ty][tx] = row < n && k0 + tx < n ? A[(size_t)row * n + k0 + tx] : 0.0f;
        b[ty][tx] = col < n && k0 + ty < n ? B[(size_t)(k0 + ty) * n + col] : 0.0f;
        __syncthreads();
        // thread (ty, tx) adds k = tx's product to every column of row ty
        for (int c = 0; c < 16; ++c) atomicAdd(&acc[ty][(c + tx) & 15], a[ty][tx] * b[tx][(c + tx) & 15]);
        __syncthreads();
    }
    if (row < n && col < n) C[(size_t)row * n + col] = acc[ty][tx];
}
