// HAND-WRITTEN candidate (not model output): changes the launch to one warp per row (block =
// 256, eight rows per block, grid = cdiv(rows, 8)) instead of one thread per row: the 32 lanes
// read the row together (coalesced), 8192 warps keep the memory system busy, products are
// summed in float and reduced with warp shuffles. Eight BF16 values per 16-byte load only when
// the row of A and x both start 16-byte aligned (a scalar path otherwise, and for a row's tail).
#include <cuda_bf16.h>
/* @cuda-llm launch
grid = "cdiv(rows, 8)"
block = 256
*/
extern "C" __global__ void matvec_bf16(const __nv_bfloat16* A, const __nv_bfloat16* x,
                                       __nv_bfloat16* y, int rows, int cols)
{
    const unsigned full = 0xffffffffu;
    int lane = threadIdx.x & 31;
    int r = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (r >= rows) return;  // the whole warp leaves together
    const __nv_bfloat16* a = A + (size_t)r * cols;
    bool vec = ((reinterpret_cast<unsigned long long>(a)
                 | reinterpret_cast<unsigned long long>(x)) & 15) == 0;
    int n8 = vec ? cols / 8 : 0;  // 8-value vectors first, then scalars from 8 * n8
    const uint4* a8 = reinterpret_cast<const uint4*>(a);
    const uint4* x8 = reinterpret_cast<const uint4*>(x);
    float s0 = 0.0f, s1 = 0.0f;
#pragma unroll 2
    for (int i = lane; i < n8; i += 32) {
        uint4 pa = a8[i], px = x8[i];
        const __nv_bfloat162* ha = reinterpret_cast<const __nv_bfloat162*>(&pa);
        const __nv_bfloat162* hx = reinterpret_cast<const __nv_bfloat162*>(&px);
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            float2 p = __bfloat1622float2(ha[k]), q = __bfloat1622float2(hx[k]);
            s0 += p.x * q.x;
            s1 += p.y * q.y;
        }
    }
    for (int c = 8 * n8 + lane; c < cols; c += 32) {
        s0 += __bfloat162float(a[c]) * __bfloat162float(x[c]);
    }
    float s = s0 + s1;
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(full, s, o);
    if (lane == 0) y[r] = __float2bfloat16(s);
}
