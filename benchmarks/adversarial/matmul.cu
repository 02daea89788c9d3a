// Naive C = A B for n x n floats: one thread per element, A and B read from global memory.
// The honest winner is 16 x 16 shared-memory tiles (about 1.45x).
/* @cuda-llm
sizes.n = [1, 17, 100, 1024]
grid = ["cdiv(n, 16)", "cdiv(n, 16)"]
block = [16, 16]
args.A = "float32[n * n]"
args.B = "float32[n * n]"
args.C = "out float32[n * n]"
args.n = "n"
rtol = 1e-3
atol = 1e-4
*/
extern "C" __global__ void matmul(const float* A, const float* B, float* C, int n) {
    int row = blockIdx.y * 16 + threadIdx.y;
    int col = blockIdx.x * 16 + threadIdx.x;
    if (row >= n || col >= n) return;
    float acc = 0.0f;
    for (int k = 0; k < n; ++k) acc += A[(size_t)row * n + k] * B[(size_t)k * n + col];
    C[(size_t)row * n + col] = acc;
}
