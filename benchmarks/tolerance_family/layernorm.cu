// Layer normalisation of each row of a rows x cols float32 matrix (no affine part), eps 1e-5:
// thread 0 of each row's block computes the mean, then the variance (two passes), in order.
/* @cuda-llm
sizes.rows = [1, 5, 2048]
sizes.cols = [1, 100, 1024]
grid = "rows"
block = 256
args.x = "float32[rows * cols]"
args.y = "out float32[rows * cols]"
args.rows = "rows"
args.cols = "cols"
*/
extern "C" __global__ void layernorm(const float* x, float* y, int rows, int cols) {
    int r = blockIdx.x;
    if (r >= rows || threadIdx.x != 0) return;
    const float* xr = x + (size_t)r * cols;
    float s = 0.0f;
    for (int c = 0; c < cols; ++c) s += xr[c];
    float mean = s / cols;
    float v = 0.0f;
    for (int c = 0; c < cols; ++c) v += (xr[c] - mean) * (xr[c] - mean);
    float rstd = 1.0f / sqrtf(v / cols + 1e-5f);
    for (int c = 0; c < cols; ++c) y[(size_t)r * cols + c] = (xr[c] - mean) * rstd;
}
