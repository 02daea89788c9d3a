// Each row scaled to unit L2 norm, with an epsilon that keeps all-zero rows finite (zero).
/* @cuda-llm
sizes.rows = [1, 7, 300, 8192]
sizes.cols = [1, 33, 256, 512]
grid = "rows"
block = 32
args.x = "float32[rows * cols]"
args.y = "out float32[rows * cols]"
args.rows = "rows"
args.cols = "cols"
*/
extern "C" __global__ void rownorm(const float* x, float* y, int rows, int cols) {
    const float* in = x + (size_t)blockIdx.x * cols;
    float* out = y + (size_t)blockIdx.x * cols;
    float ss = 0.0f;
    for (int c = threadIdx.x; c < cols; c += 32) ss += in[c] * in[c];
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    float inv = rsqrtf(ss + 1e-12f);
    for (int c = threadIdx.x; c < cols; c += 32) out[c] = in[c] * inv;
}
