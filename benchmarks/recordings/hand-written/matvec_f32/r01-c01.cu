// HAND-WRITTEN candidate (not model output), DELIBERATELY WRONG: changes the signature
// (its last two parameters are swapped: `int cols, int rows`): the evaluator
// must reject it as signature_mismatch before it reaches the GPU.
extern "C" __global__ void matvec_f32(const float* A, const float* x, float* y, int cols, int rows)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        float sum = 0.0f;
        for (int c = 0; c < cols; ++c) sum += A[(size_t)r * cols + c] * x[c];
        y[r] = sum;
    }
}
