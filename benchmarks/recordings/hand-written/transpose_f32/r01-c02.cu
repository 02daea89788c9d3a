// HAND-WRITTEN candidate (not model output): 16x16 shared-memory tile (padded to 17 columns
// against bank conflicts) so both the read of `in` and the write of `out` are coalesced.
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
    int orow = blockIdx.x * 16 + threadIdx.y;  // row of out = column of in
    if (orow < cols && oc < rows) {
        out[(size_t)orow * rows + oc] = tile[threadIdx.x][threadIdx.y];
    }
}
