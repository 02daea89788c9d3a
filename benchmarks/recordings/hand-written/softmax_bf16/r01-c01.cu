// HAND-WRITTEN candidate (not model output): warp-cooperative rows as in softmax_f32's
// candidate: each warp walks its 32 rows with all lanes on one row (coalesced BF16 loads),
// online max/sum in one pass, warp-shuffle reductions, float math throughout.
#include <cuda_bf16.h>
extern "C" __global__ void softmax_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, int rows, int cols)
{
    const unsigned full = 0xffffffffu;
    int lane = threadIdx.x & 31;
    int first = (blockIdx.x * blockDim.x + threadIdx.x) & ~31;
    for (int r = first; r < first + 32 && r < rows; ++r) {
        const __nv_bfloat16* xr = x + (size_t)r * cols;
        __nv_bfloat16* yr = y + (size_t)r * cols;
        float m = __int_as_float(0xff800000);
        float s = 0.0f;
        for (int c = lane; c < cols; c += 32) {
            float v = __bfloat162float(xr[c]);
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
            yr[c] = __float2bfloat16(expf(__bfloat162float(xr[c]) - m) * inv);
        }
    }
}
