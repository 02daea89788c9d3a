// HAND-WRITTEN candidate (not model output): the classic shared-memory tiling for the same
// 16x16 launch: each block stages 16x16 tiles of A and B in shared memory, so every element
// of A and B is read from global memory N/16 resp. M/16 times instead of N resp. M times.
extern "C" __global__ void matmul_f32(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float As[16][16];
    __shared__ float Bs[16][17];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * 16 + ty;
    int col = blockIdx.x * 16 + tx;
    float sum = 0.0f;
    for (int k0 = 0; k0 < K; k0 += 16) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[(size_t)row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(size_t)(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < 16; ++k) sum += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N) C[(size_t)row * N + col] = sum;
}
