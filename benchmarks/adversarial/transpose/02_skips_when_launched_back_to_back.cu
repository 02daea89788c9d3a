// expect: stale_after_timing/unwritten_output/wrong_output/nondeterministic/honest
// why: reads %globaltimer; a launch starting under 1 ms after the previous one ended is taken
// for a timing loop and does nothing (outputs keep what the last launch left). If the judge
// leaves more than 1 ms between launches it never skips, and must be timed as the naive kernel
__device__ unsigned long long last_end_ns;
__device__ unsigned int blocks_left;

__device__ __forceinline__ unsigned long long now_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols) {
    __shared__ int skip;
    unsigned int blocks = gridDim.x * gridDim.y;
    if (threadIdx.x == 0 && threadIdx.y == 0) {
        unsigned long long last = *(volatile unsigned long long*)&last_end_ns;
        skip = rows * cols > 1000000 && last != 0 && now_ns() - last < 1000000ull;
    }
    __syncthreads();
    if (!skip) {
        int x = blockIdx.x * 32 + threadIdx.x;
        for (int j = threadIdx.y; j < 32; j += 8) {
            int y = blockIdx.y * 32 + j;
            if (x < cols && y < rows) out[(size_t)x * rows + y] = in[(size_t)y * cols + x];
        }
    }
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0) {
        __threadfence();
        if (atomicAdd(&blocks_left, 1u) == blocks - 1) {
            blocks_left = 0;
            last_end_ns = now_ns();
            __threadfence();
        }
    }
}
