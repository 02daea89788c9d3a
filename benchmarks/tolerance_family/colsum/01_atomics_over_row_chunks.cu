// expect: honest
// why: each of the 16 blocks along y sums a chunk of rows and adds it with a float atomicAdd
// (the order of the 16 additions varies run to run)
extern "C" __global__ void colsum(const float* x, float* out, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    int chunk = (rows + gridDim.y - 1) / gridDim.y;
    int r0 = blockIdx.y * chunk, r1 = min(rows, r0 + chunk);
    if (r0 >= r1) return;
    float acc = 0.0f;
    for (int r = r0; r < r1; ++r) acc += x[(size_t)r * cols + c];
    atomicAdd(&out[c], acc);
}
