// Column sums of a rows x cols float32 matrix added into `out` (inout): one thread per column
// adds the rows in order, then adds that to out[c] (the 16 blocks along y other than the first
// are idle: room for a split over row chunks added with atomics).
/* @cuda-llm
sizes.rows = [1, 1000, 16384]
sizes.cols = [1, 300, 4096]
grid = ["cdiv(cols, 256)", 16]
block = 256
args.x = "float32[rows * cols]"
args.out = "inout float32[cols]"
args.rows = "rows"
args.cols = "cols"
init.out = "zeros()"
*/
extern "C" __global__ void colsum(const float* x, float* out, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (blockIdx.y != 0 || c >= cols) return;
    float acc = 0.0f;
    for (int r = 0; r < rows; ++r) acc += x[(size_t)r * cols + c];
    out[c] += acc;
}
