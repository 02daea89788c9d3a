// expect: wrong_output
// why: the epsilon "does nothing for real data", so it is dropped: an all-zero row becomes
// 0 * inf = NaN where the original writes zeros
extern "C" __global__ void rownorm(const float* x, float* y, int rows, int cols) {
    const float* in = x + (size_t)blockIdx.x * cols;
    float* out = y + (size_t)blockIdx.x * cols;
    float ss = 0.0f;
    for (int c = threadIdx.x; c < cols; c += 32) ss += in[c] * in[c];
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    float inv = rsqrtf(ss);
    for (int c = threadIdx.x; c < cols; c += 32) out[c] = in[c] * inv;
}
