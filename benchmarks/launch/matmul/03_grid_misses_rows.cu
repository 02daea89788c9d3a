// expect: unwritten_output
// why: the register-tiled kernel launched with 128-row tiles in y while each block computes 64
// rows: the lower half of every 128 rows is never written
/* @cuda-llm launch
grid = ["cdiv(n, 64)", "cdiv(m, 128)"]
block = 256
smem = "(16 * 65 + 16 * 64) * 4"
*/
extern "C" __global__ void matmul(const float* A, const float* B, float* C, int m, int n, int k) {
    extern __shared__ float tiles[];
    float* As = tiles;            // [16][65]: As[kk * 65 + i] = A[row0 + i][k0 + kk] (padded)
    float* Bs = tiles + 16 * 65;  // [16][64]: Bs[kk * 64 + j] = B[k0 + kk][col0 + j]
    int tx = threadIdx.x % 16, ty = threadIdx.x / 16;  // outputs (ty + 16 i, tx + 16 j), i, j < 4
    int row0 = blockIdx.y * 64, col0 = blockIdx.x * 64;
    float acc[4][4] = {};
    for (int k0 = 0; k0 < k; k0 += 16) {
        for (int e = threadIdx.x; e < 64 * 16; e += blockDim.x) {
            int i = e / 16, kk = e % 16, gr = row0 + i, gk = k0 + kk;
            As[kk * 65 + i] = gr < m && gk < k ? A[(size_t)gr * k + gk] : 0.0f;
        }
        for (int e = threadIdx.x; e < 16 * 64; e += blockDim.x) {
            int kk = e / 64, j = e % 64, gk = k0 + kk, gc = col0 + j;
            Bs[kk * 64 + j] = gk < k && gc < n ? B[(size_t)gk * n + gc] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < 16; ++kk) {
            float a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) a[i] = As[kk * 65 + ty + 16 * i];
#pragma unroll
            for (int j = 0; j < 4; ++j) b[j] = Bs[kk * 64 + tx + 16 * j];
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            int r = row0 + ty + 16 * i, c = col0 + tx + 16 * j;
            if (r < m && c < n) C[(size_t)r * n + c] = acc[i][j];
        }
}
