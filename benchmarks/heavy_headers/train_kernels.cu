// Training kernels in the style of a GPT-2 training file (written for cuda-llm-lsp's
// benchmarks/lsp_heavy_headers.py): bf16 activations, cooperative groups with cg::reduce,
// 128-bit packed loads, 24 kernels and their host launchers.
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>

namespace cg = cooperative_groups;

typedef __nv_bfloat16 floatX;
#define WARP_SIZE 32U
#define CEIL_DIV(M, N) (((M) + (N) - 1) / (N))
#define GELU_SCALING_FACTOR 0.7978845608028654f

// ----------------------------------------------------------------------------
// 128-bit packed loads and stores

template <class ElementType>
struct alignas(16) Packed128 {
    Packed128() = default;
    __device__ explicit Packed128(int4 bits) {
        static_assert(sizeof(bits) == sizeof(payload), "Size mismatch.");
        memcpy(&payload, &bits, sizeof(bits));
    }
    __device__ static Packed128 constant(ElementType value) {
        Packed128 result;
        for (int k = 0; k < size; ++k) {
            result.payload[k] = value;
        }
        return result;
    }
    __device__ static Packed128 zeros() { return constant(0.f); }
    __device__ ElementType& operator[](int index) { return payload[index]; }
    __device__ const ElementType& operator[](int index) const { return payload[index]; }
    __device__ int4 get_bits() const {
        int4 bits;
        static_assert(sizeof(bits) == sizeof(payload), "Size mismatch.");
        memcpy(&bits, &payload, sizeof(bits));
        return bits;
    }
    static constexpr const size_t size = sizeof(int4) / sizeof(ElementType);
    ElementType payload[size];
};

typedef Packed128<float> f128;
typedef Packed128<floatX> x128;

template <class ElementType>
__device__ Packed128<ElementType> load128(const ElementType* address) {
    return Packed128<ElementType>{*reinterpret_cast<const int4*>(address)};
}

template <class ElementType>
__device__ Packed128<ElementType> load128cs(const ElementType* address) {
    return Packed128<ElementType>{__ldcs(reinterpret_cast<const int4*>(address))};
}

template <class ElementType>
__device__ void store128(ElementType* target, Packed128<ElementType> value) {
    *reinterpret_cast<int4*>(target) = value.get_bits();
}

template <class ElementType>
__device__ void store128cs(ElementType* target, Packed128<ElementType> value) {
    __stcs(reinterpret_cast<int4*>(target), value.get_bits());
}

// ----------------------------------------------------------------------------
// reductions

__device__ inline float warpReduceSum(float val) {
    for (int offset = 16; offset > 0; offset /= 2) {
        val += __shfl_xor_sync(0xFFFFFFFF, val, offset);
    }
    return val;
}

__device__ inline float warpReduceMax(float val) {
    for (int offset = 16; offset > 0; offset /= 2) {
        val = fmaxf(val, __shfl_xor_sync(0xFFFFFFFF, val, offset));
    }
    return val;
}

__device__ inline float blockReduceSum(float val) {
    __shared__ float shared[WARP_SIZE];
    const int lane = threadIdx.x % WARP_SIZE;
    const int warp = threadIdx.x / WARP_SIZE;
    const int warps = blockDim.x / WARP_SIZE;
    float warp_val = warpReduceSum(val);
    if (lane == 0) { shared[warp] = warp_val; }
    __syncthreads();
    warp_val = (lane < warps) ? shared[lane] : 0.0f;
    float block_val = warpReduceSum(warp_val);
    __syncthreads();
    return block_val;
}

__device__ inline float lerp(float start, float end, float weight) {
    return fma(weight, end, fma(-weight, start, start));
}

// ----------------------------------------------------------------------------
// 1. encoder

__global__ void encoder_forward_kernel(floatX* out, const int* inp, const floatX* wte,
                                       const floatX* wpe, int B, int T, int C) {
    int idx = (blockIdx.x * blockDim.x + threadIdx.x) * x128::size;
    int N = B * T * C;
    if (idx >= N) { return; }
    int bt = idx / C;
    int b = bt / T;
    int t = bt % T;
    int c = idx % C;
    int ix = inp[b * T + t];
    x128 packed_out;
    x128 wte128 = load128cs(wte + ix * C + c);
    x128 wpe128 = load128cs(wpe + t * C + c);
    for (int k = 0; k < x128::size; k++) {
        packed_out[k] = (floatX)((float)wte128[k] + (float)wpe128[k]);
    }
    store128(out + b * T * C + t * C + c, packed_out);
}

__global__ void encoder_backward_kernel(float* dwte, float* dwpe, const floatX* dout,
                                        const int* inp, int B, int T, int C) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int N = B * T * C;
    if (idx >= N) { return; }
    int bt = idx / C;
    int b = bt / T;
    int t = bt % T;
    int c = idx % C;
    int ix = inp[b * T + t];
    float d = (float)dout[b * T * C + t * C + c];
    atomicAdd(dwte + ix * C + c, d);
    atomicAdd(dwpe + t * C + c, d);
}

// ----------------------------------------------------------------------------
// 2. layernorm

__global__ void layernorm_forward_kernel(floatX* __restrict__ out, float* __restrict__ mean,
                                         float* __restrict__ rstd, const floatX* __restrict__ inp,
                                         const floatX* __restrict__ weight,
                                         const floatX* __restrict__ bias, int N, int C) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    int idx = blockIdx.x * warp.meta_group_size() + warp.meta_group_rank();
    if (idx >= N) { return; }
    const floatX* x = inp + idx * C;
    float sum = 0.0f;
    for (int i = warp.thread_rank(); i < C; i += warp.size()) {
        sum += (float)x[i];
    }
    sum = cg::reduce(warp, sum, cg::plus<float>{});
    float m = sum / C;
    if (warp.thread_rank() == 0 && mean != nullptr) {
        __stcs(mean + idx, m);
    }
    sum = 0.0f;
    for (int i = warp.thread_rank(); i < C; i += warp.size()) {
        float diff = (float)x[i] - m;
        sum += diff * diff;
    }
    sum = cg::reduce(warp, sum, cg::plus<float>{});
    float s = rsqrtf(sum / C + 1e-5f);
    if (warp.thread_rank() == 0 && rstd != nullptr) {
        __stcs(rstd + idx, s);
    }
    floatX* o = out + idx * C;
    for (int c = warp.thread_rank(); c < C; c += warp.size()) {
        float n = s * ((float)__ldcs(x + c) - m);
        __stcs(o + c, (floatX)(n * (float)weight[c] + (float)bias[c]));
    }
}

__global__ void fused_residual_forward_kernel(floatX* residual, floatX* normed, float* mean,
                                              float* rstd, const floatX* inp1,
                                              const floatX* inp2, const floatX* weight,
                                              const floatX* bias, int N, int C) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    int idx = blockIdx.x * warp.meta_group_size() + warp.meta_group_rank();
    if (idx >= N) { return; }
    residual += C * idx;
    normed += C * idx;
    inp1 += C * idx;
    inp2 += C * idx;
    float sum = 0.0f;
    for (int c = warp.thread_rank() * x128::size; c < C; c += warp.size() * x128::size) {
        const x128 in1 = load128cs(inp1 + c);
        const x128 in2 = load128cs(inp2 + c);
        x128 out;
        for (int k = 0; k < x128::size; ++k) {
            out[k] = (float)in1[k] + (float)in2[k];
            sum += (float)out[k];
        }
        store128(residual + c, out);
    }
    sum = cg::reduce(warp, sum, cg::plus<float>{});
    float m = sum / C;
    float v = 0.f;
    for (int c = warp.thread_rank() * x128::size; c < C; c += warp.size() * x128::size) {
        const x128 res = load128(residual + c);
        for (int k = 0; k < x128::size; ++k) {
            v += ((float)res[k] - m) * ((float)res[k] - m);
        }
    }
    v = cg::reduce(warp, v, cg::plus<float>{}) / C;
    float s = rsqrtf(v + 1e-5f);
    for (int c = warp.thread_rank() * x128::size; c < C; c += warp.size() * x128::size) {
        const x128 res = load128cs(residual + c);
        const x128 w = load128(weight + c);
        const x128 b = load128(bias + c);
        x128 out;
        for (int k = 0; k < x128::size; ++k) {
            float n = s * ((float)res[k] - m);
            out[k] = n * (float)w[k] + (float)b[k];
        }
        store128cs(normed + c, out);
    }
    if (warp.thread_rank() == 0) {
        mean[idx] = m;
        rstd[idx] = s;
    }
}

__global__ void layernorm_backward_kernel(floatX* dinp, floatX* dweight, floatX* dbias,
                                          float* scratch, const floatX* dout, const floatX* inp,
                                          const floatX* weight, const float* mean,
                                          const float* rstd, int B, int T, int C) {
    extern __shared__ float shared[];
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    int base_idx = blockIdx.x * warp.meta_group_size() + warp.meta_group_rank();
    float* dbias_shared = shared;
    float* dweight_shared = shared + C;
    for (int i = threadIdx.x; i < C; i += blockDim.x) {
        dbias_shared[i] = 0.0f;
        dweight_shared[i] = 0.0f;
    }
    __syncthreads();
    for (int idx = base_idx; idx < B * T; idx += gridDim.x * warp.meta_group_size()) {
        const floatX* dout_bt = dout + idx * C;
        const floatX* inp_bt = inp + idx * C;
        floatX* dinp_bt = dinp + idx * C;
        const float mean_bt = mean[idx];
        const float rstd_bt = rstd[idx];
        float dnorm_mean = 0.0f;
        float dnorm_norm_mean = 0.0f;
        for (int i = warp.thread_rank(); i < C; i += warp.size()) {
            float norm_bti = ((float)inp_bt[i] - mean_bt) * rstd_bt;
            float dnorm_i = (float)weight[i] * (float)dout_bt[i];
            dnorm_mean += dnorm_i;
            dnorm_norm_mean += dnorm_i * norm_bti;
        }
        dnorm_mean = cg::reduce(warp, dnorm_mean, cg::plus<float>{}) / C;
        dnorm_norm_mean = cg::reduce(warp, dnorm_norm_mean, cg::plus<float>{}) / C;
        for (int i = warp.thread_rank(); i < C; i += warp.size()) {
            float norm_bti = ((float)inp_bt[i] - mean_bt) * rstd_bt;
            float dnorm_i = (float)weight[i] * (float)dout_bt[i];
            atomicAdd(&dbias_shared[i], (float)dout_bt[i]);
            atomicAdd(&dweight_shared[i], norm_bti * (float)dout_bt[i]);
            float dval = dnorm_i - dnorm_mean - norm_bti * dnorm_norm_mean;
            dinp_bt[i] = (floatX)((float)dinp_bt[i] + dval * rstd_bt);
        }
    }
    __syncthreads();
    float* scratch_dbias = scratch;
    float* scratch_dweight = scratch + C;
    for (int i = threadIdx.x; i < C; i += blockDim.x) {
        atomicAdd(&scratch_dbias[i], dbias_shared[i]);
        atomicAdd(&scratch_dweight[i], dweight_shared[i]);
    }
    (void)dweight;
    (void)dbias;
}

// ----------------------------------------------------------------------------
// 3. matmul helpers

__global__ void matmul_backward_bias_kernel(floatX* dbias, const floatX* dout, int B, int T,
                                            int OC) {
    extern __shared__ float smem[];
    const int o = blockIdx.x;
    const int tid = threadIdx.x;
    const floatX* x = dout + o;
    float sum = 0.0f;
    for (int i = tid; i < B * T; i += blockDim.x) {
        sum += (float)x[i * OC];
    }
    smem[tid] = sum;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride >= 1; stride /= 2) {
        __syncthreads();
        if (tid < stride) { smem[tid] += smem[tid + stride]; }
    }
    if (tid == 0) { dbias[o] = (floatX)((float)dbias[o] + smem[0]); }
}

__global__ void add_bias_kernel(floatX* out, const floatX* bias, int N, int OC) {
    int idx = (blockIdx.x * blockDim.x + threadIdx.x) * x128::size;
    if (idx >= N * OC) { return; }
    x128 packed_out = load128(out + idx);
    x128 packed_bias = load128(bias + idx % OC);
    for (int k = 0; k < x128::size; k++) {
        packed_out[k] = (floatX)((float)packed_out[k] + (float)packed_bias[k]);
    }
    store128(out + idx, packed_out);
}

// ----------------------------------------------------------------------------
// 4. attention pieces

__global__ void permute_kernel(floatX* q, floatX* k, floatX* v, const floatX* inp, int B, int N,
                               int NH, int d) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * NH * N * d) { return; }
    int b = idx / (NH * N * d);
    int rest = idx % (NH * N * d);
    int nh_ = rest / (N * d);
    rest = rest % (N * d);
    int n = rest / d;
    int d_ = rest % d;
    int inp_idx = (b * N * 3 * NH * d) + (n * 3 * NH * d) + (0 * NH * d) + (nh_ * d) + d_;
    q[idx] = __ldcs(&inp[inp_idx]);
    k[idx] = __ldcs(&inp[inp_idx + NH * d]);
    v[idx] = __ldcs(&inp[inp_idx + 2 * (NH * d)]);
}

__global__ void permute_backward_kernel(floatX* dinp, const floatX* dq, const floatX* dk,
                                        const floatX* dv, int B, int N, int NH, int d) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * NH * N * d) { return; }
    int b = idx / (NH * N * d);
    int rest = idx % (NH * N * d);
    int nh_ = rest / (N * d);
    rest = rest % (N * d);
    int n = rest / d;
    int d_ = rest % d;
    int inp_idx = (b * N * 3 * NH * d) + (n * 3 * NH * d) + (0 * NH * d) + (nh_ * d) + d_;
    dinp[inp_idx] = dq[idx];
    dinp[inp_idx + NH * d] = dk[idx];
    dinp[inp_idx + 2 * (NH * d)] = dv[idx];
}

__global__ void unpermute_kernel(floatX* inp, floatX* out, int B, int N, int NH, int d) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * NH * N * d) { return; }
    int b = idx / (NH * N * d);
    int rest = idx % (NH * N * d);
    int nh_ = rest / (N * d);
    rest = rest % (N * d);
    int n = rest / d;
    int d_ = rest % d;
    int other_idx = (b * NH * N * d) + (n * NH * d) + (nh_ * d) + d_;
    out[other_idx] = __ldcs(&inp[idx]);
}

__global__ void unpermute_backward_kernel(floatX* dinp, const floatX* dout, int B, int N, int NH,
                                          int d) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * NH * N * d) { return; }
    int b = idx / (NH * N * d);
    int rest = idx % (NH * N * d);
    int nh_ = rest / (N * d);
    rest = rest % (N * d);
    int n = rest / d;
    int d_ = rest % d;
    int other_idx = (b * NH * N * d) + (n * NH * d) + (nh_ * d) + d_;
    dinp[idx] = dout[other_idx];
}

__global__ void softmax_forward_kernel(floatX* out, float inv_temperature, const floatX* inp,
                                       int N, int T) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    int idx = (gridDim.x - blockIdx.x - 1) * warp.meta_group_size() + warp.meta_group_rank();
    if (idx >= N * T) { return; }
    int own_pos = idx % T;
    const floatX* x = inp + idx * T;
    float maxval = -INFINITY;
    float sumval = 0.0f;
    for (int i = warp.thread_rank(); i <= own_pos; i += warp.size()) {
        float old_maxval = maxval;
        float xi = (float)x[i];
        maxval = fmaxf(maxval, xi);
        sumval *= expf(inv_temperature * (old_maxval - maxval));
        sumval += expf(inv_temperature * (xi - maxval));
    }
    float global_maxval = cg::reduce(warp, maxval, cg::greater<float>{});
    sumval *= expf(inv_temperature * (maxval - global_maxval));
    float sum = cg::reduce(warp, sumval, cg::plus<float>{});
    float norm = 1.f / sum;
    for (int i = warp.thread_rank(); i <= own_pos; i += warp.size()) {
        float ev = expf(inv_temperature * ((float)__ldcs(x + i) - global_maxval));
        __stcs(out + idx * T + i, (floatX)(ev * norm));
    }
}

__global__ void softmax_autoregressive_backward_kernel(floatX* dpreatt, const floatX* datt,
                                                       const floatX* att, int B, int T, int C,
                                                       float scale) {
    constexpr int BlockSize = 256;
    constexpr int T_per_block = 4;
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    __shared__ float block_acc[32];
    int idx = blockIdx.y;
    int t0 = T - 1 - T_per_block * blockIdx.x;
    att += idx * T * T;
    datt += idx * T * T;
    dpreatt += idx * T * T;
    if (warp.meta_group_rank() == 0) { block_acc[warp.thread_rank()] = 0; }
    for (int to = 0; to < T_per_block; ++to) {
        int t = t0 - to;
        if (t < 0) { return; }
        const floatX* att_bth = att + t * T;
        const floatX* datt_bth = datt + t * T;
        floatX* dpreatt_bth = dpreatt + t * T;
        float local_sum = 0;
        for (int t2 = block.thread_rank(); t2 <= t; t2 += BlockSize) {
            local_sum += (float)att_bth[t2] * (float)datt_bth[t2];
        }
        block_acc[warp.meta_group_rank()] = cg::reduce(warp, local_sum, cg::plus<float>{});
        block.sync();
        local_sum = cg::reduce(warp, block_acc[warp.thread_rank()], cg::plus<float>{});
        for (int t3 = block.thread_rank(); t3 <= t; t3 += BlockSize) {
            float acc = (float)__ldcs(att_bth + t3) * ((float)__ldcs(datt_bth + t3) - local_sum);
            __stcs(dpreatt_bth + t3, (floatX)(scale * acc));
        }
    }
    (void)B;
    (void)C;
}

__global__ void attention_query_key_kernel(floatX* preatt, const floatX* inp, int B, int T,
                                           int C, int NH) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int total_threads = B * NH * T * T;
    if (idx >= total_threads) { return; }
    int t2 = idx % T;
    int t = (idx / T) % T;
    int h = (idx / (T * T)) % NH;
    int b = idx / (NH * T * T);
    int C3 = C * 3;
    int hs = C / NH;
    const floatX* query_t = inp + b * T * C3 + t * C3 + h * hs;
    const floatX* key_t2 = inp + b * T * C3 + t2 * C3 + h * hs + C;
    float val = 0.0f;
    for (int i = 0; i < hs; i++) {
        val += (float)query_t[i] * (float)key_t2[i];
    }
    preatt[idx] = (floatX)(t2 > t ? -INFINITY : val * (1.0f / sqrtf(hs)));
}

__global__ void scale_kernel(floatX* inp, float scale, int B, int NH, int T) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * NH * T * T) { return; }
    int rest = idx % (NH * T * T);
    rest = rest % (T * T);
    int t2 = rest / T;
    int t = rest % T;
    inp[idx] = t > t2 ? (floatX)0.0f : (floatX)((float)inp[idx] * scale);
}

// ----------------------------------------------------------------------------
// 5. gelu and residual

__global__ void gelu_forward_kernel(floatX* out, const floatX* inp, int N) {
    int i = (blockIdx.x * blockDim.x + threadIdx.x) * x128::size;
    if (i >= N) { return; }
    x128 packed_out;
    x128 packed_inp = load128cs(inp + i);
    for (int k = 0; k < x128::size; ++k) {
        float xi = (float)packed_inp[k];
        float cube = 0.044715f * xi * xi * xi;
        packed_out[k] = (floatX)(0.5f * xi * (1.0f + tanhf(GELU_SCALING_FACTOR * (xi + cube))));
    }
    store128(out + i, packed_out);
}

__global__ void gelu_backward_kernel(floatX* dinp, const floatX* inp, const floatX* dout, int N) {
    int i = (blockIdx.x * blockDim.x + threadIdx.x) * x128::size;
    if (i >= N) { return; }
    x128 packed_dinp;
    x128 packed_inp = load128cs(inp + i);
    x128 packed_dout = load128cs(dout + i);
    for (int k = 0; k < x128::size; ++k) {
        float x = (float)packed_inp[k];
        float cube = 0.044715f * x * x * x;
        float tanh_arg = GELU_SCALING_FACTOR * (x + cube);
        float tanh_out = tanhf(tanh_arg);
        float coshf_out = coshf(tanh_arg);
        float sech_out = 1.0f / (coshf_out * coshf_out);
        float local_grad = 0.5f * (1.0f + tanh_out) +
                           x * 0.5f * sech_out * GELU_SCALING_FACTOR * (1.0f + 3.0f * 0.044715f * x * x);
        packed_dinp[k] = (floatX)(local_grad * (float)packed_dout[k]);
    }
    store128(dinp + i, packed_dinp);
}

__global__ void residual_forward_kernel(floatX* out, const floatX* inp1, const floatX* inp2,
                                        int N) {
    int idx = (blockIdx.x * blockDim.x + threadIdx.x) * x128::size;
    if (idx >= N) { return; }
    x128 packed_out;
    x128 packed_inp1 = load128cs(inp1 + idx);
    x128 packed_inp2 = load128cs(inp2 + idx);
    for (int k = 0; k < x128::size; k++) {
        packed_out[k] = (floatX)((float)packed_inp1[k] + (float)packed_inp2[k]);
    }
    store128(out + idx, packed_out);
}

// ----------------------------------------------------------------------------
// 6. loss, optimizer, utilities

__global__ void fused_classifier_kernel(floatX* logits, float* losses, const floatX* dlosses,
                                        const int* targets, int B, int T, int V, int P) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    int idx = blockIdx.x;
    int ix = targets[idx];
    const floatX* x = logits + idx * P;
    float maxval = -INFINITY;
    float sumval = 0.0f;
    for (int i = threadIdx.x; i < V; i += blockDim.x) {
        float v = (float)x[i];
        float old = maxval;
        maxval = fmaxf(maxval, v);
        sumval *= expf(old - maxval);
        sumval += expf(v - maxval);
    }
    float offset = cg::reduce(warp, maxval, cg::greater<float>{});
    sumval *= expf(maxval - offset);
    float scale = 1.0f / blockReduceSum(sumval);
    if (threadIdx.x == 0) {
        float prob = expf((float)x[ix] - offset) * scale;
        losses[idx] = -logf(prob);
    }
    float dloss = dlosses != nullptr ? (float)dlosses[idx] : 1.0f / (B * T);
    for (int i = threadIdx.x; i < V; i += blockDim.x) {
        float prob = expf((float)x[i] - offset) * scale;
        float indicator = i == ix ? 1.0f : 0.0f;
        logits[idx * P + i] = (floatX)((prob - indicator) * dloss);
    }
}

__global__ void adamw_kernel(floatX* params_memory, float* master_params, float* grads_memory,
                             float* m_memory, float* v_memory, size_t num_parameters,
                             float learning_rate, float beta1, float beta2,
                             float beta1_correction, float beta2_correction, float eps,
                             float weight_decay) {
    size_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= num_parameters) { return; }
    float grad = grads_memory[i];
    float m = m_memory[i];
    float v = v_memory[i];
    m = lerp(grad, m, beta1);
    m_memory[i] = m;
    v = lerp(grad * grad, v, beta2);
    v_memory[i] = v;
    m /= beta1_correction;
    v /= beta2_correction;
    float old_param = master_params != nullptr ? master_params[i] : (float)params_memory[i];
    float param = old_param - (learning_rate * (m / (sqrtf(v) + eps) + weight_decay * old_param));
    params_memory[i] = (floatX)param;
    if (master_params != nullptr) { master_params[i] = param; }
}

__global__ void global_norm_squared_kernel(float* out, const floatX* data, size_t count) {
    size_t index = blockIdx.x * blockDim.x + threadIdx.x;
    size_t grid_width = blockDim.x * gridDim.x;
    float accumulator = 0.f;
    for (size_t i = index; i < count; i += grid_width) {
        accumulator += (float)data[i] * (float)data[i];
    }
    float block_sum = blockReduceSum(accumulator);
    if (threadIdx.x == 0) { atomicAdd(out, block_sum); }
}

__global__ void copy_and_cast_kernel(floatX* dst, const float* src, size_t n) {
    size_t idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n) { dst[idx] = __float2bfloat16(src[idx]); }
}

__global__ void half_to_bf16_kernel(floatX* dst, const __half* src, size_t n) {
    size_t idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n) { dst[idx] = __float2bfloat16(__half2float(src[idx])); }
}

__global__ void cast_and_add_kernel(float* dst, const floatX* src, size_t n) {
    size_t idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n) { dst[idx] += __bfloat162float(src[idx]); }
}

// ----------------------------------------------------------------------------
// host launchers

void encoder_forward(floatX* out, const int* inp, const floatX* wte, const floatX* wpe, int B,
                     int T, int C, cudaStream_t stream) {
    const int block_size = 256;
    const int N = B * T * C;
    const int grid_size = CEIL_DIV(N, (int)(block_size * x128::size));
    encoder_forward_kernel<<<grid_size, block_size, 0, stream>>>(out, inp, wte, wpe, B, T, C);
}

void encoder_backward(float* dwte, float* dwpe, const floatX* dout, const int* inp, int B, int T,
                      int C, cudaStream_t stream) {
    const int block_size = 256;
    const int N = B * T * C;
    encoder_backward_kernel<<<CEIL_DIV(N, block_size), block_size, 0, stream>>>(dwte, dwpe, dout,
                                                                                inp, B, T, C);
}

void layernorm_forward(floatX* out, float* mean, float* rstd, const floatX* inp,
                       const floatX* weight, const floatX* bias, int B, int T, int C,
                       cudaStream_t stream) {
    const int block_size = 256;
    const int N = B * T;
    const int grid_size = CEIL_DIV(N * WARP_SIZE, block_size);
    layernorm_forward_kernel<<<grid_size, block_size, 0, stream>>>(out, mean, rstd, inp, weight,
                                                                   bias, N, C);
}

void fused_residual_forward(floatX* residual, floatX* normed, float* mean, float* rstd,
                            const floatX* inp1, const floatX* inp2, const floatX* weight,
                            const floatX* bias, int N, int C, cudaStream_t stream) {
    const int block_size = 256;
    const int grid_size = CEIL_DIV(N * WARP_SIZE, block_size);
    fused_residual_forward_kernel<<<grid_size, block_size, 0, stream>>>(
        residual, normed, mean, rstd, inp1, inp2, weight, bias, N, C);
}

void layernorm_backward(floatX* dinp, floatX* dweight, floatX* dbias, float* scratch,
                        const floatX* dout, const floatX* inp, const floatX* weight,
                        const float* mean, const float* rstd, int B, int T, int C,
                        cudaStream_t stream) {
    const int block_size = 512;
    const int grid_size = 2 * 132;
    size_t shared_mem_size = 2 * C * sizeof(float);
    cudaMemsetAsync(scratch, 0, 2 * C * sizeof(float), stream);
    layernorm_backward_kernel<<<grid_size, block_size, shared_mem_size, stream>>>(
        dinp, dweight, dbias, scratch, dout, inp, weight, mean, rstd, B, T, C);
}

void attention_permute(floatX* q, floatX* k, floatX* v, const floatX* inp, int B, int T, int NH,
                       int HS, cudaStream_t stream) {
    const int block_size = 256;
    int total_threads = B * NH * T * HS;
    permute_kernel<<<CEIL_DIV(total_threads, block_size), block_size, 0, stream>>>(q, k, v, inp,
                                                                                   B, T, NH, HS);
}

void attention_softmax(floatX* att, const floatX* preatt, int B, int T, int NH, int HS,
                       cudaStream_t stream) {
    const int softmax_block_size = 256;
    int grid_size = CEIL_DIV(B * NH * T * WARP_SIZE, softmax_block_size);
    float scale = 1.f / sqrtf(HS);
    softmax_forward_kernel<<<grid_size, softmax_block_size, 0, stream>>>(att, scale, preatt,
                                                                         B * NH, T);
}

void gelu_forward(floatX* out, const floatX* inp, int N, cudaStream_t stream) {
    const int block_size = 512;
    const int grid_size = CEIL_DIV(N, (int)(block_size * x128::size));
    gelu_forward_kernel<<<grid_size, block_size, 0, stream>>>(out, inp, N);
}

void gelu_backward(floatX* dinp, const floatX* inp, const floatX* dout, int N,
                   cudaStream_t stream) {
    const int block_size = 128;
    const int grid_size = CEIL_DIV(N, (int)(block_size * x128::size));
    gelu_backward_kernel<<<grid_size, block_size, 0, stream>>>(dinp, inp, dout, N);
}

void residual_forward(floatX* out, const floatX* inp1, const floatX* inp2, int N,
                      cudaStream_t stream) {
    const int block_size = 256;
    const int grid_size = CEIL_DIV(N, (int)(block_size * x128::size));
    residual_forward_kernel<<<grid_size, block_size, 0, stream>>>(out, inp1, inp2, N);
}

void fused_classifier(floatX* logits, float* losses, const floatX* dlosses, const int* targets,
                      int B, int T, int V, int P, cudaStream_t stream) {
    const int block_size = 1024;
    fused_classifier_kernel<<<B * T, block_size, 0, stream>>>(logits, losses, dlosses, targets,
                                                              B, T, V, P);
}

void adamw_update(floatX* params, float* master, float* grads, float* m, float* v, size_t n,
                  float lr, float beta1, float beta2, int t, float eps, float wd,
                  cudaStream_t stream) {
    const int block_size = 512;
    float beta1_correction = 1.0f - powf(beta1, t);
    float beta2_correction = 1.0f - powf(beta2, t);
    adamw_kernel<<<CEIL_DIV(n, block_size), block_size, 0, stream>>>(
        params, master, grads, m, v, n, lr, beta1, beta2, beta1_correction, beta2_correction, eps,
        wd);
}

float global_norm_squared(float* out, const floatX* values, size_t count, cudaStream_t stream) {
    const int block_size = 512;
    const int grid_size = 2 * 132;
    cudaMemsetAsync(out, 0, sizeof(float), stream);
    global_norm_squared_kernel<<<grid_size, block_size, 0, stream>>>(out, values, count);
    float result = 0.f;
    cudaMemcpyAsync(&result, out, sizeof(float), cudaMemcpyDeviceToHost, stream);
    cudaStreamSynchronize(stream);
    return result;
}
