// Naive C = A B (m x k times k x n floats): one thread per element, A and B read from global
// memory (2048^3 timed). A whole program: `main` multiplies fixed small-integer matrices (every
// sum exact in float, so any correct kernel prints the same digits) and checks them on the host.
// The winner is register-tiled (64 x 64 tiles, 4 x 4 outputs a thread; issue [launch]: ~3x).
// Host code sits under `#ifndef __CUDACC_RTC__` so NVRTC (CuPy's timer) compiles this very file.
#ifndef __CUDACC_RTC__
#include <cstdio>
#include <vector>
#endif

// launch benchmark: matmul/01_register_tiled_64
// expect: winner
// why: register-tiled: a 256-thread block computes a 64 x 64 tile of C, each thread 4 x 4
// outputs, A and B staged in 16-deep shared tiles (dynamic, 8256 bytes); about 3x

/* @cuda-llm
sizes.m = [1, 17, 100, 2048]
sizes.n = [1, 31, 129, 2048]
sizes.k = [1, 7, 257, 2048]
grid = ["cdiv(n, 64)", "cdiv(m, 64)"]
block = 256
smem = "(16 * 65 + 16 * 64) * 4"
args.A = "float32[m * k]"
args.B = "float32[k * n]"
args.C = "out float32[m * n]"
args.m = "m"
args.n = "n"
args.k = "k"
rtol = 1e-3
atol = 1e-4
flops = "2 * m * n * k"
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

#ifndef __CUDACC_RTC__
int main() {
    const int M = 300, N = 200, K = 333;  // ragged against 16 and 64
    std::vector<float> ha((size_t)M * K), hb((size_t)K * N), hc((size_t)M * N);
    for (size_t i = 0; i < ha.size(); ++i) ha[i] = (float)((int)(((i * 2654435761u) >> 7) % 9) - 4);
    for (size_t i = 0; i < hb.size(); ++i) hb[i] = (float)((int)(((i * 2246822519u) >> 5) % 7) - 3);
    float *dA, *dB, *dC;
    cudaMalloc(&dA, ha.size() * sizeof(float));
    cudaMalloc(&dB, hb.size() * sizeof(float));
    cudaMalloc(&dC, hc.size() * sizeof(float));
    cudaMemcpy(dA, ha.data(), ha.size() * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(dB, hb.data(), hb.size() * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemset(dC, 0xff, hc.size() * sizeof(float));  // NaN: an unwritten element shows
    dim3 block(256);
    dim3 grid((N + 63) / 64, (M + 63) / 64);
    matmul<<<grid, block, (16 * 65 + 16 * 64) * 4>>>(dA, dB, dC, M, N, K);
    cudaError_t err = cudaDeviceSynchronize();
    if (err != cudaSuccess) { printf("CUDA error: %s\n", cudaGetErrorString(err)); return 1; }
    cudaMemcpy(hc.data(), dC, hc.size() * sizeof(float), cudaMemcpyDeviceToHost);
    long wrong = 0;
    double checksum = 0.0;
    for (int r = 0; r < M; ++r)
        for (int c = 0; c < N; ++c) {
            float ref = 0.0f;
            for (int i = 0; i < K; ++i) ref += ha[(size_t)r * K + i] * hb[(size_t)i * N + c];
            float got = hc[(size_t)r * N + c];
            wrong += got != ref;
            checksum += (double)got * (double)((r * 31 + c) % 17 + 1);
        }
    printf("matmul %d x %d x %d: weighted checksum %.1f\n", M, N, K, checksum);
    printf("C[0] = %.1f, C[last] = %.1f\n", hc[0], hc[hc.size() - 1]);
    printf("elements differing from the host reference: %ld (%s)\n", wrong, wrong ? "FAIL" : "PASS");
    cudaFree(dA);
    cudaFree(dB);
    cudaFree(dC);
    return wrong ? 1 : 0;
}
#endif
