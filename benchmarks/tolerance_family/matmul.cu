// Naive C = A B (float32, M x K times K x N): one thread per element, k in order with an FMA
// per term. The spec's default inputs uniform(-1, 1) and tolerances (rtol 1e-4, atol 1e-5).
/* @cuda-llm
sizes.M = [1, 100, 1024]
sizes.N = [1, 129, 1024]
sizes.K = [1, 250, 2048]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
block = [16, 16]
args.A = "float32[M * K]"
args.B = "float32[K * N]"
args.C = "out float32[M * N]"
args.M = "M"
args.N = "N"
args.K = "K"
*/
extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[(size_t)row * K + k] * B[(size_t)k * N + col];
    C[(size_t)row * N + col] = acc;
}
