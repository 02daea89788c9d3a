// expect: winner
// why: a block of 256 threads per row (grid = rows): coalesced loads, the maximum and the sum
// reduced with warp shuffles through 64 bytes of dynamic shared memory; about 10x
/* @cuda-llm launch
grid = "rows"
block = 256
smem = "2 * (256 / 32) * 4"
*/
extern "C" __global__ void softmax(const float* x, float* y, int rows, int cols) {
    extern __shared__ float part[];  // [0, warps): the warps' maxima, [warps, 2 warps): their sums
    int r = blockIdx.x;
    if (r >= rows) return;  // the whole block leaves together
    const float* in = x + (size_t)r * cols;
    float* out = y + (size_t)r * cols;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    float m = -3.402823466e38f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, in[c]);
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (lane == 0) part[warp] = m;
    __syncthreads();
    m = part[0];
    for (int w = 1; w < warps; ++w) m = fmaxf(m, part[w]);
    float sum = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) sum += expf(in[c] - m);
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0) part[warps + warp] = sum;
    __syncthreads();
    sum = 0.0f;
    for (int w = 0; w < warps; ++w) sum += part[warps + w];
    float inv = 1.0f / sum;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = expf(in[c] - m) * inv;
}
