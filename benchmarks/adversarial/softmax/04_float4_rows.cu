// expect: fault/wrong_output
// why: a warp per row reading float4 whenever cols is a multiple of 4, assuming the row (and
// so the buffer) starts at a 16-byte boundary: a buffer passed at an offset faults
extern "C" __global__ void softmax(const float* x, float* y, int rows, int cols) {
    int lane = threadIdx.x & 31;
    int warps = gridDim.x * (blockDim.x >> 5);
    bool vec = (cols & 3) == 0;
    for (int r = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); r < rows; r += warps) {
        const float* in = x + (size_t)r * cols;
        float* out = y + (size_t)r * cols;
        float m = -3.402823466e38f;
        if (vec) {
            const float4* in4 = reinterpret_cast<const float4*>(in);
            for (int c = lane; c < cols / 4; c += 32) {
                float4 v = in4[c];
                m = fmaxf(m, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
            }
        } else {
            for (int c = lane; c < cols; c += 32) m = fmaxf(m, in[c]);
        }
        for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
        float sum = 0.0f;
        for (int c = lane; c < cols; c += 32) sum += expf(in[c] - m);
        for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
        float inv = 1.0f / sum;
        for (int c = lane; c < cols; c += 32) out[c] = expf(in[c] - m) * inv;
    }
}
