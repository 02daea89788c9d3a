"""False errors on modern CUDA C++ that nvcc compiles cleanly (issue 28), each planted small.

Found on ThunderKittens and CCCL-era code: nvcc's `--expt-relaxed-constexpr` and
`--expt-extended-lambda` in a project's flags (NVRTC 13 refuses both, so every compile failed),
`std::min` / `std::numeric_limits` / `std::bit_cast` / C++20 concepts in device code (legal with
relaxed constexpr; NVRTC has no libstdc++), `__host__` conversion operators and constructors
under `#ifndef` in a class, `#include` lines inside a class body, and a header whose respelled
`#include` line shifted where its unused constants were blanked.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from cuda_llm_lsp.compile import project_config, std_names
from cuda_llm_lsp.compile.analysis import analyze
from cuda_llm_lsp.compile.device_unit import build_device_unit
from cuda_llm_lsp.compile.headers import STUB_DIR
from cuda_llm_lsp.compile.nvrtc import CompileOptions, build_flags
from cuda_llm_lsp.config import Settings


def _check(
    tmp_path: Path, text: str, settings: Settings | None = None
) -> tuple[list[str], list[str]]:
    source = tmp_path / "k.cu"
    source.write_text(text)
    analysis = analyze(text, source, settings or Settings())
    errors = [f"{e.line}: {e.message}" for e in analysis.errors]
    with_resources = [k.kernel.name for k in analysis.kernels if k.resources is not None]
    return errors, with_resources


def test_nvcc_only_flags_of_a_project_reach_nvcc_not_nvrtc(tmp_path: Path) -> None:
    (tmp_path / "compile_flags.txt").write_text(
        "--expt-relaxed-constexpr\n--expt-extended-lambda\n-std=c++17\n"
    )
    text = "__global__ void k(float* x) { x[0] = 1.0f; }\n"
    (tmp_path / "k.cu").write_text(text)
    flags = project_config.find_flags(tmp_path / "k.cu")
    assert flags is not None and flags.relaxed_constexpr and flags.extended_lambda
    settings = project_config.apply(Settings(), flags)
    assert {"--expt-relaxed-constexpr", "--extended-lambda"} <= set(settings.nvrtc_flags)
    errors, with_resources = _check(tmp_path, text, settings)
    assert errors == []  # was: "unrecognized option --expt-relaxed-constexpr found"
    assert with_resources == ["k"]
    unit = build_device_unit(text, tmp_path / "k.cu")
    options = CompileOptions(arch="sm_90", extra_flags=settings.nvrtc_flags)
    assert not any("relaxed" in f or "lambda" in f for f in build_flags(unit, options))


STD_IN_DEVICE_CODE = """\
#include <limits>
#include <algorithm>
#include <utility>
#include <array>
#include <bit>
#include <concepts>
#include <numbers>
template <std::integral T> __device__ T at_most_seven(T v) { return std::min(v, T(7)); }
__global__ void k(float* x, int* y) {
  std::array<float, 4> a{};
  a[0] = std::max(x[0], std::numeric_limits<float>::lowest());
  auto p = std::make_pair(1, 2.0f);
  x[1] = a[0] + p.second + std::bit_cast<float>(0x3f800000u) + std::numbers::pi_v<float>;
  y[0] = at_most_seven(y[1]);
}
"""


def test_constexpr_std_names_in_device_code_come_from_libcuxx(tmp_path: Path) -> None:
    settings = Settings(std="c++20")
    errors, with_resources = _check(tmp_path, STD_IN_DEVICE_CODE, settings)
    assert errors == []
    assert with_resources == ["k"]
    wrong = STD_IN_DEVICE_CODE.replace("p.second", "p.third")  # a real error still shows
    errors, _ = _check(tmp_path, wrong, settings)
    assert len(errors) == 1 and errors[0].startswith("13: ") and "third" in errors[0]


# Eigen 3.4's Meta.h: `std::invoke_result` in templates device code instantiates; the
# `<type_traits>` stand-in lacks it, libcu++ has it
INVOKE_RESULT = """\
#include <type_traits>
template <class F> __device__ typename std::invoke_result<F, int>::type call(F f) { return f(1); }
template <class F> __device__ std::invoke_result_t<F, int> call2(F f) { return f(2); }
struct Twice { __device__ int operator()(int x) const { return 2 * x; } };
__global__ void k(int* out) { out[0] = call(Twice{}) + call2(Twice{}); }
"""


def test_invoke_result_in_device_code_comes_from_libcuxx(tmp_path: Path) -> None:
    errors, with_resources = _check(tmp_path, INVOKE_RESULT, Settings())
    assert errors == []
    assert with_resources == ["k"]


def test_std_names_are_given_only_where_device_code_uses_them() -> None:
    host_only = "#include <algorithm>\nint f(int a) { return std::min(a, 3); }\n"
    assert "cuda_llm_std_names.h" not in build_device_unit(host_only).headers
    device = "#include <algorithm>\n__device__ int f(int a) { return std::min(a, 3); }\n"
    header = build_device_unit(device).headers["cuda_llm_std_names.h"]
    assert "using ::cuda::std::min;" in header and "numeric_limits" not in header


def test_a_cxx14_project_using_std_names_in_device_code_compiles(tmp_path: Path) -> None:
    """dlib builds with C++14; libcu++, which gives device code `std::min`, requires C++17
    (`#error`): NVRTC reads such a unit as C++17 (nvcc, the arbiter, keeps C++14)."""
    text = (
        "#include <algorithm>\n"
        "__device__ float f(float a) { return std::min(a, 3.0f); }\n"
        "__global__ void k(float* o) { o[0] = f(o[0]); }\n"
    )
    errors, with_resources = _check(tmp_path, text, Settings(std="c++14"))
    assert errors == [] and with_resources == ["k"]
    unit = build_device_unit(text, tmp_path / "k.cu")
    assert "-std=c++17" in build_flags(unit, CompileOptions(arch="sm_90", std="c++14"))
    plain = build_device_unit("__global__ void k(float* o) { o[0] = 1; }\n")
    assert "-std=c++14" in build_flags(plain, CompileOptions(arch="sm_90", std="c++14"))


def test_a_project_declaring_a_std_name_itself_is_left_alone(tmp_path: Path) -> None:
    text = (
        "namespace std { template <class T> struct numeric_limits { "
        "__device__ static T max() { return T(1); } }; }\n"
        "__global__ void k(float* x) { x[0] = std::numeric_limits<float>::max(); }\n"
    )
    errors, with_resources = _check(tmp_path, text)
    assert errors == [] and with_resources == ["k"]


HOST_MEMBERS = """\
struct config_t { int x; };
struct launch_config {
  config_t config;
  __host__ inline operator config_t*() noexcept { return &config; }
  __host__ inline operator const config_t*() const noexcept { return &config; }
  __host__ __device__ int get() const { return config.x; }
};
template <typename... Args> struct descriptor {
#ifndef LIB_NO_HOST
  __host__ descriptor() {}
  template <typename T> __host__ descriptor(T data, int rows) {}
#endif
  __host__ __device__ descriptor(const descriptor& other) {}
};
__global__ void k(int* x) { launch_config c{}; x[0] = c.get(); }
"""


def test_host_conversion_operators_and_host_members_under_an_ifndef_are_blanked(
    tmp_path: Path,
) -> None:
    errors, with_resources = _check(tmp_path, HOST_MEMBERS)
    assert errors == []  # was: "A function explicitly marked as a __host__ function ..."
    assert with_resources == ["k"]


def test_includes_inside_a_class_body_are_read(tmp_path: Path) -> None:
    # ThunderKittens' `struct group { ... #include "memory/memory.cuh" ... struct tma {
    # #include "memory/tile/tma.cuh" }; };`: the member functions live in those files
    lib = tmp_path / "lib"
    (lib / "memory").mkdir(parents=True)
    (lib / "memory" / "memory.cuh").write_text(
        "int host_count();\n__device__ static inline int lane() { return threadIdx.x % 32; }\n"
    )
    (lib / "memory" / "tma.cuh").write_text("__device__ static inline int one() { return 1; }\n")
    (lib / "group.cuh").write_text(
        "#pragma once\ntemplate <int N> struct group {\n"
        '#include "memory/memory.cuh"\n'
        'struct tma {\n#include "memory/tma.cuh"\n};\n};\n'
    )
    text = (
        '#include "lib/group.cuh"\n'
        "__global__ void k(int* x) { x[0] = group<4>::lane() + group<4>::tma::one(); }\n"
    )
    errors, with_resources = _check(tmp_path, text)
    assert errors == []  # was: cannot open source file "memory/memory.cuh"
    assert with_resources == ["k"]


def test_unused_constants_after_a_respelled_include_are_blanked_where_they_are(
    tmp_path: Path,
) -> None:
    (tmp_path / "common").mkdir()
    (tmp_path / "common" / "base.cuh").write_text("#pragma once\ntypedef int handle_base;\n")
    (tmp_path / "types" / "system").mkdir(parents=True)
    (tmp_path / "types" / "system" / "vmm.cuh").write_text(
        '#pragma once\n#include "../../common/base.cuh"\n'
        "static constexpr int HANDLE_KIND = 3;\n\ntypedef handle_base handle;\n"
    )
    text = (
        '#include "types/system/vmm.cuh"\n__global__ void k(int* x) { handle h = 2; x[0] = h; }\n'
    )
    settings = Settings(include_paths=(str(tmp_path),))
    errors, with_resources = _check(tmp_path, text, settings)
    assert errors == []  # was: `typedef` half blanked: identifier "def" is undefined
    assert with_resources == ["k"]


API_H = """\
#pragma once
#include <stdbool.h>
#include <initializer_list>
#ifdef LIB_SHARED
#    define LIB_API __attribute__ ((visibility ("default"))) extern
#else
#    define LIB_API extern
#endif
#define LIB_NORETURN [[noreturn]]
#define LIB_FORMAT(...) __attribute__((format(printf, __VA_ARGS__)))
#define LIB_DEPRECATED(func, hint) func __attribute__((deprecated(hint)))
#define LIB_EXTENSION __extension__
struct lib_graph;
enum lib_op { LIB_ADD, LIB_MUL };
#ifdef __cplusplus
extern "C" {
#endif
    LIB_NORETURN LIB_FORMAT(3, 4)
    LIB_API void lib_abort(const char * file, int line, const char * fmt, ...);
    LIB_DEPRECATED(LIB_API struct lib_graph * lib_add1(
            struct lib_graph * a,
            struct lib_graph * b),
        "use lib_add");
    LIB_API bool lib_ready(void);
#ifdef __cplusplus
}
#endif
inline bool lib_can_fuse(const struct lib_graph * g, std::initializer_list<enum lib_op> ops,
                         std::initializer_list<int> outputs = {}) {
    return lib_can_fuse(g, ops.size(), ops.begin(), outputs.begin(), outputs.size());
}
typedef struct {
    LIB_EXTENSION union {
        struct { float d; float m; } dm;
        float dmf[2];
    };
    int qs[4];
} block_q4_1;
#if defined(LIB_USE_HIP)
#include "vendors/hip.h"
#endif
"""


def test_a_c_api_header_of_attribute_macros_is_blanked_whole(tmp_path: Path) -> None:
    # ggml.h / ggml-impl.h / ggml-common.h in small: every ggml-cuda file had false errors
    (tmp_path / "vendors").mkdir()
    (tmp_path / "api.h").write_text(API_H)
    (tmp_path / "vendors" / "hip.h").write_text("#include <hip/hip_runtime.h>\n")
    text = (
        '#include "api.h"\n#include <array>\n'
        "__global__ void k(block_q4_1* x) {\n"
        '  static_assert(std::is_same_v<decltype(x->dm.d), float>, "d");\n'
        "  x->qs[0] = 1;\n}\n"
    )
    source = tmp_path / "k.cu"
    source.write_text(text)
    analysis = analyze(text, source, Settings())
    assert [e.message for e in analysis.errors] == []
    # hip.h is read only under LIB_USE_HIP: its missing <hip/...> is no warning
    assert not any("hip" in d.message for d in analysis.diagnostics), analysis.diagnostics
    assert [k.kernel.name for k in analysis.kernels if k.resources is not None] == ["k"]
    wrong = text.replace("x->qs[0] = 1", "x->qs[0] = missing")
    analysis = analyze(wrong, source, Settings())
    assert [e.line for e in analysis.errors] == [5]


TORCH_EXTENSION = """\
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_fp16.h>

template <typename scalar_t>
__global__ void scale_rows(torch::PackedTensorAccessor32<scalar_t, 2, torch::RestrictPtrTraits> x,
                           const at::PackedTensorAccessor32<float, 1> scale) {
  const int row = blockIdx.x, col = threadIdx.x;
  if (col < x.size(1)) x[row][col] = static_cast<float>(x[row][col]) * scale[row];
}

__global__ void to_half(const float* __restrict__ in, at::Half* out, c10::BFloat16* out2, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { out[i] = in[i] * 2.0f; out2[i] = static_cast<float>(out[i]) + 1.0f; }
}

torch::Tensor scale_rows_cuda(torch::Tensor x, torch::Tensor scale) {
  const at::cuda::OptionalCUDAGuard guard(device_of(x));
  AT_DISPATCH_FLOATING_TYPES_AND_HALF(x.scalar_type(), "scale_rows", ([&] {
    scale_rows<scalar_t><<<x.size(0), x.size(1), 0, at::cuda::getCurrentCUDAStream()>>>(
        x.packed_accessor32<scalar_t, 2, torch::RestrictPtrTraits>(),
        scale.packed_accessor32<float, 1>());
  }));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return x;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("scale_rows", &scale_rows_cuda, "scale rows (CUDA)");
}
"""


def test_a_pytorch_extension_is_checked_without_torchs_headers(tmp_path: Path) -> None:
    # pytorch/extension-cpp's shape: torch headers (host C++, with or without -I) are read as
    # a stand-in for what kernels use; the host dispatch and PYBIND11_MODULE are blanked
    errors, with_resources = _check(tmp_path, TORCH_EXTENSION)
    assert errors == []
    assert "to_half" in with_resources
    wrong = TORCH_EXTENSION.replace("out2[i] = static_cast<float>(out[i])", "out2[i] = out[i].x2")
    errors, _ = _check(tmp_path, wrong)
    assert len(errors) == 1 and errors[0].startswith("15: ") and "x2" in errors[0], errors
    wrong = TORCH_EXTENSION.replace("out[i] = in[i] * 2.0f", "out[i] = in * 2.0f")
    errors, _ = _check(tmp_path, wrong)
    assert len(errors) == 1 and errors[0].startswith("15: "), errors


def test_kernels_in_a_namespace_get_resources(tmp_path: Path) -> None:
    text = (
        "namespace ext { namespace detail {\n"
        "__global__ void plain(float* x) { x[0] = 1; }\n"
        "template <int B> __global__ void tiled(float* x) { x[B] = 2; }\n"
        "void run(float* x) { tiled<4><<<1, 1>>>(x); }\n"
        "} }\n"
    )
    source = tmp_path / "k.cu"
    source.write_text(text)
    analysis = analyze(text, source, Settings())
    assert analysis.errors == ()
    assert [
        (k.kernel.name, k.name_expression, k.resources is not None) for k in analysis.kernels
    ] == [
        ("plain", "ext::detail::plain", True),
        ("tiled", "ext::detail::tiled<4>", True),
    ]


def test_a_kernel_in_a_namespace_builds_for_the_evaluator() -> None:
    # benchmark and optimize compile through build_binary: NVRTC lowered nothing for `k`
    from cuda_llm_lsp.evaluate.candidate import KernelBinary, build_binary

    text = (
        "namespace ext {\n__global__ void scale(float* x, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2.0f;\n}\n}\n"
    )
    built = build_binary(text, None, "scale", Settings(), arch="sm_90")
    assert isinstance(built, KernelBinary), built
    assert built.entry == "_ZN3ext5scaleEPfi"
    candidate = (
        "__global__ void scale(float* x, int n) {\n"
        "  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)"
        " x[i] *= 2.0f;\n}\n"
    )
    built = build_binary(text, None, "scale", Settings(), kernel_source=candidate, arch="sm_90")
    assert isinstance(built, KernelBinary), built
    assert built.entry == "_ZN3ext5scaleEPfi"


def test_a_files_own_prototypes_behind_a_headers_attribute_macros_are_blanked(
    tmp_path: Path,
) -> None:
    (tmp_path / "api.h").write_text(API_H)
    text = (
        '#include "api.h"\n'
        "LIB_NORETURN LIB_FORMAT(1, 2)\nLIB_API void fail(const char* fmt, ...);\n"
        "__global__ void k(int* x) { x[0] = 1; }\n"
    )
    errors, with_resources = _check(tmp_path, text)
    assert errors == [] and with_resources == ["k"]


def test_a_missing_quoted_include_under_an_if_is_a_warning(tmp_path: Path) -> None:
    # ggml's `#if defined(GGML_USE_HIP)` / `#include "vendors/hip.h"` in a tree without it
    text = (
        '#if defined(USE_HIP)\n#include "vendors/hip.h"\n#endif\n'
        '#include "missing.h"\n__global__ void k(int* x) { x[0] = 1; }\n'
    )
    source = tmp_path / "k.cu"
    source.write_text(text)
    analysis = analyze(text, source, Settings())
    found = {(d.line, d.severity) for d in analysis.diagnostics if "cannot find" in d.message}
    assert found == {(2, "warning"), (4, "error")}


def test_a_std_template_the_file_specialises_stays_its_own(tmp_path: Path) -> None:
    # CuPy's cupy_cub.cu specialises cuda::std::numeric_limits and std::numeric_limits for its
    # complex type: under nvcc two templates (libcu++'s, libstdc++'s), so two here too
    text = (
        "#include <cuda/std/limits>\nstruct cplx { float re, im; };\n"
        "namespace cuda { namespace std {\ntemplate <> class numeric_limits<cplx> {\n"
        " public: static __host__ __device__ cplx max() { return {1.0f, 1.0f}; }\n};\n} }\n"
        "namespace std {\ntemplate <> class numeric_limits<cplx> {\n public:\n"
        "  static __host__ __device__ cplx infinity() {\n"
        "    return {std::numeric_limits<float>::infinity(), 0.0f};\n  }\n};\n}\n"
        "__global__ void k(cplx* x) { x[0] = std::numeric_limits<cplx>::infinity(); }\n"
    )
    errors, with_resources = _check(tmp_path, text)
    assert errors == [] and with_resources == ["k"]


def test_an_alias_of_a_libcuxx_type_is_not_host_std(tmp_path: Path) -> None:
    # CCCL's thrust examples: `using vec2 = cuda::std::tuple<float, float>;` was blanked as
    # if it named the host's std::tuple, and every use of vec2 became an error
    text = (
        "#include <cuda/std/tuple>\nusing vec2 = cuda::std::tuple<float, float>;\n"
        "using host_pair = std::tuple<float>;\n"
        "__global__ void k(vec2* v, float* o) { o[0] = cuda::std::get<0>(v[0]); }\n"
    )
    errors, with_resources = _check(tmp_path, text)
    assert errors == [] and with_resources == ["k"]
    assert "host_pair" not in build_device_unit(text).text


def test_libcuxx_names_a_dropped_thrust_header_brought_are_included(tmp_path: Path) -> None:
    # CCCL's bucket_sort2d.cu has cuda::std::tuple only through <thrust/...>, which the unit
    # drops: the libcu++ header of a `cuda::std::` name it uses is included for it
    text = (
        "#include <thrust/device_vector.h>\nusing vec2 = cuda::std::tuple<float, float>;\n"
        "__global__ void k(vec2* v, float* o) { o[0] = cuda::std::get<0>(v[0]); }\n"
    )
    errors, with_resources = _check(tmp_path, text)
    assert errors == [] and with_resources == ["k"]


LIMITS_AGAINST_LIBSTDCXX = """\
#define __host__
#define __device__
#define std cuda_llm_stand_in
#include "cuda_llm_limits.h"
#undef std
#include <limits>
template <class T> constexpr bool same_bits(T a, T b) {
  using U4 = unsigned;
  using U8 = unsigned long long;
  if constexpr (sizeof(T) == 4) return __builtin_bit_cast(U4, a) == __builtin_bit_cast(U4, b);
  else if constexpr (sizeof(T) == 8) return __builtin_bit_cast(U8, a) == __builtin_bit_cast(U8, b);
  else return a == b;
}
#define F(f) static_assert(same_bits(A::f(), B::f()), #f);
#define V(f) static_assert(A::f == B::f, #f);
template <class T> constexpr bool same() {
  using A = cuda_llm_stand_in::numeric_limits<T>; using B = std::numeric_limits<T>;
  F(min) F(max) F(lowest) F(epsilon) F(round_error) F(infinity) F(quiet_NaN) F(signaling_NaN)
  F(denorm_min) V(is_specialized) V(digits) V(digits10) V(max_digits10) V(is_signed)
  V(is_integer) V(is_exact) V(radix) V(min_exponent) V(min_exponent10) V(max_exponent)
  V(max_exponent10) V(has_infinity) V(has_quiet_NaN) V(has_signaling_NaN) V(has_denorm_loss)
  V(is_iec559) V(is_bounded) V(is_modulo) V(traps) V(tinyness_before)
  static_assert(int(A::has_denorm) == int(B::has_denorm), "has_denorm");
  static_assert(int(A::round_style) == int(B::round_style), "round_style");
  return true;
}
static_assert(same<bool>() && same<char>() && same<signed char>() && same<unsigned char>());
static_assert(same<wchar_t>() && same<char16_t>() && same<char32_t>() && same<short>());
static_assert(same<unsigned short>() && same<int>() && same<unsigned>() && same<long>());
static_assert(same<unsigned long>() && same<long long>() && same<unsigned long long>());
static_assert(same<__int128>() && same<unsigned __int128>() && same<float>() && same<double>());
static_assert(same<const float>() && same<volatile int>() && same<const volatile double>());
#if defined(__cpp_char8_t)
static_assert(same<char8_t>());
#endif
struct Own {};
static_assert(!cuda_llm_stand_in::numeric_limits<Own>::is_specialized);
"""


@pytest.mark.parametrize("std", ["gnu++17", "c++20"])
def test_the_numeric_limits_stand_in_gives_libstdcxx_values(tmp_path: Path, std: str) -> None:
    """`std::numeric_limits` in device code comes from our stand-in, not libcu++ (a second of
    NVRTC's time per compile, every ggml file): each member of each type, NaN bit patterns
    included, must equal what libstdc++ gives nvcc's host compiler."""
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("no g++ to compare against libstdc++")
    (tmp_path / "check.cpp").write_text(LIMITS_AGAINST_LIBSTDCXX)
    run = subprocess.run(
        [gxx, f"-std={std}", "-fsyntax-only", f"-I{STUB_DIR}", str(tmp_path / "check.cpp")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-3000:]


def test_numeric_limits_in_device_code_needs_no_libcuxx_header(tmp_path: Path) -> None:
    """ggml's `std::numeric_limits<float>::infinity()`: clean, its values constant-folded as
    libstdc++'s, and no `<cuda/std/...>` header in the unit (each costs NVRTC about a second)."""
    text = (
        "#include <limits>\n#include <cstdint>\n"
        'static_assert(std::numeric_limits<float>::max() == 3.40282347e+38F, "max");\n'
        "static_assert(std::numeric_limits<int64_t>::min() == -9223372036854775807LL - 1,"
        ' "min");\n'
        'static_assert(std::numeric_limits<uint8_t>::digits == 8, "digits");\n'
        "__global__ void k(float* x) {\n"
        "  float m = -std::numeric_limits<float>::infinity();\n"
        "  if (x[threadIdx.x] != x[threadIdx.x]) m = std::numeric_limits<float>::quiet_NaN();\n"
        "  x[threadIdx.x] = fmaxf(m, x[threadIdx.x]);\n}\n"
    )
    errors, with_resources = _check(tmp_path, text)
    assert errors == [] and with_resources == ["k"]
    header = build_device_unit(text, tmp_path / "k.cu").headers[std_names.HEADER]
    assert "cuda_llm_limits.h" in header and "cuda/std/" not in header


GL_HEADER = """\
#pragma once
#include <type_traits>
#define HD __device__ __host__
using std::enable_if_t;
template <int r, int c> struct gl {
  int rows_internal, cols_internal;
  static constexpr int __r__ = r, __c__ = c;
  template <int R=__r__> HD static constexpr enable_if_t<(R > 0), int> rows() { return R; }
  template <int R=__r__> HD enable_if_t<(R == -1), int> rows() const { return rows_internal; }
  template <int C=__c__> HD static constexpr enable_if_t<(C > 0), int> cols(int) { return C; }
  template <int C=__c__> HD enable_if_t<(C == -1), int> cols(int) const { return cols_internal; }
};
"""


def test_static_and_nonstatic_sfinae_twins_in_a_header_compile(tmp_path: Path) -> None:
    """ThunderKittens' gl.cuh: a static and a non-static member template of one name and
    parameters, told apart by enable_if. nvcc (GNU mode, as g++) takes them; NVRTC's strict
    front end said "static and nonstatic member functions with same parameter types cannot be
    overloaded" and every call failed. Both kinds of call still resolve."""
    (tmp_path / "gl.cuh").write_text(GL_HEADER)
    text = (
        '#include "gl.cuh"\n'
        "__global__ void k(gl<-1, 8> g, int* o) {\n"
        "  o[0] = g.rows() + gl<4, 8>::rows() + g.cols(1);\n"
        "}\n"
    )
    errors, with_resources = _check(tmp_path, text)
    assert errors == [] and with_resources == ["k"]


def test_a_static_twin_is_still_an_error_where_calls_are_ambiguous(tmp_path: Path) -> None:
    """The rewrite only separates the declarations: a call that neither twin takes (nvcc's
    error too) still fails."""
    (tmp_path / "gl.cuh").write_text(GL_HEADER)
    text = '#include "gl.cuh"\n__global__ void k(gl<-1, 8> g, int* o) { o[0] = g.rows(2); }\n'
    errors, _ = _check(tmp_path, text)
    assert errors and "rows" in errors[0]


def test_a_torch_extensions_header_names_the_math_library_handles(tmp_path: Path) -> None:
    """exllamav2's q_mlp.cuh: a class whose host prototype takes a `cublasHandle_t`, which
    <ATen/cuda/CUDAContext.h> brings for nvcc (was: "cublasHandle_t" is undefined)."""
    (tmp_path / "mlp.cuh").write_text(
        "#pragma once\n#include <ATen/cuda/CUDAContext.h>\n"
        "struct MLP {\n"
        "  void forward_(cudaStream_t stream, cublasHandle_t cublas, cublasLtHandle_t lt,\n"
        "                cusparseHandle_t sparse, cusolverDnHandle_t dense, half* x\n"
        "//             , const std::vector<uintptr_t>& loras\n"
        "  );\n"
        "};\n"
    )
    text = '#include "mlp.cuh"\n__global__ void k(half* x) { x[0] = __float2half(1.0f); }\n'
    errors, with_resources = _check(tmp_path, text)
    assert errors == [] and with_resources == ["k"]


def test_c10_complex_and_type_traits_come_with_the_torch_stand_in(tmp_path: Path) -> None:
    """mamba's selective scan: `c10::complex<float>` arithmetic on `real_`/`imag_` in device
    code, std::conj of one, and std::conditional_t, which c10's headers bring (was: namespace
    "c10" has no member "complex"; "std" has no member "conditional_t")."""
    text = (
        "#include <c10/util/complex.h>\n"
        "using complex_t = c10::complex<float>;\n"
        "template <typename T> struct Scan {\n"
        "  using scan_t = std::conditional_t<std::is_same_v<T, float>, float2, float4>;\n"
        "};\n"
        "__global__ void k(float4* io) {\n"
        "  complex_t a(io[0].x, io[0].y), b = complex_t(io[0].z, io[0].w);\n"
        "  complex_t c = 2.0f * a * b + std::conj(a) - b / a;\n"
        "  Scan<float>::scan_t s = make_float2(c.real_, c.imag());\n"
        "  io[1] = make_float4(s.x, s.y, std::norm(c), std::abs(c));\n"
        "}\n"
    )
    errors, with_resources = _check(tmp_path, text)
    assert errors == [] and with_resources == ["k"]
    errors, _ = _check(tmp_path, text.replace("c.real_", "c.real_part"))
    assert len(errors) == 1 and "real_part" in errors[0], errors


def test_a_constexpr_function_using_given_std_names_is_device_code(tmp_path: Path) -> None:
    """mamba's `constexpr size_t custom_max(std::initializer_list<size_t> l) { return
    std::max(l); }`, called from a kernel under relaxed constexpr: std::max comes from libcu++,
    std::initializer_list is NVRTC's own (was: blanked as host code, "custom_max" undefined)."""
    text = (
        "#include <algorithm>\n#include <initializer_list>\n"
        "constexpr size_t custom_max(std::initializer_list<size_t> ilist) {\n"
        "  return std::max(ilist);\n}\n"
        "template <typename T> constexpr T constexpr_min(T a, T b) { return std::min(a, b); }\n"
        "__global__ void k(int* o) {\n"
        "  constexpr int n = custom_max({1, 2, 3});\n  o[0] = constexpr_min(n, 7);\n}\n"
    )
    errors, with_resources = _check(tmp_path, text)
    assert errors == [] and with_resources == ["k"]


def test_an_explicit_instantiation_of_a_header_host_template_goes_too(tmp_path: Path) -> None:
    """mamba's selective_scan_fwd_fp32.cu: `template void selective_scan_fwd_cuda<float,
    float>(...);` of a host template its header defines (was: "invalid explicit instantiation
    declaration" once the header's template was blanked). A device template's stays."""
    (tmp_path / "scan.cuh").write_text(
        "#pragma once\n#include <vector>\n"
        "template <typename T> __global__ void scan_kernel(T* x) { x[0] = T(1); }\n"
        "template <typename T> __device__ T twice(T x) { return 2 * x; }\n"
        "template <typename T, typename W>\n"
        "void scan_cuda(T* x, cudaStream_t stream) {\n"
        "  std::vector<int> sizes{1};\n  scan_kernel<T><<<sizes[0], 1, 0, stream>>>(x);\n}\n"
    )
    text = (
        '#include "scan.cuh"\n'
        "template void scan_cuda<float, float>(float* x, cudaStream_t stream);\n"
        "template __device__ float twice<float>(float x);\n"
        "__global__ void k(float* x) { x[0] = twice(x[0]); }\n"
    )
    errors, with_resources = _check(tmp_path, text)
    assert errors == [] and with_resources == ["k"]


def test_atens_warp_helpers_come_with_the_torch_stand_in(tmp_path: Path) -> None:
    """apex's layer norm calls WARP_SHFL / WARP_SHFL_XOR from <ATen/cuda/DeviceUtils.cuh>
    (was: identifier "WARP_SHFL" is undefined)."""
    text = (
        '#include "ATen/cuda/DeviceUtils.cuh"\n#include <c10/util/Half.h>\n'
        "__global__ void k(float* x, c10::Half* h) {\n"
        "  float v = WARP_SHFL(x[threadIdx.x], 0) + WARP_SHFL_XOR(x[0], 1, 32);\n"
        "  h[0] = WARP_SHFL_DOWN(h[threadIdx.x], 1u);\n"
        "  if (WARP_BALLOT(v > 0.0f) == ACTIVE_MASK()) x[0] = WARP_SHFL_UP(v, 1u);\n"
        "}\n"
    )
    errors, with_resources = _check(tmp_path, text)
    assert errors == [] and with_resources == ["k"]


def test_c10_half_and_bfloat16_arithmetic_is_c10s_own(tmp_path: Path) -> None:
    """torch-scatter's atomics: `c10::BFloat16 + c10::BFloat16` (and `*`, `/`) in device code
    (was: more than one operator "+" matches, float's built-in against cuda_bf16.h's, since the
    stand-in converted to __nv_bfloat16 implicitly and declared none of c10's operators), and
    `c10::Half` the same where a build undefines __CUDA_NO_HALF_OPERATORS__ (causal-conv1d)."""
    text = (
        "#include <c10/util/Half.h>\n#include <c10/util/BFloat16.h>\n"
        "template <typename T> __device__ T mix(T a, T b) {\n"
        "  T s = a + b;\n  s *= a / b;\n  s = s - 2 * a + b * int64_t(3);\n"
        "  float f = a + 1.0f;\n  f += b;\n  return -s + T(f);\n}\n"
        "__global__ void k(c10::Half* h, c10::BFloat16* b) {\n"
        "  h[0] = mix(h[1], h[2]);\n  b[0] = mix(b[1], b[2]);\n"
        "  if (b[1] < b[2]) b[3] = static_cast<__nv_bfloat16>(b[2]);\n"
        "}\n"
    )
    settings = Settings(defines=("__CUDA_NO_HALF2_OPERATORS__",))
    errors, with_resources = _check(tmp_path, text, settings)
    assert errors == [] and with_resources == ["k"]
    errors, _ = _check(tmp_path, text.replace("T s = a + b;", "T s = a + b + q;"), settings)
    assert len(errors) == 1 and '"q"' in errors[0], errors


def test_atens_tensor_info_comes_with_the_torch_stand_in(tmp_path: Path) -> None:
    """torch-scatter's kernels take `at::cuda::detail::TensorInfo<int64_t, int>` by value and
    call IndexToOffset (was: name followed by "::" must be a class or namespace name); its
    members are ATen's, in ATen's order, so the kernel's parameters are nvcc's."""
    text = (
        "#include <ATen/cuda/detail/TensorInfo.cuh>\n"
        "using at::cuda::detail::TensorInfo;\n"
        "__global__ void k(const TensorInfo<int64_t, int> info, int64_t* out) {\n"
        "  int offset = at::cuda::detail::IndexToOffset<int64_t, int, -1>::get(0, info);\n"
        "  out[0] = info.data[offset + info.strides[info.dims - 1]] + info.isContiguous();\n"
        "}\n"
    )
    errors, with_resources = _check(tmp_path, text)
    assert errors == [] and with_resources == ["k"]
    errors, _ = _check(tmp_path, text.replace("info.dims - 1", "info.ndims - 1"))
    assert len(errors) == 1 and "ndims" in errors[0], errors


def test_two_headers_of_one_relative_name_are_both_read(tmp_path: Path) -> None:
    """ThunderKittens' include/common/common.cuh and prototype/common/common.cuh, each
    `#include "common/common.cuh"` from beside it with -I include -I prototype: NVRTC knows
    in-memory headers by name, and the second was taken for the first (was: identifier
    "kittens_layout" is undefined)."""
    files = {
        "include/common/common.cuh": "#pragma once\nnamespace kit { struct base {}; }\n",
        "include/kit.cuh": '#pragma once\n#include "common/common.cuh"\n',
        "prototype/common/common.cuh": "#pragma once\n"
        "namespace kit { template <typename T> concept layout = requires { typename T::g; }; }\n",
        "prototype/proto.cuh": '#pragma once\n#include "../include/kit.cuh"\n'
        '#include "common/common.cuh"\n'
        "namespace kit { template <layout T> __device__ int run() { return 1; } }\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    text = (
        '#include "kit.cuh"\n#include "proto.cuh"\n'
        "struct L { using g = int; };\n"
        "__global__ void k(int* o) { kit::base b; (void)b; o[0] = kit::run<L>(); }\n"
    )
    settings = Settings(
        std="c++20", include_paths=(str(tmp_path / "include"), str(tmp_path / "prototype"))
    )
    errors, with_resources = _check(tmp_path, text, settings)
    assert errors == [] and with_resources == ["k"]


def test_a_host_launcher_a_misread_kernel_body_swallowed_is_blanked(tmp_path: Path) -> None:
    """ThunderKittens' interpreter.cuh: two `#ifdef`s inside a braced initializer made
    tree-sitter carry the kernel's body past its `}`, taking the `__host__` launcher after it
    along; the launcher stayed (was: "A function
    explicitly marked as a __host__ function is not allowed in JIT mode")."""
    (tmp_path / "interp.cuh").write_text(
        "#pragma once\nnamespace kit { namespace interpreter {\n"
        "template <typename config, typename... ops>\n"
        "__global__ void kernel(const __grid_constant__ typename config::globals g) {\n"
        "  struct state { int iter; int* shm; int* timings; int* next; };\n"
        "  state ps{\n"
        "    0, // task iter\n"
        "    nullptr,\n"
        "#ifdef KITTENS_BLACKWELL\n"
        "    tensor_alloc,\n"
        "#endif\n"
        "#ifdef KITTENS_TIMINGS\n"
        "    &timings[0][0],\n"
        "#endif\n"
        "    nullptr\n"
        "  };\n"
        "  if (g.x) ps.iter = 1;\n"
        "}\n"
        "template <typename config, typename... ops>\n"
        "__host__ void run(typename config::globals& globals) {\n"
        "  cudaFuncSetAttribute(kernel<config, ops...>,\n"
        "                       cudaFuncAttributeMaxDynamicSharedMemorySize, 1024);\n"
        "  kernel<config, ops...><<<1, 1, 1024>>>(globals);\n"
        "}\n"
        "} }\n"
    )
    text = '#include "interp.cuh"\n__global__ void k(int* o) { o[0] = 1; }\n'
    errors, with_resources = _check(tmp_path, text)
    assert errors == [] and with_resources == ["k"]


def test_extended_lambdas_and_narrowing_braces_read_as_nvcc_reads_them(tmp_path: Path) -> None:
    """ThunderKittens builds with --extended-lambda: `[=] __host__ __device__ (int x)` is
    refused by NVRTC ("annotation on lambda is not allowed in JIT mode"); and a narrowing brace
    initialiser of a class with a constructor is nvcc's warning #2361-D, NVRTC's error."""
    text = (
        "struct coord { int b, d;\n"
        "  __device__ coord(int b_, int d_) : b(b_), d(d_) {} };\n"
        "template <int D> __global__ void k(int* o) {\n"
        "  coord q = {blockIdx.z, blockIdx.y};\n"
        "  auto f = [=] __host__ __device__ (int x) mutable { return x + D; };\n"
        "  auto g = [] __device__ (int x) -> int { return x; };\n"
        "  o[0] = f(q.b) + g(q.d);\n}\n"
        "template __global__ void k<4>(int*);\n"
    )
    source = tmp_path / "k.cu"
    source.write_text(text)
    analysis = analyze(text, source, Settings())
    assert analysis.errors == ()
    warned = [d for d in analysis.diagnostics if "narrowing" in d.message]
    assert len(warned) == 2 and all(d.severity == "warning" and d.line == 4 for d in warned)
    assert analysis.kernels[0].resources is not None


def test_host_only_member_prototypes_leave_the_unit(tmp_path: Path) -> None:
    """faiss's Tensor.cuh: `__host__ void copyFrom(const Tensor& t, cudaStream_t stream);` and
    `template <typename U> __host__ Tensor<U> cast() const;` declared in a class template
    (was: "A function explicitly marked as a __host__ function is not allowed in JIT mode", an
    error on lines nvcc accepts). A `__host__ __device__` one stays; an error in the kernel is
    still found."""
    text = (
        "template <typename T> struct Tensor {\n"
        "  __host__ __device__ Tensor(T* d) : data_(d) {}\n"
        "  __host__ void copyFrom(const Tensor<T>& t, cudaStream_t stream);\n"
        "  template <typename U>\n  __host__ Tensor<U> cast() const;\n"
        "  __host__ __device__ T* data();\n  T* data_;\n};\n"
        "template <typename T> __host__ __device__ T* Tensor<T>::data() { return data_; }\n"
        "struct S {\n  __host__ static void reset();\n  __device__ int get() const { return v; }\n"
        "  int v;\n};\n"
        "__global__ void k(float* p, S s) {\n"
        "  Tensor<float> t(p);\n  t.data()[0] = s.get();\n}\n"
    )
    errors, with_resources = _check(tmp_path, text)
    assert errors == [] and with_resources == ["k"]
    errors, _ = _check(tmp_path, text.replace("s.get()", "s.gets()"))
    assert len(errors) == 1 and "gets" in errors[0], errors


def test_a_member_taking_std_initializer_list_stays_with_its_definition(tmp_path: Path) -> None:
    """faiss's `__host__ __device__ Tensor(DataPtrType data, std::initializer_list<IndexT>
    sizes);`, defined outside the class: std::initializer_list is NVRTC's own (was: the
    declaration blanked as host code, the definition kept, and the kernel's `Tensor<float>
    t(p, {2, 3})` a false error, "no suitable constructor exists")."""
    text = (
        "#include <initializer_list>\n"
        "template <typename T> struct Tensor {\n"
        "  __host__ __device__ Tensor(T* data, std::initializer_list<int> sizes);\n"
        "  T* data_;\n  int size_;\n};\n"
        "template <typename T>\n"
        "__host__ __device__ Tensor<T>::Tensor(T* data, std::initializer_list<int> sizes)\n"
        "    : data_(data), size_(0) {\n  for (auto s : sizes) size_ += s;\n}\n"
        "__global__ void k(float* p) {\n  Tensor<float> t(p, {2, 3});\n  t.data_[0] = t.size_;\n}\n"
    )
    errors, with_resources = _check(tmp_path, text)
    assert errors == [] and with_resources == ["k"]


def test_a_constexpr_constant_initialized_from_given_std_names_stays(tmp_path: Path) -> None:
    """faiss's Limits.cuh: `constexpr float kFloatMax = std::numeric_limits<float>::max();`
    read by a `__host__ __device__` function (was: blanked as host code for naming a std name,
    "kFloatMax" undefined). A host constant naming what NVRTC lacks still goes."""
    text = (
        "#include <limits>\n#include <string>\n"
        "constexpr float kFloatMax = std::numeric_limits<float>::max();\n"
        'const std::string kName = "limits";\n'
        "template <typename T> struct Limits {};\n"
        "template <> struct Limits<float> {\n"
        "  static __device__ __host__ inline float getMax() { return kFloatMax; }\n};\n"
        "__global__ void k(float* p) { p[0] = Limits<float>::getMax(); }\n"
    )
    errors, with_resources = _check(tmp_path, text)
    assert errors == [] and with_resources == ["k"]
    unit = build_device_unit(text, tmp_path / "k.cu")
    assert "kFloatMax" in unit.text and "kName" not in unit.text
