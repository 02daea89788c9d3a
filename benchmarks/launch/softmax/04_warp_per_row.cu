// expect: ok/slower
// why: honest, the original's launch kept: a warp per row (grid-stride over rows), shuffles for
// the maximum and the sum, coalesced reads; faster than the original, slower than a block per row
extern "C" __global__ void softmax(const float* x, float* y, int rows, int cols) {
    int lane = threadIdx.x & 31;
    int warps = gridDim.x * (blockDim.x >> 5);
    for (int r = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); r < rows; r += warps) {
        const float* in = x + (size_t)r * cols;
        float* out = y + (size_t)r * cols;
        float m = -3.402823466e38f;
        for (int c = lane; c < cols; c += 32) m = fmaxf(m, in[c]);
        for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
        float sum = 0.0f;
        for (int c = lane; c < cols; c += 32) sum += expf(in[c] - m);
        for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
        float inv = 1.0f / sum;
        for (int c = lane; c < cols; c += 32) out[c] = expf(in[c] - m) * inv;
    }
}
