// Row softmax of an 8192 x 4096 float matrix (128 MiB): one block per row, shared-memory
// reductions for the maximum and the sum.
/* @cuda-llm
sizes.rows = [1, 3, 100, 8192]
sizes.cols = [1, 1000, 4096, 4096]
grid = "rows"
block = 256
args.x = "float32[rows * cols]"
args.y = "out float32[rows * cols]"
args.rows = "rows"
args.cols = "cols"
*/
extern "C" __global__ void softmax(const float* x, float* y, int rows, int cols) {
    __shared__ float red[256];
    const float* row = x + (size_t)blockIdx.x * cols;
    float* out = y + (size_t)blockIdx.x * cols;
    float m = -3.402823466e38f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, row[c]);
    red[threadIdx.x] = m;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
        __syncthreads();
    }
    m = red[0];
    __syncthreads();
    float sum = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) sum += __expf(row[c] - m);
    red[threadIdx.x] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    float inv = 1.0f / red[0];
    for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = __expf(row[c] - m) * inv;
}
