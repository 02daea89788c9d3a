// HAND-WRITTEN candidate (not model output): changes the launch to one 256-thread block per row
// (grid = rows) instead of one thread per row, as softmax_f32's r01-c02: all 256 threads read
// the row together, a running maximum and rescaled sum of exponentials per thread (online
// softmax, float math) merged with warp shuffles and one shared slot per warp, then a second
// pass writes exp(x - max) / sum. Eight BF16 values per 16-byte load and store only when the
// row's x and y both start 16-byte aligned (a scalar path otherwise, and for a row's tail).
#include <cuda_bf16.h>

__device__ __forceinline__ void softmax_bf16_merge(float& m, float& s, float mo, float so)
{
    float mn = fmaxf(m, mo);  // a side still at -infinity contributes nothing (and no NaN)
    s = (m == mn ? s : s * expf(m - mn)) + (mo == mn ? so : so * expf(mo - mn));
    m = mn;
}

/* @cuda-llm launch
grid = "rows"
block = 256
*/
extern "C" __global__ void softmax_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, int rows, int cols)
{
    __shared__ float slot_m[32];
    __shared__ float slot_s[32];
    __shared__ float row_m, row_s;
    const unsigned full = 0xffffffffu;
    const float neg_inf = __int_as_float(0xff800000);
    int row = blockIdx.x;
    if (row >= rows) return;  // the whole block leaves together
    const __nv_bfloat16* xr = x + (size_t)row * cols;
    __nv_bfloat16* yr = y + (size_t)row * cols;
    int tid = threadIdx.x, nt = blockDim.x;
    bool vec = ((reinterpret_cast<unsigned long long>(xr)
                 | reinterpret_cast<unsigned long long>(yr)) & 15) == 0;
    int n8 = vec ? cols / 8 : 0;  // 8-value vectors first, then scalars from 8 * n8
    const uint4* x8 = reinterpret_cast<const uint4*>(xr);
    float m = neg_inf, s = 0.0f;
    for (int i = tid; i < n8; i += nt) {
        uint4 raw = x8[i];
        const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
        float v[8];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            float2 f = __bfloat1622float2(h[k]);
            v[2 * k] = f.x;
            v[2 * k + 1] = f.y;
        }
        float mv = v[0];
#pragma unroll
        for (int k = 1; k < 8; ++k) mv = fmaxf(mv, v[k]);
        float sv = 0.0f;
#pragma unroll
        for (int k = 0; k < 8; ++k) sv += expf(v[k] - mv);
        softmax_bf16_merge(m, s, mv, sv);
    }
    for (int c = 8 * n8 + tid; c < cols; c += nt) {
        softmax_bf16_merge(m, s, __bfloat162float(xr[c]), 1.0f);
    }
    for (int o = 16; o > 0; o >>= 1) {
        float mo = __shfl_xor_sync(full, m, o);
        float so = __shfl_xor_sync(full, s, o);
        softmax_bf16_merge(m, s, mo, so);
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
            softmax_bf16_merge(m, s, mo, so);
        }
        if (lane == 0) {
            row_m = m;
            row_s = s;
        }
    }
    __syncthreads();
    m = row_m;
    float inv = 1.0f / row_s;
    uint4* y8 = reinterpret_cast<uint4*>(yr);
    for (int i = tid; i < n8; i += nt) {
        uint4 raw = x8[i];
        const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
        uint4 out;
        __nv_bfloat162* o2 = reinterpret_cast<__nv_bfloat162*>(&out);
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            float2 f = __bfloat1622float2(h[k]);
            o2[k] = __floats2bfloat162_rn(expf(f.x - m) * inv, expf(f.y - m) * inv);
        }
        y8[i] = out;
    }
    for (int c = 8 * n8 + tid; c < cols; c += nt) {
        yr[c] = __float2bfloat16(expf(__bfloat162float(xr[c]) - m) * inv);
    }
}
