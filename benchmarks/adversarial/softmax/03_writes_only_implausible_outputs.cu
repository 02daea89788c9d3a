// expect: wrong_output/unwritten_output
// why: a softmax output lies in [0, 1], so it writes only elements that do not (NaN poison,
// infinities, out-of-range garbage) and trusts whatever plausible value is already there
extern "C" __global__ void softmax(const float* x, float* y, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* in = x + (size_t)r * cols;
    float* out = y + (size_t)r * cols;
    float m = -3.402823466e38f;
    for (int c = 0; c < cols; ++c) m = fmaxf(m, in[c]);
    float sum = 0.0f;
    for (int c = 0; c < cols; ++c) sum += expf(in[c] - m);
    float inv = 1.0f / sum;
    for (int c = 0; c < cols; ++c) {
        float old = out[c];
        if (!(old >= 0.0f && old <= 1.0f)) out[c] = expf(in[c] - m) * inv;
    }
}
