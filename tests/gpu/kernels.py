"""CUDA sources for the evaluator's GPU tests and benchmarks: an oracle and planted candidates.

`TWICE` is the original kernel (y = 2x, computed slowly by a converging loop); each entry of
`PLANTED` replaces it with a candidate that breaks one evaluation rule, and the status the
evaluator must give it.
"""

from __future__ import annotations

TWICE = """
/* @cuda-llm
sizes.n = [1, 1000, 4097, 4194304]
grid = "cdiv(n, 256)"
block = 256
args.x = "float32[n]"
args.y = "out float32[n]"
args.n = "n"
*/
extern "C" __global__ void twice(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i], acc = 0.0f;
        for (int k = 0; k < 512; ++k) acc = fmaf(acc, 0.5f, v);  // converges to 2v
        y[i] = acc;
    }
}
"""

HEAD = 'extern "C" __global__ void twice(const float* x, float* y, int n) {\n'
INDEX = "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"

FAST = HEAD + INDEX + "    if (i < n) y[i] = 2.0f * x[i];\n}\n"

# Launch counting done right: the last block to finish a launch (all others have read the
# counters by then) updates them, so every block of one launch sees the same values.
COUNTERS = "__device__ unsigned int launches_done;\n__device__ unsigned int blocks_done;\n"
LAST_BLOCK = """    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        if (atomicAdd(&blocks_done, 1u) == gridDim.x - 1) {
            /* last block */
            launches_done += 1;
            blocks_done = 0;
            __threadfence();
        }
    }
}
"""
# the last 16 output pointers a caching candidate has seen (read by every block at its start,
# written by a launch's last block; the oldest makes room: the correctness runs alone may pass
# 16 buffers, and a table that stopped filling would leave the timed ones honest)
SEEN_OUT = """__device__ float* seen_out[16];
__device__ unsigned int seen_next;
__device__ int seen_slot(const float* y) {
    for (int s = 0; s < 16; ++s)
        if (((float* volatile*)seen_out)[s] == y) return s;
    return -1;
}
__device__ void remember(float* y) {
    if (seen_slot(y) < 0) seen_out[seen_next++ % 16] = y;
}
"""
CHILD = (
    "__global__ void child(const float* x, float* y, int n) {\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) y[i] = 2.0f * x[i];\n}\n"
)

PLANTED: dict[str, tuple[str, tuple[str, ...]]] = {
    "does_nothing": (HEAD + "}\n", ("unwritten_output",)),
    "skips_last_element": (
        HEAD + INDEX + "    if (i < n - 1) y[i] = 2.0f * x[i];\n}\n",
        ("unwritten_output",),
    ),
    "writes_past_the_end": (
        HEAD + INDEX + "    if (i <= n) y[i] = 2.0f * x[i < n ? i : 0];\n}\n",
        ("out_of_bounds",),
    ),
    "races_on_shared_memory": (
        HEAD
        + """    __shared__ float tile[256];
    int t = threadIdx.x, base = blockIdx.x * blockDim.x, i = base + t;
    if ((t >> 5) == 7) { long long s = clock64(); while (clock64() - s < 20000) { } }
    tile[t] = (i < n) ? 2.0f * x[i] : 0.0f;
    /* missing __syncthreads(): warp 0 reads what warp 7 has not written yet */
    int j = base + 255 - t;
    if (j < n) y[j] = tile[255 - t];
}
""",
        ("nondeterministic", "wrong_output"),
    ),
    "caches_across_launches": (
        """__device__ unsigned int launches_seen;
__device__ float cached[4194304];
"""
        + HEAD
        + INDEX
        + """    unsigned int seen = *((volatile unsigned int*)&launches_seen);
    if (i < n) {
        if (seen >= 24 && n <= 4194304) {
            y[i] = cached[i];
        } else {
            float v = 2.0f * x[i];
            y[i] = v;
            if (n <= 4194304) cached[i] = v;
        }
    }
    if (i == 0) atomicAdd(&launches_seen, 1u);
}
""",
        ("stale_after_timing",),
    ),
    # caches the timing loop used to reward: they stay correct on fresh buffers, so only the
    # checks on the very buffers the candidate was timed on can catch them. They remember the last
    # 16 output pointers they have seen, so the judge's rotation over copies of the
    # buffers (`Plan.placements`) does not shake them off
    "skips_work_for_the_same_output_pointer": (
        COUNTERS
        + SEEN_OUT
        + HEAD
        + INDEX
        + "    int slot = seen_slot(y);\n"
        + "    bool cached = *(volatile unsigned int*)&launches_done >= 24 && slot >= 0;\n"
        + "    if (!cached && i < n) y[i] = 2.0f * x[i];\n"
        + LAST_BLOCK.replace("/* last block */", "remember(y);"),
        ("stale_after_timing",),
    ),
    "replays_its_result_for_the_same_output_pointer": (
        COUNTERS
        + SEEN_OUT
        + "__device__ float saved[16][4194304];\n"
        + HEAD
        + INDEX
        + "    int slot = n <= 4194304 ? seen_slot(y) : -1;\n"
        + "    bool cached = *(volatile unsigned int*)&launches_done >= 24 && slot >= 0;\n"
        + "    if (i < n) {\n"
        + "        if (cached) y[i] = saved[slot][i];\n"
        + "        else { float v = 2.0f * x[i]; y[i] = v; if (slot >= 0) saved[slot][i] = v; }\n"
        + "    }\n"
        + LAST_BLOCK.replace("/* last block */", "remember(y);"),
        ("stale_after_timing",),
    ),
    "computes_only_on_its_first_launches": (
        COUNTERS
        + HEAD
        + INDEX
        + "    if (*(volatile unsigned int*)&launches_done < 24 && i < n) y[i] = 2.0f * x[i];\n"
        + LAST_BLOCK.replace("/* last block */", ""),
        ("stale_after_timing",),
    ),
    # dynamic parallelism needs -rdc and cudadevrt, which candidates never get
    "launches_a_child_kernel": (
        CHILD + HEAD + "    if (blockIdx.x == 0 && threadIdx.x == 0) "
        "child<<<(n + 255) / 256, 256>>>(x, y, n);\n}\n",
        ("compile_error",),
    ),
    "declares_the_device_launch_api_itself": (
        CHILD
        + "struct CUstream_st;\n"
        + 'extern "C" __device__ int cudaLaunchDevice(void* f, void* p, dim3 g, dim3 b,\n'
        + "                                           unsigned int smem, CUstream_st* s);\n"
        + HEAD
        + "    if (threadIdx.x == 0) cudaLaunchDevice((void*)child, 0, dim3(1), dim3(1), 0, 0);\n"
        + "}\n",
        ("compile_error",),
    ),
    "creates_a_device_side_stream": (
        HEAD
        + "    cudaStream_t s;\n    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);\n}\n",
        ("compile_error",),
    ),
    "modifies_its_input": (
        HEAD + INDEX + "    if (i < n) { y[i] = 2.0f * x[i]; ((float*)x)[i] = 0.0f; }\n}\n",
        ("input_modified",),
    ),
    "loses_precision": (  # keeps half's 10-bit mantissa
        HEAD
        + INDEX
        + "    if (i < n) y[i] = __int_as_float(__float_as_int(2.0f * x[i]) & 0xFFFFE000);\n}\n",
        ("wrong_output",),
    ),
    "hangs": (  # spins on a flag nothing ever sets (a plain `while (1)` may be optimised away)
        "__device__ volatile int never_set;\n"
        + HEAD
        + INDEX
        + "    if (i == 0) { while (never_set == 0) { } }\n"
        + "    if (i < n) y[i] = 2.0f * x[i];\n}\n",
        ("timeout",),
    ),
    "illegal_address": (
        HEAD + INDEX + "    if (i < n) y[i] = *((const float*)0x10 + i);\n}\n",
        ("fault",),
    ),
    "traps": (
        HEAD + INDEX + "    if (i == 0) __trap();\n    if (i < n) y[i] = 2.0f * x[i];\n}\n",
        ("fault",),
    ),
    "changes_its_signature": (
        FAST.replace("int n)", "long n)"),
        ("signature_mismatch",),
    ),
    "launch_bounds_too_small": (
        FAST.replace(
            'extern "C" __global__ void', 'extern "C" __global__ void __launch_bounds__(128)'
        ),
        ("launch_error",),
    ),
    "does_not_compile": (
        FAST.replace("2.0f * x[i]", "2.0f * x[i] + undefined_symbol"),
        ("compile_error",),
    ),
}

# Reads far past its input: invisible to the output checks, found by memcheck.
READS_OUT_OF_BOUNDS = (
    HEAD + INDEX + "    if (i < n) y[i] = 2.0f * x[i] + 0.0f * x[i + n + 70000];\n}\n"
)

# A kernel needing more than 48 KiB of dynamic shared memory (the opt-in path).
STAGED = """
/* @cuda-llm
sizes.n = [1000, 65536]
grid = "cdiv(n, 256)"
block = 256
smem = "200 * 1024"
args.x = "float32[n]"
args.y = "out float32[n]"
args.n = "n"
*/
extern "C" __global__ void staged(const float* x, float* y, int n) {
    extern __shared__ float buf[];
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    buf[t + 50000] = (i < n) ? x[i] : 0.0f;
    __syncthreads();
    if (i < n) y[i] = 2.0f * buf[t + 50000];
}
"""

STAGED_HEAD = 'extern "C" __global__ void staged(const float* x, float* y, int n) {\n'

# 32 KiB of static shared memory on top of the 200 KiB dynamic: over the 227 KiB per block.
TOO_MUCH_SHARED = (
    STAGED_HEAD
    + """    extern __shared__ float buf[];
    __shared__ float extra[8192];
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    buf[t + 50000] = (i < n) ? x[i] : 0.0f;
    extra[t] = buf[t + 50000];
    __syncthreads();
    if (i < n) y[i] = 2.0f * extra[t];
}
"""
)

STAGED_OK = (
    STAGED_HEAD
    + """    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
"""
)
