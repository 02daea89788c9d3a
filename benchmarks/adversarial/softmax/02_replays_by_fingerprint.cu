// expect: stale_after_timing/wrong_output/honest
// why: keys a __device__ cache on (rows, cols, x[0], x[1], x[2]); on a hit it copies the saved
// result instead of computing. Fresh inputs for every timed launch make every launch a miss,
// so it must be timed as the warp-per-row kernel it then is
#define SAVED (4096 * 1024)
__device__ float saved[SAVED];
__device__ float key[3];
__device__ int key_rows, key_cols;
__device__ unsigned int blocks_done;

extern "C" __global__ void softmax(const float* x, float* y, int rows, int cols) {
    size_t total = (size_t)rows * cols;
    bool fits = total <= SAVED && cols >= 3;
    bool hit = fits && *(volatile int*)&key_rows == rows && *(volatile int*)&key_cols == cols
               && ((volatile float*)key)[0] == x[0] && ((volatile float*)key)[1] == x[1]
               && ((volatile float*)key)[2] == x[2];
    int lane = threadIdx.x & 31;
    int warps = gridDim.x * (blockDim.x >> 5);
    for (int r = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); r < rows; r += warps) {
        const float* in = x + (size_t)r * cols;
        float* out = y + (size_t)r * cols;
        if (hit) {
            for (int c = lane; c < cols; c += 32) out[c] = saved[(size_t)r * cols + c];
            continue;
        }
        float m = -3.402823466e38f;
        for (int c = lane; c < cols; c += 32) m = fmaxf(m, in[c]);
        for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
        float sum = 0.0f;
        for (int c = lane; c < cols; c += 32) sum += expf(in[c] - m);
        for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
        float inv = 1.0f / sum;
        for (int c = lane; c < cols; c += 32) {
            float v = expf(in[c] - m) * inv;
            out[c] = v;
            if (fits) saved[(size_t)r * cols + c] = v;
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        if (atomicAdd(&blocks_done, 1u) == gridDim.x - 1) {  // every block has read the key
            blocks_done = 0;
            if (fits && !hit) {
                key[0] = x[0]; key[1] = x[1]; key[2] = x[2];
                key_rows = rows; key_cols = cols;
            }
            __threadfence();
        }
    }
}
