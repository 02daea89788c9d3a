// HAND-WRITTEN candidate (not model output): changes the launch to one warp per row (block =
// 256, eight rows per block, grid = cdiv(rows, 8)) instead of one thread per row: the 32 lanes
// read the row together (coalesced), 8192 warps keep the memory system busy, and a warp-shuffle
// reduction gives the dot product. float4 loads only when the row of A and x both start 16-byte
// aligned (a scalar path otherwise, and for the tail of a row).
/* @cuda-llm launch
grid = "cdiv(rows, 8)"
block = 256
*/
extern "C" __global__ void matvec_f32(const float* __restrict__ A, const float* __restrict__ x,
                                      float* y, int rows, int cols)
{
    const unsigned full = 0xffffffffu;
    int lane = threadIdx.x & 31;
    int r = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (r >= rows) return;  // the whole warp leaves together
    const float* a = A + (size_t)r * cols;
    bool vec = ((reinterpret_cast<unsigned long long>(a)
                 | reinterpret_cast<unsigned long long>(x)) & 15) == 0;
    int n4 = vec ? cols / 4 : 0;  // float4s first, then scalars from 4 * n4
    const float4* a4 = reinterpret_cast<const float4*>(a);
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float s0 = 0.0f, s1 = 0.0f;
#pragma unroll 4
    for (int i = lane; i < n4; i += 32) {
        float4 p = a4[i], q = x4[i];
        s0 += p.x * q.x + p.y * q.y;
        s1 += p.z * q.z + p.w * q.w;
    }
    for (int c = 4 * n4 + lane; c < cols; c += 32) s0 += a[c] * x[c];
    float s = s0 + s1;
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(full, s, o);
    if (lane == 0) y[r] = s;
}
