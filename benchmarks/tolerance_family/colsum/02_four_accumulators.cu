// expect: honest
// why: four accumulators over rows (r mod 4), added at the end
extern "C" __global__ void colsum(const float* x, float* out, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (blockIdx.y != 0 || c >= cols) return;
    float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;
    int r = 0;
    for (; r + 4 <= rows; r += 4) {
        a0 += x[(size_t)r * cols + c];
        a1 += x[(size_t)(r + 1) * cols + c];
        a2 += x[(size_t)(r + 2) * cols + c];
        a3 += x[(size_t)(r + 3) * cols + c];
    }
    for (; r < rows; ++r) a0 += x[(size_t)r * cols + c];
    out[c] += (a0 + a1) + (a2 + a3);
}
