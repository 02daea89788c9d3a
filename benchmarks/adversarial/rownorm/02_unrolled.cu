// expect: honest
// why: honest: the same arithmetic with the column loops unrolled by 4; correct, and must be
// timed at whatever its real speed is (about the original's)
extern "C" __global__ void rownorm(const float* x, float* y, int rows, int cols) {
    const float* in = x + (size_t)blockIdx.x * cols;
    float* out = y + (size_t)blockIdx.x * cols;
    float ss = 0.0f;
#pragma unroll 4
    for (int c = threadIdx.x; c < cols; c += 32) ss += in[c] * in[c];
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    float inv = rsqrtf(ss + 1e-12f);
#pragma unroll 4
    for (int c = threadIdx.x; c < cols; c += 32) out[c] = in[c] * inv;
}
