// expect: cheat
// why: every element rounded to tf32 (10 mantissa bits) before it is added
extern "C" __global__ void colsum(const float* x, float* out, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (blockIdx.y != 0 || c >= cols) return;
    float acc = 0.0f;
    for (int r = 0; r < rows; ++r) {
        unsigned u = __float_as_uint(x[(size_t)r * cols + c]);
        acc += __uint_as_float((u + 0xFFFu + ((u >> 13) & 1u)) & 0xFFFFE000u);
    }
    out[c] += acc;
}
