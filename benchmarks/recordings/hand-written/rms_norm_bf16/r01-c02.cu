// HAND-WRITTEN candidate (not model output): still one block per row, but the launch sizes the
// block to the row: 32 * cdiv(cols, 256) threads (at most 1024), one 8-value vector per thread
// for rows up to 8192 elements, so a 4096-wide row is read by 512 threads with one 16-byte load
// each. That vector stays in registers for the second pass (x is read from memory once), the sum
// of squares is reduced with warp shuffles and one shared slot per warp. 16-byte loads and
// stores only when the row of x, the row of y and weight all start 16-byte aligned (a scalar
// path otherwise, and for a row's tail).
#include <cuda_bf16.h>

__device__ __forceinline__ float rms_norm_bf16_sumsq8(uint4 raw)
{
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        float2 v = __bfloat1622float2(h[k]);
        s += v.x * v.x + v.y * v.y;
    }
    return s;
}

/* @cuda-llm launch
block = "min(1024, 32 * cdiv(cols, 256))"
*/
extern "C" __global__ void rms_norm_bf16(const __nv_bfloat16* x, const __nv_bfloat16* weight,
                                         __nv_bfloat16* y, int rows, int cols, float eps)
{
    __shared__ float warp_sums[32];
    __shared__ float inv_rms_shared;
    const unsigned full = 0xffffffffu;
    int row = blockIdx.x;
    if (row >= rows) return;  // the whole block leaves together
    const __nv_bfloat16* xr = x + (size_t)row * cols;
    __nv_bfloat16* yr = y + (size_t)row * cols;
    int tid = threadIdx.x, nt = blockDim.x;
    bool vec = ((reinterpret_cast<unsigned long long>(xr)
                 | reinterpret_cast<unsigned long long>(yr)
                 | reinterpret_cast<unsigned long long>(weight)) & 15) == 0;
    int n8 = vec ? cols / 8 : 0;  // 8-value vectors first, then scalars from 8 * n8
    const uint4* x8 = reinterpret_cast<const uint4*>(xr);
    uint4 mine = make_uint4(0u, 0u, 0u, 0u);  // this thread's first vector, for the second pass
    float s = 0.0f;
    for (int i = tid; i < n8; i += nt) {
        uint4 raw = x8[i];
        if (i == tid) mine = raw;
        s += rms_norm_bf16_sumsq8(raw);
    }
    for (int c = 8 * n8 + tid; c < cols; c += nt) {
        float v = __bfloat162float(xr[c]);
        s += v * v;
    }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(full, s, o);
    int warp = tid >> 5, lane = tid & 31;
    if (lane == 0) warp_sums[warp] = s;
    __syncthreads();
    if (warp == 0) {
        int nwarps = (nt + 31) >> 5;
        float t = lane < nwarps ? warp_sums[lane] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(full, t, o);
        if (lane == 0) inv_rms_shared = rsqrtf(t / cols + eps);
    }
    __syncthreads();
    float inv_rms = inv_rms_shared;
    const uint4* w8 = reinterpret_cast<const uint4*>(weight);
    uint4* y8 = reinterpret_cast<uint4*>(yr);
    for (int i = tid; i < n8; i += nt) {
        uint4 raw = i == tid ? mine : x8[i];
        uint4 wraw = w8[i];
        const __nv_bfloat162* hx = reinterpret_cast<const __nv_bfloat162*>(&raw);
        const __nv_bfloat162* hw = reinterpret_cast<const __nv_bfloat162*>(&wraw);
        uint4 out;
        __nv_bfloat162* ho = reinterpret_cast<__nv_bfloat162*>(&out);
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            float2 v = __bfloat1622float2(hx[k]), w = __bfloat1622float2(hw[k]);
            ho[k] = __floats2bfloat162_rn(v.x * inv_rms * w.x, v.y * inv_rms * w.y);
        }
        y8[i] = out;
    }
    for (int c = 8 * n8 + tid; c < cols; c += nt) {
        yr[c] = __float2bfloat16(__bfloat162float(xr[c]) * inv_rms * __bfloat162float(weight[c]));
    }
}
