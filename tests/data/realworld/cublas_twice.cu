// A kernel file that includes cuBLAS, as a PyTorch extension's or a training program's does:
// `cuda-llm check` and `cuda-llm bench` must work on it in a venv whose cuBLAS headers are newer
// than its runtime's (issue 38). Ours, not another project's (benchmarks/gpu_corpus.sh).
#include <cublas_v2.h>

/* @cuda-llm
sizes.n = [1000, 4097, 1048576]
grid = "cdiv(n, 256)"
block = 256
args.x = "float32[n]"
args.y = "out float32[n]"
args.n = "n"
*/
__global__ void twice(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}

// the host side: cuBLAS scales in place what the kernel computed
void scale(cublasHandle_t handle, float* y, int n) {
    const float alpha = 0.5f;
    cublasSscal(handle, n, &alpha, y, 1);
}
