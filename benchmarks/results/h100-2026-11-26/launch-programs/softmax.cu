// Row softmax, one thread per row: a warp's loads stride by `cols` floats (4096 x 4096 timed).
// A whole program: `main` launches the kernel on fixed inputs and prints results any correct
// softmax reproduces. The winner launches a block per row (issue [launch]: about 10x).
// Host code sits under `#ifndef __CUDACC_RTC__` so NVRTC (CuPy's timer) compiles this very file.
#ifndef __CUDACC_RTC__
#include <cmath>
#include <cstdio>
#include <vector>
#endif

// launch benchmark: softmax/01_block_per_row
// expect: winner
// why: a block of 256 threads per row (grid = rows): coalesced loads, the maximum and the sum
// reduced with warp shuffles through 64 bytes of dynamic shared memory; about 10x

/* @cuda-llm
sizes.rows = [1, 3, 100, 4096]
sizes.cols = [1, 31, 1000, 4096]
grid = "rows"
block = 256
smem = "2 * (256 / 32) * 4"
args.x = "float32[rows * cols]"
args.y = "out float32[rows * cols]"
args.rows = "rows"
args.cols = "cols"
init.x = "normal(0, 4)"
*/
extern "C" __global__ void softmax(const float* x, float* y, int rows, int cols) {
    extern __shared__ float part[];  // [0, warps): the warps' maxima, [warps, 2 warps): their sums
    int r = blockIdx.x;
    if (r >= rows) return;  // the whole block leaves together
    const float* in = x + (size_t)r * cols;
    float* out = y + (size_t)r * cols;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    float m = -3.402823466e38f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, in[c]);
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (lane == 0) part[warp] = m;
    __syncthreads();
    m = part[0];
    for (int w = 1; w < warps; ++w) m = fmaxf(m, part[w]);
    float sum = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) sum += expf(in[c] - m);
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0) part[warps + warp] = sum;
    __syncthreads();
    sum = 0.0f;
    for (int w = 0; w < warps; ++w) sum += part[warps + w];
    float inv = 1.0f / sum;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = expf(in[c] - m) * inv;
}

#ifndef __CUDACC_RTC__
int main() {
    const int R = 1000, C = 3001;  // ragged against every block size
    std::vector<float> hx((size_t)R * C), hy((size_t)R * C);
    for (size_t i = 0; i < hx.size(); ++i) hx[i] = (float)((i * 2654435761u) % 2001) / 125.0f - 8.0f;
    float *dx, *dy;
    cudaMalloc(&dx, hx.size() * sizeof(float));
    cudaMalloc(&dy, hy.size() * sizeof(float));
    cudaMemcpy(dx, hx.data(), hx.size() * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemset(dy, 0xff, hy.size() * sizeof(float));  // NaN: an unwritten element shows
    int threads = 128;
    int blocks = R;
    softmax<<<blocks, 256, 2 * (256 / 32) * 4>>>(dx, dy, R, C);
    cudaError_t err = cudaDeviceSynchronize();
    if (err != cudaSuccess) { printf("CUDA error: %s\n", cudaGetErrorString(err)); return 1; }
    cudaMemcpy(hy.data(), dy, hy.size() * sizeof(float), cudaMemcpyDeviceToHost);
    long off = 0;  // elements off the double-precision host reference by more than 1e-4 relative
    double total = 0.0;
    for (int r = 0; r < R; ++r) {
        const float* x = &hx[(size_t)r * C];
        double m = -1e300, s = 0.0;
        for (int c = 0; c < C; ++c) m = x[c] > m ? x[c] : m;
        for (int c = 0; c < C; ++c) s += std::exp((double)x[c] - m);
        for (int c = 0; c < C; ++c) {
            double y = hy[(size_t)r * C + c], ref = std::exp((double)x[c] - m) / s;
            off += !(std::fabs(y - ref) <= 1e-4 * ref + 1e-9);  // NaN (unwritten) counts
            total += y;
        }
    }
    printf("softmax %d x %d: sum of all outputs %.2f (expected %d)\n", R, C, total, R);
    printf("y[0] = %.4g, y[last] = %.4g\n", hy[0], hy[hy.size() - 1]);
    printf("elements off the host reference: %ld (%s)\n", off, off ? "FAIL" : "PASS");
    cudaFree(dx);
    cudaFree(dy);
    return off ? 1 : 0;
}
#endif
