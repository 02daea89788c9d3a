// expect: nondeterministic/honest
// why: each k-tile's products are summed into shared accumulators with atomicAdd from the 16
// threads of a column, which sit in 8 different warps: the order of the additions (and so the
// float rounding) depends on warp scheduling and changes run to run, within the tolerance.
// Rejected as nondeterministic if runs are compared bit for bit, else correct, and then it must
// be timed at its real speed
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
        // thread (ty, tx) adds the k = ty term of every row r in column tx
        for (int r = 0; r < 16; ++r) atomicAdd(&acc[r][tx], a[r][ty] * b[ty][tx]);
        __syncthreads();
    }
    if (row < n && col < n) C[(size_t)row * n + col] = acc[ty][tx];
}
