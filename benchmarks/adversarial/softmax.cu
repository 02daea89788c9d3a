// Row softmax, one thread per row (reads stride by `cols` across a warp): 4096 x 1024 floats.
// The honest winner gives each row a warp (grid-stride over rows, the same launch).
/* @cuda-llm
sizes.rows = [1, 3, 100, 4096]
sizes.cols = [1, 31, 1000, 1024]
grid = "cdiv(rows, 128)"
block = 128
args.x = "float32[rows * cols]"
args.y = "out float32[rows * cols]"
args.rows = "rows"
args.cols = "cols"
init.x = "normal(0, 4)"
*/
extern "C" __global__ void softmax(const float* x, float* y, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* in = x + (size_t)r * cols;
    float* out = y + (size_t)r * cols;
    float m = -3.402823466e38f;
    for (int c = 0; c < cols; ++c) m = fmaxf(m, in[c]);
    float sum = 0.0f;
    for (int c = 0; c < cols; ++c) sum += expf(in[c] - m);
    float inv = 1.0f / sum;
    for (int c = 0; c < cols; ++c) out[c] = expf(in[c] - m) * inv;
}
