// HAND-WRITTEN candidate (not model output): changes the launch to a 64x64 tile of C per block
// (grid = [cdiv(N, 64), cdiv(M, 64)], block = 16x16): register tiling, each thread computes 4x4
// outputs (rows ty + 16 i, columns tx + 16 j) from 16-deep tiles of A and B staged in shared
// memory, so each value read from shared memory feeds four FMAs instead of one. Loads past M, N
// or K read zeros and stores are bounds-checked, so ragged sizes work; the k sum runs in the
// same order as the original's.
/* @cuda-llm launch
grid = ["cdiv(N, 64)", "cdiv(M, 64)"]
block = [16, 16]
*/
extern "C" __global__ void matmul_f32(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float As[16][65];  // As[k][m]: a 64x16 tile of A, transposed (padded)
    __shared__ float Bs[16][64];  // Bs[k][n]: a 16x64 tile of B
    int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
    int row0 = blockIdx.y * 64, col0 = blockIdx.x * 64;
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
    }
    for (int k0 = 0; k0 < K; k0 += 16) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            int m = (tid >> 4) + 16 * i, ka = tid & 15;  // A: 16 consecutive k of a row
            int gr = row0 + m, gk = k0 + ka;
            As[ka][m] = (gr < M && gk < K) ? A[(size_t)gr * K + gk] : 0.0f;
            int kb = (tid >> 6) + 4 * i, n = tid & 63;  // B: 64 consecutive n of a row
            int gkb = k0 + kb, gc = col0 + n;
            Bs[kb][n] = (gkb < K && gc < N) ? B[(size_t)gkb * N + gc] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < 16; ++k) {
            float a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) a[i] = As[k][ty + 16 * i];
#pragma unroll
            for (int j = 0; j < 4; ++j) b[j] = Bs[k][tx + 16 * j];
#pragma unroll
            for (int i = 0; i < 4; ++i) {
#pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        int r = row0 + ty + 16 * i;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            int c = col0 + tx + 16 * j;
            if (r < M && c < N) C[(size_t)r * N + c] = acc[i][j];
        }
    }
}
