// Row softmax of a rows x cols float32 matrix, inputs normal(0, 2): thread 0 of each row's
// block does the whole row (max, sum of exp, normalise) in order.
/* @cuda-llm
sizes.rows = [1, 7, 2048]
sizes.cols = [1, 33, 1024]
grid = "rows"
block = 256
args.x = "float32[rows * cols]"
args.y = "out float32[rows * cols]"
args.rows = "rows"
args.cols = "cols"
init.x = "normal(0, 2)"
*/
extern "C" __global__ void softmax(const float* x, float* y, int rows, int cols) {
    int r = blockIdx.x;
    if (r >= rows || threadIdx.x != 0) return;
    const float* xr = x + (size_t)r * cols;
    float m = -INFINITY;
    for (int c = 0; c < cols; ++c) m = fmaxf(m, xr[c]);
    float s = 0.0f;
    for (int c = 0; c < cols; ++c) s += expf(xr[c] - m);
    for (int c = 0; c < cols; ++c) y[(size_t)r * cols + c] = expf(xr[c] - m) / s;
}
