// Row softmax in bfloat16 (float arithmetic, one rounding at the store), inputs normal(0, 2):
// thread 0 of each row's block does the whole row in order.
#include <cuda_bf16.h>
/* @cuda-llm
sizes.rows = [1, 7, 2048]
sizes.cols = [1, 33, 1024]
grid = "rows"
block = 256
args.x = "bfloat16[rows * cols]"
args.y = "out bfloat16[rows * cols]"
args.rows = "rows"
args.cols = "cols"
init.x = "normal(0, 2)"
*/
extern "C" __global__ void softmax_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, int rows,
                                        int cols) {
    int r = blockIdx.x;
    if (r >= rows || threadIdx.x != 0) return;
    const __nv_bfloat16* xr = x + (size_t)r * cols;
    float m = -INFINITY;
    for (int c = 0; c < cols; ++c) m = fmaxf(m, __bfloat162float(xr[c]));
    float s = 0.0f;
    for (int c = 0; c < cols; ++c) s += expf(__bfloat162float(xr[c]) - m);
    for (int c = 0; c < cols; ++c)
        y[(size_t)r * cols + c] = __float2bfloat16(expf(__bfloat162float(xr[c]) - m) / s);
}
