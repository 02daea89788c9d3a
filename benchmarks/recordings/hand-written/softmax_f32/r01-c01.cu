// HAND-WRITTEN candidate (not model output): same launch (the grid still has one thread per
// row), but each warp now walks its 32 rows one at a time with all 32 lanes on the row:
// coalesced float4 loads and stores (only when x and y start 16-byte aligned and cols is a
// multiple of 4, so every row does; a scalar path otherwise) and warp-shuffle reductions for
// the row max and sum.
extern "C" __global__ void softmax_f32(const float* x, float* y, int rows, int cols)
{
    const unsigned full = 0xffffffffu;
    int lane = threadIdx.x & 31;
    int first = (blockIdx.x * blockDim.x + threadIdx.x) & ~31;  // this warp's first row
    bool vec = (cols & 3) == 0 && ((reinterpret_cast<unsigned long long>(x)
                                    | reinterpret_cast<unsigned long long>(y)) & 15) == 0;
    for (int r = first; r < first + 32 && r < rows; ++r) {
        const float* xr = x + (size_t)r * cols;
        float* yr = y + (size_t)r * cols;
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        float4* y4 = reinterpret_cast<float4*>(yr);
        float m = __int_as_float(0xff800000);  // -infinity
        if (vec) {
            for (int c = lane; c < cols / 4; c += 32) {
                float4 v = x4[c];
                m = fmaxf(m, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
            }
        } else {
            for (int c = lane; c < cols; c += 32) m = fmaxf(m, xr[c]);
        }
        for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(full, m, o));
        float s = 0.0f;
        if (vec) {
            for (int c = lane; c < cols / 4; c += 32) {
                float4 v = x4[c];
                s += (expf(v.x - m) + expf(v.y - m)) + (expf(v.z - m) + expf(v.w - m));
            }
        } else {
            for (int c = lane; c < cols; c += 32) s += expf(xr[c] - m);
        }
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(full, s, o);
        float inv = 1.0f / s;
        if (vec) {
            for (int c = lane; c < cols / 4; c += 32) {
                float4 v = x4[c];
                y4[c] = make_float4(expf(v.x - m) * inv, expf(v.y - m) * inv,
                                    expf(v.z - m) * inv, expf(v.w - m) * inv);
            }
        } else {
            for (int c = lane; c < cols; c += 32) yr[c] = expf(xr[c] - m) * inv;
        }
    }
}
