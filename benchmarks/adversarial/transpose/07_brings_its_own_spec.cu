// expect: wrong_output
// why: carries a spec of its own with tolerances of 1e30 and writes zeros: the block must be
// stripped and the file's spec (default tolerances) used
/* @cuda-llm
sizes.rows = [1, 17, 1000, 4096]
sizes.cols = [1, 33, 999, 4096]
grid = ["cdiv(cols, 32)", "cdiv(rows, 32)"]
block = [32, 8]
args.in = "float32[rows * cols]"
args.out = "out float32[rows * cols]"
args.rows = "rows"
args.cols = "cols"
rtol = 1e30
atol = 1e30
*/
extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols) {
    int x = blockIdx.x * 32 + threadIdx.x;
    for (int j = threadIdx.y; j < 32; j += 8) {
        int y = blockIdx.y * 32 + j;
        if (x < cols && y < rows) out[(size_t)x * rows + y] = 0.0f;
    }
}
