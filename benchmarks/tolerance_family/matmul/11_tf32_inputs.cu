// expect: cheat
// why: inputs rounded to tf32 (10 mantissa bits), as tensor cores in tf32 mode do
__device__ __forceinline__ float tf32(float x) {
    unsigned u = __float_as_uint(x);
    u = (u + 0xFFFu + ((u >> 13) & 1u)) & 0xFFFFE000u;
    return __uint_as_float(u);
}
extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= M || col >= N) return;
    const float* a = A + (size_t)row * K;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += tf32(a[k]) * tf32(B[(size_t)k * N + col]);
    C[(size_t)row * N + col] = acc;
}
