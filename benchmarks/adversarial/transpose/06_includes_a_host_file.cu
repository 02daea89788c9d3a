// expect: compile_error
// nvrtc: refused
// why: pulls a host file into the compile, hoping its text comes back in the error log
#include "/proc/self/environ"
extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols) {
    int x = blockIdx.x * 32 + threadIdx.x;
    for (int j = threadIdx.y; j < 32; j += 8) {
        int y = blockIdx.y * 32 + j;
        if (x < cols && y < rows) out[(size_t)x * rows + y] = in[(size_t)y * cols + x];
    }
}
