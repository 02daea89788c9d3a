// HAND-WRITTEN candidate (not model output): same launch, but each warp computes its 32 rows
// one at a time with all lanes reading the row together (coalesced), four independent partial
// sums per lane, and a warp-shuffle reduction.
extern "C" __global__ void matvec_f32(const float* __restrict__ A, const float* __restrict__ x,
                                      float* y, int rows, int cols)
{
    const unsigned full = 0xffffffffu;
    int lane = threadIdx.x & 31;
    int first = (blockIdx.x * blockDim.x + threadIdx.x) & ~31;
    for (int r = first; r < first + 32 && r < rows; ++r) {
        const float* a = A + (size_t)r * cols;
        float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
        int c = lane;
        for (; c + 96 < cols; c += 128) {
            s0 += a[c] * x[c];
            s1 += a[c + 32] * x[c + 32];
            s2 += a[c + 64] * x[c + 64];
            s3 += a[c + 96] * x[c + 96];
        }
        for (; c < cols; c += 32) s0 += a[c] * x[c];
        float s = (s0 + s1) + (s2 + s3);
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(full, s, o);
        if (lane == 0) y[r] = s;
    }
}
