// HAND-WRITTEN candidate (not model output): same launch (one thread's worth of rows per
// lane), but each warp now walks its 32 rows one at a time with all 32 lanes on the row:
// coalesced loads, an online max/sum in one pass, and warp-shuffle reductions.
extern "C" __global__ void softmax_f32(const float* x, float* y, int rows, int cols)
{
    const unsigned full = 0xffffffffu;
    int lane = threadIdx.x & 31;
    int first = (blockIdx.x * blockDim.x + threadIdx.x) & ~31;  // this warp's first row
    for (int r = first; r < first + 32 && r < rows; ++r) {
        const float* xr = x + (size_t)r * cols;
        float* yr = y + (size_t)r * cols;
        float m = __int_as_float(0xff800000);
        float s = 0.0f;
        for (int c = lane; c < cols; c += 32) {
            float v = xr[c];
            float nm = fmaxf(m, v);
            s = s * expf(m - nm) + expf(v - nm);
            m = nm;
        }
        for (int o = 16; o > 0; o >>= 1) {
            float om = __shfl_xor_sync(full, m, o);
            float os = __shfl_xor_sync(full, s, o);
            float nm = fmaxf(m, om);
            s = (m == nm ? s : s * expf(m - nm)) + (om == nm ? os : os * expf(om - nm));
            m = nm;
        }
        float inv = 1.0f / s;
        for (int c = lane; c < cols; c += 32) {
            yr[c] = expf(xr[c] - m) * inv;
        }
    }
}
