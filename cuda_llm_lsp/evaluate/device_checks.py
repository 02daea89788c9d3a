"""The worker's own kernels: inputs made on the GPU, and the checks whose summaries are all that
crosses the pipe (guard bands, inputs unchanged, unwritten outputs, outputs against a kept run).

`SOURCE` is compiled once per worker process with NVRTC (`compile_helpers`, --fmad=false so that
`cl_generate` matches `counter.generate` bit for bit). Each check writes a few 64-bit slots; the
worker reads all slots of a run in one copy and turns them into `compare`'s summaries. The CPU
driver double (tests/unit/fake_cuda_driver.py) has numpy kernels of the same names and slots.

Slots of `cl_check_output` (`slot_init`): unwritten count, first, last (elements of `got`
holding the poison that are not poison in `expected`; with no `expected`, every poisoned
element), then values outside tolerance: count, first, largest finite |got - expected| (the bits
of a non-negative double), whether any difference is finite, and the first index of the largest
difference (`cl_worst`, run only when something is wrong), and the buffer's scale (`cl_scale`:
the largest finite |expected|, the bits of a non-negative double, written before
`cl_check_output` runs, which reads it for the scale-aware floor `compare.within_tolerance`
describes; its factor `scale_tol` 0 turns the floor off), and the buffer's magnitude
(`cl_magnitude`, after `cl_scale`: the sum of floor(|expected| / scale x 2^32) over finite
elements, an integer whatever the order of the atomics; `compare.typical_magnitude` makes the
mean |expected| of it, which scales a type's default `atol` when `atol_relative` is 1).
`cl_check_bytes` (guard bands):
changed count, first, last. `cl_check_changed` (inputs): changed count, first.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs

NO_INDEX = (1 << 64) - 1  # a "first" slot nothing was found for
BLOCK = 256
MAX_BLOCKS = 8192  # grid-stride loops beyond this


def slot_init(kind: str) -> list[int]:
    """The slots' starting values: counts 0, firsts NO_INDEX, lasts 0."""
    if kind == "output":
        return [0, NO_INDEX, 0, 0, NO_INDEX, 0, 0, NO_INDEX, 0, 0]
    if kind == "bytes":
        return [0, NO_INDEX, 0]
    return [0, NO_INDEX]


def grid_for(n: int) -> int:
    return max(1, min(-(-n // BLOCK), MAX_BLOCKS))


HELPER_NAMES = ("cl_generate", "cl_check_output", "cl_worst", "cl_check_bytes", "cl_check_changed",
                "cl_scale", "cl_magnitude", "cl_flush")  # fmt: skip
FLUSH_NEVER = 1  # cl_flush's store condition: the XOR of a zeroed buffer is 0, never this

SOURCE = r"""
typedef unsigned long long u64;
typedef long long i64;
#define NO_INDEX 0xFFFFFFFFFFFFFFFFull

__device__ __forceinline__ u64 mix(u64 z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
__device__ __forceinline__ u64 bits_at(u64 key, u64 i, u64 lane) {
    return mix(key ^ ((i * 2ull + lane) * 0xD1B54A32D192ED03ull));
}
__device__ __forceinline__ double unit_at(u64 key, u64 i, u64 lane) {
    return (double)(bits_at(key, i, lane) >> 11) * 1.1102230246251565e-16;  // 2^-53
}

/* numpy's npy_floatbits_to_halfbits: float32 -> float16, round to nearest even */
__device__ unsigned short float_to_half_bits(float value) {
    unsigned int f = __float_as_uint(value);
    unsigned short h_sgn = (unsigned short)((f & 0x80000000u) >> 16);
    unsigned int f_exp = f & 0x7f800000u, f_sig;
    if (f_exp >= 0x47800000u) {
        if (f_exp == 0x7f800000u) {
            f_sig = f & 0x007fffffu;
            if (f_sig != 0) {
                unsigned short ret = (unsigned short)(0x7c00u + (f_sig >> 13));
                if (ret == 0x7c00u) ret++;
                return h_sgn + ret;
            }
            return (unsigned short)(h_sgn + 0x7c00u);
        }
        return (unsigned short)(h_sgn + 0x7c00u);
    }
    if (f_exp <= 0x38000000u) {
        if (f_exp < 0x33000000u) return h_sgn;
        f_exp >>= 23;
        f_sig = 0x00800000u + (f & 0x007fffffu);
        f_sig >>= (113 - f_exp);
        if (((f_sig & 0x00003fffu) != 0x00001000u) || (f & 0x000007ffu)) f_sig += 0x00001000u;
        return (unsigned short)(h_sgn + (unsigned short)(f_sig >> 13));
    }
    unsigned short h_exp = (unsigned short)((f_exp - 0x38000000u) >> 13);
    f_sig = f & 0x007fffffu;
    if ((f_sig & 0x00003fffu) != 0x00001000u) f_sig += 0x00001000u;
    unsigned short h_sig = (unsigned short)(f_sig >> 13);
    h_sig += h_exp;
    return h_sgn + h_sig;
}
__device__ unsigned short float_to_bf16_bits(float value) {
    unsigned int f = __float_as_uint(value);
    if (value != value) return (unsigned short)((f >> 16) | 0x40);
    return (unsigned short)((((u64)f) + 0x7FFFull + ((f >> 16) & 1u)) >> 16);
}
__device__ float half_bits_to_float(unsigned short h) {
    unsigned int s = ((unsigned int)h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) {
        float v = (float)m * 5.9604644775390625e-8f;
        return s ? -v : v;
    }
    if (e == 31) return __uint_as_float(s | 0x7f800000u | (m << 13));
    return __uint_as_float(s | ((e + 112u) << 23) | (m << 13));
}

/* dtype codes: 0 f32 1 f64 2 f16 3 bf16 4 i8 5 u8 6 i32 7 u32 8 i64 (counter.DTYPE_CODES) */
__device__ __forceinline__ int itemsize_of(int dtype) {
    switch (dtype) { case 1: case 8: return 8; case 2: case 3: return 2;
                     case 4: case 5: return 1; default: return 4; }
}
__device__ __forceinline__ u64 load_bits(const void* p, u64 i, int size) {
    switch (size) {
        case 1: return ((const unsigned char*)p)[i];
        case 2: return ((const unsigned short*)p)[i];
        case 4: return ((const unsigned int*)p)[i];
        default: return ((const u64*)p)[i];
    }
}
__device__ __forceinline__ double as_double(u64 b, int dtype) {
    switch (dtype) {
        case 0: return (double)__uint_as_float((unsigned int)b);
        case 1: return __longlong_as_double((i64)b);
        case 2: return (double)half_bits_to_float((unsigned short)b);
        case 3: return (double)__uint_as_float(((unsigned int)b) << 16);
        default: return 0.0;
    }
}
__device__ __forceinline__ void store(void* p, u64 i, int dtype, double v, i64 iv, int is_int) {
    switch (dtype) {
        case 0: ((float*)p)[i] = (float)v; break;
        case 1: ((double*)p)[i] = v; break;
        case 2: ((unsigned short*)p)[i] = float_to_half_bits((float)v); break;
        case 3: ((unsigned short*)p)[i] = float_to_bf16_bits((float)v); break;
        default: {
            i64 x = is_int ? iv : llrint(v);
            switch (dtype) {
                case 4: ((signed char*)p)[i] = (signed char)x; break;
                case 5: ((unsigned char*)p)[i] = (unsigned char)x; break;
                case 6: ((int*)p)[i] = (int)x; break;
                case 7: ((unsigned int*)p)[i] = (unsigned int)x; break;
                default: ((i64*)p)[i] = x; break;
            }
        }
    }
}

/* kinds: 0 uniform(a, b) 1 normal(a, b) 2 randint(lo, lo + span - 1) 3 arange 4 zeros 5 ones */
extern "C" __global__ void cl_generate(void* p, u64 n, int dtype, int kind, double a, double b,
                                       i64 lo, u64 span, u64 key) {
    int is_float = dtype <= 3;
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n;
         i += (u64)gridDim.x * blockDim.x) {
        double v = 0.0;
        i64 iv = 0;
        int exact = 0;
        if (kind == 0) {
            v = a + (b - a) * unit_at(key, i, 0);
        } else if (kind == 1) {
            double u1 = 1.0 - unit_at(key, i, 0), u2 = unit_at(key, i, 1);
            v = a + b * (sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
        } else if (kind == 2) {
            u64 r = bits_at(key, i, 0);
            iv = (i64)((span == 0 ? r : r % span) + (u64)lo);
            v = (double)iv;
            exact = !is_float;
        } else if (kind == 3) {
            iv = (i64)i;
            v = (double)i;
            exact = !is_float;
        } else {
            v = kind == 4 ? 0.0 : 1.0;
        }
        store(p, i, dtype, v, iv, exact);
    }
}

__device__ __forceinline__ void warp_sum(u64* count) {
    for (int o = 16; o; o >>= 1) *count += __shfl_xor_sync(0xffffffffu, *count, o);
}
__device__ __forceinline__ void warp_min(u64* v) {
    for (int o = 16; o; o >>= 1) {
        u64 w = __shfl_xor_sync(0xffffffffu, *v, o);
        *v = w < *v ? w : *v;
    }
}
__device__ __forceinline__ void warp_max(u64* v) {
    for (int o = 16; o; o >>= 1) {
        u64 w = __shfl_xor_sync(0xffffffffu, *v, o);
        *v = w > *v ? w : *v;
    }
}
__device__ __forceinline__ u64 grid_end(u64 n) {  /* every lane of a warp runs the same trips */
    u64 stride = (u64)gridDim.x * blockDim.x;
    return (n + stride - 1) / stride * stride;
}

/* one ulp of dtype at |v| (compare.ulp_at) */
__device__ __forceinline__ double ulp_at(double v, int dtype) {
    int bits = dtype == 1 ? 53 : dtype == 2 ? 11 : dtype == 3 ? 8 : 24;
    double tiny = dtype == 1 ? 2.2250738585072014e-308 : dtype == 2 ? 6.103515625e-05
                                                       : 1.1754943508222875e-38;
    double m = fabs(v);
    int e;
    frexp(m > tiny ? m : tiny, &e);
    return ldexp(1.0, e - bits);
}

/* the largest finite |expected| -> slots[8] (bits of a non-negative double) */
extern "C" __global__ void cl_scale(const void* expected, u64 n, int dtype, u64* slots) {
    int size = itemsize_of(dtype);
    u64 top = 0;
    u64 stride = (u64)gridDim.x * blockDim.x, end = grid_end(n);
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < end; i += stride) {
        if (i >= n) continue;
        double v = fabs(as_double(load_bits(expected, i, size), dtype));
        if (isfinite(v)) {
            u64 b = (u64)__double_as_longlong(v);
            top = b > top ? b : top;
        }
    }
    warp_max(&top);
    if ((threadIdx.x & 31) == 0 && top) atomicMax(&slots[8], top);
}

/* sum of floor(|expected| / scale * 2^32) over finite elements -> slots[9] (after cl_scale) */
extern "C" __global__ void cl_magnitude(const void* expected, u64 n, int dtype, u64* slots) {
    int size = itemsize_of(dtype);
    double scale = __longlong_as_double((i64)slots[8]);
    u64 sum = 0;
    u64 stride = (u64)gridDim.x * blockDim.x, end = grid_end(n);
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < end; i += stride) {
        if (i >= n || !(scale > 0.0)) continue;
        double v = fabs(as_double(load_bits(expected, i, size), dtype));
        if (isfinite(v)) sum += (u64)floor(v / scale * 4294967296.0);
    }
    warp_sum(&sum);
    if ((threadIdx.x & 31) == 0 && sum) atomicAdd(&slots[9], sum);
}

/* got against expected (expected == 0: unwritten elements only); slots as in device_checks;
   atol_relative: atol is a type's default, times min(1, mean |expected|) (compare) */
extern "C" __global__ void cl_check_output(const void* expected, const void* got, u64 n,
                                           int dtype, u64 poison, double rtol, double atol,
                                           double scale_tol, int atol_relative, u64* slots) {
    double scale = __longlong_as_double((i64)slots[8]);
    double scale_floor = scale_tol * scale;
    if (atol_relative && n > 0) {
        double typical = (double)slots[9] / 4294967296.0 * scale / (double)n;
        atol = atol * (typical < 1.0 ? typical : 1.0);
    }
    int size = itemsize_of(dtype), is_float = dtype <= 3;
    u64 un = 0, un_first = NO_INDEX, un_last = 0, bad = 0, bad_first = NO_INDEX;
    u64 worst = 0, finite = 0;
    u64 stride = (u64)gridDim.x * blockDim.x, end = grid_end(n);
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < end; i += stride) {
        if (i >= n) continue;
        u64 g = load_bits(got, i, size);
        if (!expected) {
            if (g == poison) { un++; if (un_first == NO_INDEX) un_first = i; un_last = i; }
            continue;
        }
        u64 e = load_bits(expected, i, size);
        if (g == poison && e != poison) {
            un++; if (un_first == NO_INDEX) un_first = i; un_last = i;
        }
        int wrong;
        if (is_float) {
            double ev = as_double(e, dtype), gv = as_double(g, dtype);
            double err = fabs(gv - ev);
            int close = err <= atol + rtol * fabs(ev)
                        || (scale_tol > 0.0 && err <= scale_floor + ulp_at(ev, dtype));
            int fin = !(isinf(ev) || isinf(gv));
            int both_nan = isnan(ev) && isnan(gv);
            int same_inf = isinf(ev) && ev == gv;
            wrong = !((close && fin) || both_nan || same_inf);
            if (isfinite(err)) {
                u64 eb = (u64)__double_as_longlong(err);
                worst = eb > worst ? eb : worst;
                finite = 1;
            }
        } else {
            wrong = e != g;
        }
        if (wrong) { bad++; if (bad_first == NO_INDEX) bad_first = i; }
    }
    warp_sum(&un); warp_min(&un_first); warp_max(&un_last);
    warp_sum(&bad); warp_min(&bad_first); warp_max(&worst); warp_max(&finite);
    if ((threadIdx.x & 31) == 0) {
        if (un) {
            atomicAdd(&slots[0], un);
            atomicMin(&slots[1], un_first);
            atomicMax(&slots[2], un_last);
        }
        if (bad) { atomicAdd(&slots[3], bad); atomicMin(&slots[4], bad_first); }
        if (finite) { atomicMax(&slots[5], worst); atomicMax(&slots[6], finite); }
    }
}

/* the first index whose finite |got - expected| is the largest (slots[5]) -> slots[7] */
extern "C" __global__ void cl_worst(const void* expected, const void* got, u64 n, int dtype,
                                    u64* slots) {
    int size = itemsize_of(dtype);
    u64 target = slots[5], first = NO_INDEX;
    u64 stride = (u64)gridDim.x * blockDim.x, end = grid_end(n);
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < end; i += stride) {
        if (i >= n || first != NO_INDEX) continue;
        double err = fabs(as_double(load_bits(got, i, size), dtype)
                          - as_double(load_bits(expected, i, size), dtype));
        if (isfinite(err) && (u64)__double_as_longlong(err) == target) first = i;
    }
    warp_min(&first);
    if ((threadIdx.x & 31) == 0 && first != NO_INDEX) atomicMin(&slots[7], first);
}

/* bytes of a guard band that are not `value`: count, first, last */
extern "C" __global__ void cl_check_bytes(const unsigned char* p, u64 n, unsigned int value,
                                          u64* slots) {
    u64 count = 0, first = NO_INDEX, last = 0;
    u64 stride = (u64)gridDim.x * blockDim.x, end = grid_end(n);
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < end; i += stride) {
        if (i < n && p[i] != (unsigned char)value) {
            count++; if (first == NO_INDEX) first = i; last = i;
        }
    }
    warp_sum(&count); warp_min(&first); warp_max(&last);
    if ((threadIdx.x & 31) == 0 && count) {
        atomicAdd(&slots[0], count); atomicMin(&slots[1], first); atomicMax(&slots[2], last);
    }
}

/* elements (of `size` bytes) that differ bit for bit: count, first */
extern "C" __global__ void cl_check_changed(const void* before, const void* after, u64 n,
                                            int size, u64* slots) {
    u64 count = 0, first = NO_INDEX;
    u64 stride = (u64)gridDim.x * blockDim.x, end = grid_end(n);
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < end; i += stride) {
        if (i < n && load_bits(before, i, size) != load_bits(after, i, size)) {
            count++; if (first == NO_INDEX) first = i;
        }
    }
    warp_sum(&count); warp_min(&first);
    if ((threadIdx.x & 31) == 0 && count) {
        atomicAdd(&slots[0], count);
        atomicMin(&slots[1], first);
    }
}

/* The L2 flush before each timed launch: read every 16 bytes of `p` (zeroed once, at least
   twice the L2), so L2 holds clean lines when the timed kernel starts. A memset left it full of
   dirty lines, and the timed kernel paid for writing them back, more or less by where its own
   buffers lay. The store never happens (`never` is not the XOR of zeros); it keeps the loads. */
extern "C" __global__ void cl_flush(const uint4* p, u64 n, unsigned int never) {
    unsigned int acc = 0;
    u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += stride) {
        uint4 v = __ldcg(p + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == never) ((unsigned int*)p)[0] = acc;
}
"""


@dataclass(frozen=True)
class HelperBuild:
    cubin: bytes | None
    log: str


def cache_dir() -> Path:
    """Where the compiled check kernels are kept: `CUDA_LLM_CACHE_DIR` or the platformdirs cache,
    as compile/cache.py (not imported: the worker starts without the compiler's modules, and
    tree-sitter, on its path)."""
    override = os.environ.get("CUDA_LLM_CACHE_DIR")
    return Path(override) if override else Path(platformdirs.user_cache_dir("cuda-llm-lsp"))


def _nvrtc() -> Any:
    from cuda.bindings import nvrtc  # on first use only: most worker starts find the cubin cached

    return nvrtc


def nvrtc_version() -> tuple[int, int]:
    nvrtc = _nvrtc()
    _, major, minor = nvrtc.nvrtcVersion()
    return int(major), int(minor)


def compile_helpers(arch: str) -> HelperBuild:
    """`SOURCE` for `arch` ("sm_90") with NVRTC."""
    nvrtc = _nvrtc()
    success = nvrtc.nvrtcResult.NVRTC_SUCCESS
    err, prog = nvrtc.nvrtcCreateProgram(SOURCE.encode(), b"cuda_llm_checks.cu", 0, [], [])
    if err != success:
        return HelperBuild(None, f"nvrtcCreateProgram: {err}")
    try:
        flags = [f"--gpu-architecture={arch}".encode(), b"--fmad=false", b"-std=c++17"]
        (result,) = nvrtc.nvrtcCompileProgram(prog, len(flags), flags)
        err, size = nvrtc.nvrtcGetProgramLogSize(prog)
        # a fresh writable buffer: `b" " * 1` is CPython's shared one-byte object, and NVRTC
        # writing its empty log ("\0") into it turned every b" " in the process into b"\0"
        log = bytearray(size)
        nvrtc.nvrtcGetProgramLog(prog, log)
        text = bytes(log).rstrip(b"\0 ").decode(errors="replace")
        if result != success:
            return HelperBuild(None, text)
        err, size = nvrtc.nvrtcGetCUBINSize(prog)
        cubin = bytearray(size)
        (err,) = nvrtc.nvrtcGetCUBIN(prog, cubin)
        return HelperBuild(bytes(cubin) if err == success else None, text)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
