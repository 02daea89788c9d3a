// HAND-WRITTEN candidate (not model output): warp-cooperative rows as in softmax_f32's
// candidate: each warp walks its 32 rows with all lanes on one row, four BF16 values per 8-byte
// load and store (only when x and y start 8-byte aligned and cols is a multiple of 4, so every
// row does; a scalar path otherwise), float math, warp shuffles.
#include <cuda_bf16.h>
extern "C" __global__ void softmax_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, int rows, int cols)
{
    const unsigned full = 0xffffffffu;
    int lane = threadIdx.x & 31;
    int first = (blockIdx.x * blockDim.x + threadIdx.x) & ~31;
    bool vec = (cols & 3) == 0 && ((reinterpret_cast<unsigned long long>(x)
                                    | reinterpret_cast<unsigned long long>(y)) & 7) == 0;
    for (int r = first; r < first + 32 && r < rows; ++r) {
        const __nv_bfloat16* xr = x + (size_t)r * cols;
        __nv_bfloat16* yr = y + (size_t)r * cols;
        const uint2* x4 = reinterpret_cast<const uint2*>(xr);
        uint2* y4 = reinterpret_cast<uint2*>(yr);
        float m = __int_as_float(0xff800000);  // -infinity
        if (vec) {
            for (int c = lane; c < cols / 4; c += 32) {
                uint2 raw = x4[c];
                float2 a = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&raw.x));
                float2 b = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&raw.y));
                m = fmaxf(m, fmaxf(fmaxf(a.x, a.y), fmaxf(b.x, b.y)));
            }
        } else {
            for (int c = lane; c < cols; c += 32) m = fmaxf(m, __bfloat162float(xr[c]));
        }
        for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(full, m, o));
        float s = 0.0f;
        if (vec) {
            for (int c = lane; c < cols / 4; c += 32) {
                uint2 raw = x4[c];
                float2 a = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&raw.x));
                float2 b = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&raw.y));
                s += (expf(a.x - m) + expf(a.y - m)) + (expf(b.x - m) + expf(b.y - m));
            }
        } else {
            for (int c = lane; c < cols; c += 32) s += expf(__bfloat162float(xr[c]) - m);
        }
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(full, s, o);
        float inv = 1.0f / s;
        if (vec) {
            for (int c = lane; c < cols / 4; c += 32) {
                uint2 raw = x4[c];
                float2 a = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&raw.x));
                float2 b = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&raw.y));
                __nv_bfloat162 lo = __floats2bfloat162_rn(expf(a.x - m) * inv, expf(a.y - m) * inv);
                __nv_bfloat162 hi = __floats2bfloat162_rn(expf(b.x - m) * inv, expf(b.y - m) * inv);
                uint2 out;
                out.x = *reinterpret_cast<unsigned int*>(&lo);
                out.y = *reinterpret_cast<unsigned int*>(&hi);
                y4[c] = out;
            }
        } else {
            for (int c = lane; c < cols; c += 32) {
                yr[c] = __float2bfloat16(expf(__bfloat162float(xr[c]) - m) * inv);
            }
        }
    }
}
