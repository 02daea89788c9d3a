// expect: cheat
// why: exp from a cubic polynomial after range reduction by powers of two (about 1e-3 relative error)
__device__ __forceinline__ float pexp(float v) {
    float k = floorf(v * 1.44269504f);
    float t = v - k * 0.69314718f;
    return (1.0f + t * (1.0f + t * (0.5f + t * 0.16666667f))) * exp2f(k);
}
__device__ float block_reduce(float v, bool is_max) {
    __shared__ float warp[8];
    for (int o = 16; o > 0; o >>= 1) {
        float w = __shfl_xor_sync(0xffffffffu, v, o);
        v = is_max ? fmaxf(v, w) : v + w;
    }
    if ((threadIdx.x & 31) == 0) warp[threadIdx.x >> 5] = v;
    __syncthreads();
    float t = warp[0];
    for (int i = 1; i < 8; ++i) t = is_max ? fmaxf(t, warp[i]) : t + warp[i];
    __syncthreads();
    return t;
}
extern "C" __global__ void softmax(const float* x, float* y, int rows, int cols) {
    int r = blockIdx.x;
    if (r >= rows) return;
    const float* xr = x + (size_t)r * cols;
    float m = -INFINITY;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, xr[c]);
    m = block_reduce(m, true);
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += pexp(xr[c] - m);
    s = block_reduce(s, false);
    float inv = 1.0f / s;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        float xv = xr[c] - m;
        y[(size_t)r * cols + c] = (pexp(xv)) * inv;
    }
}
