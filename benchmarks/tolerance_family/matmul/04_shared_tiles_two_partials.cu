// expect: honest
// why: 16 x 16 shared-memory tiles, each thread keeping two partial sums (even / odd k of a tile)
extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
    __shared__ float ta[16][16], tb[16][16];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * 16 + ty, col = blockIdx.x * 16 + tx;
    float s0 = 0.f, s1 = 0.f;
    for (int t = 0; t < K; t += 16) {
        ta[ty][tx] = (row < M && t + tx < K) ? A[(size_t)row * K + t + tx] : 0.f;
        tb[ty][tx] = (col < N && t + ty < K) ? B[(size_t)(t + ty) * N + col] : 0.f;
        __syncthreads();
        for (int k = 0; k < 16; k += 2) {
            s0 += ta[ty][k] * tb[k][tx];
            s1 += ta[ty][k + 1] * tb[k + 1][tx];
        }
        __syncthreads();
    }
    if (row < M && col < N) C[(size_t)row * N + col] = s0 + s1;
}
