// Naive out = transpose(in), rows x cols floats, one thread per element in 16 x 16 blocks: reads
// coalesced, writes stride by `rows` (4096 x 8192 timed). A whole program: `main` transposes a
// fixed matrix there and back (two launch sites, the second with rows and cols swapped) and checks
// both on the host. The winner stages 32 x 32 tiles through shared memory with a 32 x 8 block.
// Host code sits under `#ifndef __CUDACC_RTC__` so NVRTC (CuPy's timer) compiles this very file.
#ifndef __CUDACC_RTC__
#include <cstdio>
#include <vector>
#endif

// launch benchmark: transpose/01_tiled32
// expect: winner
// why: 32 x 32 tiles staged through padded shared memory, a 32 x 8 block (each thread moves 4
// elements), reads and writes coalesced

/* @cuda-llm
sizes.rows = [1, 17, 1000, 4096]
sizes.cols = [1, 33, 999, 8192]
grid = ["cdiv(cols, 32)", "cdiv(rows, 32)"]
block = [32, 8]
args.in = "float32[rows * cols]"
args.out = "out float32[rows * cols]"
args.rows = "rows"
args.cols = "cols"
*/
extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols) {
    __shared__ float tile[32][33];
    int x = blockIdx.x * 32 + threadIdx.x;
    int y0 = blockIdx.y * 32;
    for (int j = threadIdx.y; j < 32; j += blockDim.y) {
        int y = y0 + j;
        if (x < cols && y < rows) tile[j][threadIdx.x] = in[(size_t)y * cols + x];
    }
    __syncthreads();
    int ox = y0 + threadIdx.x;
    int oy0 = blockIdx.x * 32;
    for (int j = threadIdx.y; j < 32; j += blockDim.y) {
        int oy = oy0 + j;
        if (ox < rows && oy < cols) out[(size_t)oy * rows + ox] = tile[threadIdx.x][j];
    }
}

#ifndef __CUDACC_RTC__
int main() {
    const int R = 1000, C = 2049;  // ragged against 16 and 32
    const size_t count = (size_t)R * C;
    std::vector<float> ha(count), hb(count), hc(count);
    for (size_t i = 0; i < count; ++i) ha[i] = (float)((i * 2654435761u) % 65521) / 64.0f;
    float *da, *db, *dc;
    cudaMalloc(&da, count * sizeof(float));
    cudaMalloc(&db, count * sizeof(float));
    cudaMalloc(&dc, count * sizeof(float));
    cudaMemcpy(da, ha.data(), count * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemset(db, 0xff, count * sizeof(float));  // NaN: an unwritten element shows
    cudaMemset(dc, 0xff, count * sizeof(float));
    transpose<<<dim3((C + 31) / 32, (R + 31) / 32), dim3(32, 8)>>>(da, db, R, C);  // b = a^T
    transpose<<<dim3((R + 31) / 32, (C + 31) / 32), dim3(32, 8)>>>(db, dc, C, R);  // c = b^T
    cudaError_t err = cudaDeviceSynchronize();
    if (err != cudaSuccess) { printf("CUDA error: %s\n", cudaGetErrorString(err)); return 1; }
    cudaMemcpy(hb.data(), db, count * sizeof(float), cudaMemcpyDeviceToHost);
    cudaMemcpy(hc.data(), dc, count * sizeof(float), cudaMemcpyDeviceToHost);
    long wrong_b = 0, wrong_c = 0;
    double checksum = 0.0;
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) {
            wrong_b += hb[(size_t)c * R + r] != ha[(size_t)r * C + c];
            wrong_c += hc[(size_t)r * C + c] != ha[(size_t)r * C + c];
        }
    for (size_t i = 0; i < count; ++i) checksum += (double)hb[i] * (double)(i % 7 + 1);
    printf("transpose %d x %d: weighted checksum of the transpose %.4f\n", R, C, checksum);
    printf("transpose wrong: %ld, round trip wrong: %ld (%s)\n", wrong_b, wrong_c,
           wrong_b || wrong_c ? "FAIL" : "PASS");
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
    return wrong_b || wrong_c ? 1 : 0;
}
#endif
