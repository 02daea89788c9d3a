// HAND-WRITTEN candidate (not model output): as matvec_f32's candidate, each warp computes its
// 32 rows one at a time with all lanes on the row; BF16 pairs are read as __nv_bfloat162
// (when A and x start 4-byte aligned and cols is even, so every row does; a scalar path
// otherwise), products are accumulated in float and reduced with warp shuffles.
#include <cuda_bf16.h>
extern "C" __global__ void matvec_bf16(const __nv_bfloat16* A, const __nv_bfloat16* x,
                                       __nv_bfloat16* y, int rows, int cols)
{
    const unsigned full = 0xffffffffu;
    int lane = threadIdx.x & 31;
    int first = (blockIdx.x * blockDim.x + threadIdx.x) & ~31;
    bool paired = (cols & 1) == 0 && ((reinterpret_cast<unsigned long long>(A)
                                       | reinterpret_cast<unsigned long long>(x)) & 3) == 0;
    const __nv_bfloat162* x2 = reinterpret_cast<const __nv_bfloat162*>(x);
    for (int r = first; r < first + 32 && r < rows; ++r) {
        const __nv_bfloat16* a = A + (size_t)r * cols;
        float s0 = 0.0f, s1 = 0.0f;
        if (paired) {
            const __nv_bfloat162* a2 = reinterpret_cast<const __nv_bfloat162*>(a);
            int c = lane;
            for (; c + 32 < cols / 2; c += 64) {
                float2 p = __bfloat1622float2(a2[c]), q = __bfloat1622float2(x2[c]);
                float2 p2 = __bfloat1622float2(a2[c + 32]), q2 = __bfloat1622float2(x2[c + 32]);
                s0 += p.x * q.x + p.y * q.y;
                s1 += p2.x * q2.x + p2.y * q2.y;
            }
            for (; c < cols / 2; c += 32) {
                float2 p = __bfloat1622float2(a2[c]), q = __bfloat1622float2(x2[c]);
                s0 += p.x * q.x + p.y * q.y;
            }
        } else {
            for (int c = lane; c < cols; c += 32) {
                s0 += __bfloat162float(a[c]) * __bfloat162float(x[c]);
            }
        }
        float s = s0 + s1;
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(full, s, o);
        if (lane == 0) y[r] = __float2bfloat16(s);
    }
}
