// Naive out = transpose(in), rows x cols floats (64 MiB each way at the timed size): reads are
// coalesced, writes stride by `rows`. The honest winner is a 32 x 32 shared tile (about 2.1x).
/* @cuda-llm
sizes.rows = [1, 17, 1000, 4096]
sizes.cols = [1, 33, 999, 4096]
grid = ["cdiv(cols, 32)", "cdiv(rows, 32)"]
block = [32, 8]
args.in = "float32[rows * cols]"
args.out = "out float32[rows * cols]"
args.rows = "rows"
args.cols = "cols"
*/
extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols) {
    int x = blockIdx.x * 32 + threadIdx.x;
    for (int j = threadIdx.y; j < 32; j += 8) {
        int y = blockIdx.y * 32 + j;
        if (x < cols && y < rows) out[(size_t)x * rows + y] = in[(size_t)y * cols + x];
    }
}
