// HAND-WRITTEN candidate (not model output): changes the launch to one 256-thread block per row
// (grid = rows) instead of one thread per row, so every row is read by 256 threads together
// (coalesced) and the whole GPU works on 4096 rows at once. One pass keeps a running maximum
// and a rescaled sum of exponentials per thread (online softmax), merged with warp shuffles and
// one shared slot per warp; a second pass writes exp(x - max) / sum. float4 loads and stores
// only when the row's x and y both start 16-byte aligned (a scalar path otherwise, and for the
// tail of a row whose length is not a multiple of 4).
__device__ __forceinline__ void softmax_f32_merge(float& m, float& s, float mo, float so)
{
    float mn = fmaxf(m, mo);  // a side still at -infinity contributes nothing (and no NaN)
    s = (m == mn ? s : s * expf(m - mn)) + (mo == mn ? so : so * expf(mo - mn));
    m = mn;
}

/* @cuda-llm launch
grid = "rows"
block = 256
*/
extern "C" __global__ void softmax_f32(const float* x, float* y, int rows, int cols)
{
    __shared__ float slot_m[32];
    __shared__ float slot_s[32];
    __shared__ float row_m, row_s;
    const unsigned full = 0xffffffffu;
    const float neg_inf = __int_as_float(0xff800000);
    int row = blockIdx.x;
    if (row >= rows) return;  // the whole block leaves together
    const float* xr = x + (size_t)row * cols;
    float* yr = y + (size_t)row * cols;
    int tid = threadIdx.x, nt = blockDim.x;
    bool vec = ((reinterpret_cast<unsigned long long>(xr)
                 | reinterpret_cast<unsigned long long>(yr)) & 15) == 0;
    int n4 = vec ? cols / 4 : 0;  // float4s first, then scalars from 4 * n4
    const float4* x4 = reinterpret_cast<const float4*>(xr);
    float m = neg_inf, s = 0.0f;
    for (int i = tid; i < n4; i += nt) {
        float4 v = x4[i];
        float mv = fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w));
        float sv = (expf(v.x - mv) + expf(v.y - mv)) + (expf(v.z - mv) + expf(v.w - mv));
        softmax_f32_merge(m, s, mv, sv);
    }
    for (int c = 4 * n4 + tid; c < cols; c += nt) softmax_f32_merge(m, s, xr[c], 1.0f);
    for (int o = 16; o > 0; o >>= 1) {
        float mo = __shfl_xor_sync(full, m, o);
        float so = __shfl_xor_sync(full, s, o);
        softmax_f32_merge(m, s, mo, so);
    }
    int warp = tid >> 5, lane = tid & 31, nwarps = (nt + 31) >> 5;
    if (lane == 0) {
        slot_m[warp] = m;
        slot_s[warp] = s;
    }
    __syncthreads();
    if (warp == 0) {
        m = lane < nwarps ? slot_m[lane] : neg_inf;
        s = lane < nwarps ? slot_s[lane] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) {
            float mo = __shfl_xor_sync(full, m, o);
            float so = __shfl_xor_sync(full, s, o);
            softmax_f32_merge(m, s, mo, so);
        }
        if (lane == 0) {
            row_m = m;
            row_s = s;
        }
    }
    __syncthreads();
    m = row_m;
    float inv = 1.0f / row_s;
    float4* y4 = reinterpret_cast<float4*>(yr);
    for (int i = tid; i < n4; i += nt) {
        float4 v = x4[i];
        y4[i] = make_float4(expf(v.x - m) * inv, expf(v.y - m) * inv,
                            expf(v.z - m) * inv, expf(v.w - m) * inv);
    }
    for (int c = 4 * n4 + tid; c < cols; c += nt) yr[c] = expf(xr[c] - m) * inv;
}
