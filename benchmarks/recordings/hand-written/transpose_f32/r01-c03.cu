// HAND-WRITTEN candidate (not model output): changes the launch to a 32x32 tile per block with
// a 32x8 block (grid = [cdiv(cols, 32), cdiv(rows, 32)], block = [32, 8]): each thread moves
// four elements, every warp reads 32 consecutive floats of a row of `in` and writes 32
// consecutive floats of a row of `out` through a shared tile padded to 33 columns (no bank
// conflicts). Every load and store is bounds-checked, so ragged edges and tiny sizes work.
/* @cuda-llm launch
grid = ["cdiv(cols, 32)", "cdiv(rows, 32)"]
block = [32, 8]
*/
extern "C" __global__ void transpose_f32(const float* in, float* out, int rows, int cols)
{
    __shared__ float tile[32][33];
    int tx = threadIdx.x, ty = threadIdx.y;
    int c0 = blockIdx.x * 32, r0 = blockIdx.y * 32;
    int c = c0 + tx;
#pragma unroll
    for (int j = ty; j < 32; j += 8) {
        int r = r0 + j;
        if (r < rows && c < cols) tile[j][tx] = in[(size_t)r * cols + c];
    }
    __syncthreads();
    int oc = r0 + tx;  // column of out = row of in
#pragma unroll
    for (int j = ty; j < 32; j += 8) {
        int orow = c0 + j;  // row of out = column of in
        if (orow < cols && oc < rows) out[(size_t)orow * rows + oc] = tile[tx][j];
    }
}
