// expect: honest
// why: two partial sums over the halves of k (split-K inside a thread), then added
extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= M || col >= N) return;
    const float* a = A + (size_t)row * K;
    int h = K / 2;
    float lo = 0.f, hi = 0.f;
    for (int k = 0; k < h; ++k) lo += a[k] * B[(size_t)k * N + col];
    for (int k = h; k < K; ++k) hi += a[k] * B[(size_t)k * N + col];
    C[(size_t)row * N + col] = lo + hi;
}
