// HAND-WRITTEN candidate (not model output), DELIBERATELY WRONG: shared-memory tiles, but the
// store forgets the edge guard, so sizes that are not multiples of 16 write past the rows /
// columns of the output (the evaluator must reject it: out_of_bounds or wrong_output).
extern "C" __global__ void transpose_f32(const float* in, float* out, int rows, int cols)
{
    __shared__ float tile[16][17];
    int c = blockIdx.x * 16 + threadIdx.x;
    int r = blockIdx.y * 16 + threadIdx.y;
    if (r < rows && c < cols) {
        tile[threadIdx.y][threadIdx.x] = in[(size_t)r * cols + c];
    }
    __syncthreads();
    int oc = blockIdx.y * 16 + threadIdx.x;  // column of out = row of in
    int orow = blockIdx.x * 16 + threadIdx.y;
    out[(size_t)orow * rows + oc] = tile[threadIdx.x][threadIdx.y];
}
