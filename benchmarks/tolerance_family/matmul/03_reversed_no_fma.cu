// expect: honest
// why: k from the end, every product rounded before the add (no FMA contraction)
extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= M || col >= N) return;
    const float* a = A + (size_t)row * K;
    float acc = 0.f;
    for (int k = K - 1; k >= 0; --k) acc = __fadd_rn(acc, __fmul_rn(a[k], B[(size_t)k * N + col]));
    C[(size_t)row * N + col] = acc;
}
