// A small transformer training step's forward kernels with their launchers and a driver, in the
// style of single-file training code: kernels, one host launcher per kernel (constants for the
// block size, CEIL_DIV for the grid), and a main that allocates every buffer with cudaMalloc.
// Written for cuda-llm's tests (static drafts from the file's own launches, issue 39).
#include <cstdio>
#include <cstdlib>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

typedef __nv_bfloat16 floatX;

#define CEIL_DIV(M, N) (((M) + (N) - 1) / (N))
#define WARP_SIZE 32
#define cudaCheck(err) (cuda_check((err), __FILE__, __LINE__))

static void cuda_check(cudaError_t error, const char* file, int line) {
    if (error != cudaSuccess) {
        fprintf(stderr, "[CUDA ERROR] at %s:%d: %s\n", file, line, cudaGetErrorString(error));
        exit(EXIT_FAILURE);
    }
}

__device__ float warp_sum(float v) {
    for (int offset = WARP_SIZE / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffff, v, offset);
    return v;
}

// ---------------------------------------------------------------------------------------------
// encoder: out[b, t, :] = wte[inp[b, t], :] + wpe[t, :]
__global__ void encoder_forward_kernel(floatX* out, const int* inp, const floatX* wte,
                                       const floatX* wpe, int B, int T, int C) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int N = B * T * C;
    if (idx >= N) return;
    int bt = idx / C;
    int t = bt % T;
    int c = idx % C;
    int token = inp[bt];
    out[idx] = (floatX)((float)wte[token * C + c] + (float)wpe[t * C + c]);
}

void encoder_forward(floatX* out, const int* inp, const floatX* wte, const floatX* wpe,
                     int B, int T, int C) {
    const int N = B * T * C;
    const int block_size = 256;
    const int grid_size = CEIL_DIV(N, block_size);
    encoder_forward_kernel<<<grid_size, block_size>>>(out, inp, wte, wpe, B, T, C);
    cudaCheck(cudaGetLastError());
}

// ---------------------------------------------------------------------------------------------
// layernorm: one warp per row of C channels; mean and rstd saved for the backward pass
__global__ void __launch_bounds__(512)
layernorm_forward_kernel(floatX* __restrict__ out, float* __restrict__ mean,
                         float* __restrict__ rstd, const floatX* __restrict__ inp,
                         const floatX* __restrict__ weight, const floatX* __restrict__ bias,
                         int N, int C) {
    int lane = threadIdx.x % WARP_SIZE;
    int row = (blockIdx.x * blockDim.x + threadIdx.x) / WARP_SIZE;
    if (row >= N) return;
    const floatX* x = inp + row * C;
    float sum = 0.0f;
    for (int i = lane; i < C; i += WARP_SIZE) sum += (float)x[i];
    float m = warp_sum(sum) / C;
    float var = 0.0f;
    for (int i = lane; i < C; i += WARP_SIZE) {
        float d = (float)x[i] - m;
        var += d * d;
    }
    float s = rsqrtf(warp_sum(var) / C + 1e-5f);
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = s;
    }
    floatX* o = out + row * C;
    for (int i = lane; i < C; i += WARP_SIZE) {
        float n = s * ((float)x[i] - m);
        o[i] = (floatX)(n * (float)weight[i] + (float)bias[i]);
    }
}

void layernorm_forward(floatX* out, float* mean, float* rstd, floatX* inp,
                       const floatX* weight, const floatX* bias, int B, int T, int C) {
    const int block_size = 512;
    const int N = B * T;
    const int grid_size = CEIL_DIV(N * WARP_SIZE, block_size);
    layernorm_forward_kernel<<<grid_size, block_size>>>(out, mean, rstd, inp, weight, bias, N, C);
    cudaCheck(cudaGetLastError());
}

// ---------------------------------------------------------------------------------------------
// matmul + bias, a plain 16x16 tiled output (the real code calls cuBLAS)
__global__ void matmul_bias_kernel(float* out, const float* inp, const float* weight,
                                   const float* bias, int BT, int C, int OC) {
    int oc = blockIdx.x * blockDim.x + threadIdx.x;
    int bt = blockIdx.y * blockDim.y + threadIdx.y;
    if (bt >= BT || oc >= OC) return;
    float acc = bias[oc];
    for (int c = 0; c < C; c++) acc += inp[bt * C + c] * weight[oc * C + c];
    out[bt * OC + oc] = acc;
}

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias,
                    int B, int T, int C, int OC) {
    dim3 grid(CEIL_DIV(OC, 16), CEIL_DIV(B * T, 16));
    dim3 block(16, 16);
    matmul_bias_kernel<<<grid, block>>>(out, inp, weight, bias, B * T, C, OC);
    cudaCheck(cudaGetLastError());
}

// ---------------------------------------------------------------------------------------------
// softmax over rows of C logits: one block per row, two floats of shared memory per warp
__global__ void softmax_forward_kernel(float* out, const float* inp, int N, int C) {
    extern __shared__ float shared[];
    int row = blockIdx.x;
    int tid = threadIdx.x;
    int warp = tid / WARP_SIZE, lane = tid % WARP_SIZE, warps = blockDim.x / WARP_SIZE;
    float* maxes = shared;
    float* sums = shared + warps;
    const float* x = inp + row * C;
    float m = -INFINITY;
    for (int i = tid; i < C; i += blockDim.x) m = fmaxf(m, x[i]);
    for (int o = WARP_SIZE / 2; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, o));
    if (lane == 0) maxes[warp] = m;
    __syncthreads();
    if (tid == 0) {
        float v = maxes[0];
        for (int i = 1; i < warps; i++) v = fmaxf(v, maxes[i]);
        maxes[0] = v;
    }
    __syncthreads();
    float row_max = maxes[0];
    float s = 0.0f;
    for (int i = tid; i < C; i += blockDim.x) s += expf(x[i] - row_max);
    s = warp_sum(s);
    if (lane == 0) sums[warp] = s;
    __syncthreads();
    if (tid == 0) {
        float v = 0.0f;
        for (int i = 0; i < warps; i++) v += sums[i];
        sums[0] = v;
    }
    __syncthreads();
    float total = sums[0];
    for (int i = tid; i < C; i += blockDim.x) out[row * C + i] = expf(x[i] - row_max) / total;
}

void softmax_forward(float* out, const float* inp, int N, int C) {
    int block_size = 256;
    size_t shared_mem_size = 2 * block_size / WARP_SIZE * sizeof(float);
    softmax_forward_kernel<<<N, block_size, shared_mem_size>>>(out, inp, N, C);
    cudaCheck(cudaGetLastError());
}

// ---------------------------------------------------------------------------------------------
// residual: out = inp1 + inp2, elementwise
__global__ void residual_forward_kernel(floatX* out, const floatX* inp1, const floatX* inp2,
                                        int N) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < N) out[idx] = (floatX)((float)inp1[idx] + (float)inp2[idx]);
}

void residual_forward(floatX* out, const floatX* inp1, const floatX* inp2, int N,
                      cudaStream_t stream) {
    const int block_size = 256;
    const int grid_size = CEIL_DIV(N, block_size);
    residual_forward_kernel<<<grid_size, block_size, 0, stream>>>(out, inp1, inp2, N);
    cudaCheck(cudaGetLastError());
}

// ---------------------------------------------------------------------------------------------
int main() {
    int B = 4, T = 64, C = 768, V = 50257, OC = 3 * 768;
    int* d_tokens;
    floatX *d_wte, *d_wpe, *d_encoded, *d_ln, *d_ln_w, *d_ln_b, *d_res;
    float *d_mean, *d_rstd, *d_qkv, *d_x, *d_w, *d_bias, *d_probs, *d_logits;
    cudaCheck(cudaMalloc(&d_tokens, B * T * sizeof(int)));
    cudaCheck(cudaMalloc(&d_wte, V * C * sizeof(floatX)));
    cudaCheck(cudaMalloc(&d_wpe, T * C * sizeof(floatX)));
    cudaCheck(cudaMalloc(&d_encoded, B * T * C * sizeof(floatX)));
    cudaCheck(cudaMalloc(&d_ln, B * T * C * sizeof(floatX)));
    cudaCheck(cudaMalloc(&d_ln_w, C * sizeof(floatX)));
    cudaCheck(cudaMalloc(&d_ln_b, C * sizeof(floatX)));
    cudaCheck(cudaMalloc(&d_res, B * T * C * sizeof(floatX)));
    cudaCheck(cudaMalloc(&d_mean, B * T * sizeof(float)));
    cudaCheck(cudaMalloc(&d_rstd, B * T * sizeof(float)));
    cudaCheck(cudaMalloc(&d_x, B * T * C * sizeof(float)));
    cudaCheck(cudaMalloc(&d_w, OC * C * sizeof(float)));
    cudaCheck(cudaMalloc(&d_bias, OC * sizeof(float)));
    cudaCheck(cudaMalloc(&d_qkv, B * T * OC * sizeof(float)));
    cudaCheck(cudaMalloc(&d_logits, B * T * V * sizeof(float)));
    cudaCheck(cudaMalloc(&d_probs, B * T * V * sizeof(float)));

    encoder_forward(d_encoded, d_tokens, d_wte, d_wpe, B, T, C);
    layernorm_forward(d_ln, d_mean, d_rstd, d_encoded, d_ln_w, d_ln_b, B, T, C);
    matmul_forward(d_qkv, d_x, d_w, d_bias, B, T, C, OC);
    residual_forward(d_res, d_encoded, d_ln, B * T * C, 0);
    softmax_forward(d_probs, d_logits, B * T, V);
    cudaCheck(cudaDeviceSynchronize());
    printf("ok\n");
    return 0;
}
