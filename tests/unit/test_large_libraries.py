"""Large template libraries (CUTLASS/CuTe, CUB, Thrust): checked, not skipped (issue 28, item 5).

Small planted stand-ins for what CUTLASS-sized files need, not library code: an
execution-space macro defined in a header that the header using it includes, and a device
unit far bigger than a compile on every edit was allowed before.
"""

from __future__ import annotations

from pathlib import Path

from cuda_llm_lsp.compile.analysis import analyze
from cuda_llm_lsp.compile.device_unit import build_device_unit
from cuda_llm_lsp.config import Settings

VALUE_H = """\
#pragma once
#include "defs.h"
struct Value {
  float v;
  LIB_HD explicit Value(float x) : v(x) {}
  LIB_HD float get() const { return v; }
};
LIB_HD float twice(Value a) { return 2 * a.get(); }
"""
DEFS_H = "#pragma once\n#define LIB_HD __forceinline__ __device__ __host__\n"
KERNEL = '#include "value.h"\n__global__ void k(float* x) { x[0] = twice(Value(x[1])); }\n'


def _library(tmp_path: Path) -> Path:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "defs.h").write_text(DEFS_H)
    (tmp_path / "lib" / "value.h").write_text(VALUE_H)
    source = tmp_path / "k.cu"
    source.write_text(KERNEL)
    return source


def test_macro_from_a_header_the_header_includes_marks_its_functions_device(
    tmp_path: Path,
) -> None:
    # CUTLASS's `cutlass/tfloat32.h` uses CUTLASS_HOST_DEVICE, which a header it includes
    # defines: the header is blanked before its includes are read, so the macro was unknown
    source = _library(tmp_path)
    unit = build_device_unit(KERNEL, source, (str(tmp_path / "lib"),))
    value = unit.headers["value.h"]
    assert "explicit Value(float x) : v(x) {}" in value
    assert "LIB_HD float twice(Value a) { return 2 * a.get(); }" in value


def test_macro_from_a_header_the_header_includes_compiles_clean(tmp_path: Path) -> None:
    source = _library(tmp_path)
    settings = Settings(include_paths=(str(tmp_path / "lib"),))
    analysis = analyze(KERNEL, source, settings)
    assert analysis.errors == (), analysis.errors
    assert analysis.kernels[0].resources is not None


def test_member_function_whose_head_tree_sitter_cuts_short() -> None:
    # tree-sitter reads `HD explicit S(float)` as a member `HD explicit` then a headless
    # function: the device one is kept whole, the host one blanked whole (no `HOSTM explicit`
    # left dangling for NVRTC)
    source = (
        "#define HD __host__ __device__\n"
        "#define HOSTM __host__\n"
        "struct S {\n"
        "  float v;\n"
        "  HD explicit S(float x) : v(x) {}\n"
        "  HOSTM explicit S(char x) : v(x) {}\n"
        "  HD explicit operator double() const { return v; }\n"
        "};\n"
        "template <>\nstruct limits<tfloat32_t> {\n"
        "  HD\n"
        "  static tfloat32_t inf() noexcept { return tfloat32_t::bitcast(0x7f800000);}\n"
        "};\n"
    )
    lines = build_device_unit(source).text.split("\n")
    assert lines[4] == "  HD explicit S(float x) : v(x) {}"
    assert lines[5].strip() == ""
    assert lines[6] == "  HD explicit operator double() const { return v; }"
    # (this spelling) read as `HD static tfloat32_t;` and a headless `inf() {...}`
    assert lines[9:12] == source.split("\n")[9:12]


def test_include_through_a_header_naming_macro_is_followed(tmp_path: Path) -> None:
    # CUTLASS: `#define CUDA_STD_HEADER(header) <cuda/std/header>` then
    # `#include CUDA_STD_HEADER(type_traits)`; left out, every cuda::std name was an error
    (tmp_path / "cfg.h").write_text("#pragma once\n#define STD_HEADER(h) <cuda/std/h>\n")
    (tmp_path / "uses.h").write_text(
        "#pragma once\n#include STD_HEADER(type_traits) // libcu++\n"
        "__device__ inline int same() { return cuda::std::is_same<int, int>::value; }\n"
    )
    text = (
        '#include "cfg.h"\n#include "uses.h"\n#include STD_HEADER(limits)\n'
        "__global__ void k(int* x) { x[0] = same() + cuda::std::numeric_limits<int>::max(); }\n"
    )
    source = tmp_path / "k.cu"
    source.write_text(text)
    analysis = analyze(text, source, Settings())
    assert analysis.diagnostics == (), analysis.diagnostics
    assert analysis.kernels[0].resources is not None


def test_other_computed_includes_are_still_left_out_with_a_warning(tmp_path: Path) -> None:
    text = "#define PICK(h) MORE(h)\n#include PICK(x.h)\n#include NAME\n__global__ void k() {}\n"
    unit = build_device_unit(text, tmp_path / "k.cu")
    found = sorted((p.span.start.line, p.severity) for p in unit.problems)
    assert found == [(1, "warning"), (2, "warning")]
    assert not unit.text.split("\n")[1].strip() and not unit.text.split("\n")[2].strip()


def test_function_marked_constexpr_through_a_macro_is_kept(tmp_path: Path) -> None:
    # CUTLASS: `CUTLASS_CONSTEXPR_IF_CXX17 auto fp_encoding_selector() {...}`, used in a
    # `decltype`: blanked as a host function, its every use was a false error
    text = (
        "#define IF_CXX17 constexpr\n"
        "template <int N> struct Rep { static constexpr int bits = N; };\n"
        "template <int N> IF_CXX17 auto select() { return Rep<N * 8>{}; }\n"
        "template <int N> struct Value { using R = decltype(select<N>()); };\n"
        "__global__ void k(int* x) { x[0] = Value<4>::R::bits; }\n"
    )
    lines = build_device_unit(text).text.split("\n")
    assert lines[2] == "template <int N> IF_CXX17 auto select() { return Rep<N * 8>{}; }"
    source = tmp_path / "k.cu"
    source.write_text(text)
    analysis = analyze(text, source, Settings())
    assert analysis.errors == (), analysis.errors


def test_friend_function_after_a_macro_where_the_class_parse_broke() -> None:
    # CUTLASS's float_exmy_base: an `#if` inside a `using X =` breaks tree-sitter's reading of
    # the class, whose members then come as namespace-scope items; `HD friend bool f()` is read
    # as a member `HD friend` (its `;` missing) and a headless function
    source = (
        "#define HD __host__ __device__\n"
        "template <class T> struct B {\n"
        "  using R =\n"
        "    #if (NEW)\n"
        "      decltype(T())\n"
        "    #else\n"
        "      T\n"
        "    #endif\n"
        "      ;\n"
        "  using S =\n"
        "    #if (NEW)\n"
        "      decltype(T())\n"
        "    #else\n"
        "      typename T::type\n"
        "    #endif\n"
        "      ;\n"
        "  HD\n"
        "  friend bool operator==(B const &lhs, B const &rhs) { return true; }\n"
        "};\n"
    )
    lines = build_device_unit(source).text.split("\n")
    assert lines[16:18] == source.split("\n")[16:18]


def test_prototype_with_a_trailing_return_type_read_by_decltype_is_kept(tmp_path: Path) -> None:
    # CuTe: `auto has_tuple_size(T*) -> bool_constant<...>;`, declared only for decltype
    text = (
        "template <bool B> struct flag { static constexpr bool value = B; };\n"
        "template <class T> auto has_size(T*) -> flag<(sizeof(T) > 0)>;\n"
        "auto has_size(...) -> flag<false>;\n"
        "template <class T> struct sized : decltype(has_size((T*)0)) {};\n"
        "__global__ void k(int* x) { x[0] = sized<int>::value; }\n"
    )
    source = tmp_path / "k.cu"
    source.write_text(text)
    analysis = analyze(text, source, Settings())
    assert analysis.errors == (), analysis.errors


# 1,024 data-dependent statements: the front end reads them in well under a second, code
# generation takes ~20 s (a CUTLASS kernel's instantiation is as slow to generate)
SLOW = (
    "#define R1(s) s s s s\n#define R2(s) R1(R1(s))\n#define R3(s) R2(R2(s))\n"
    "__global__ void quick(float* x) { x[0] = 1.0f; }\n"
    "__global__ void slow(float* x) {\n"
    "  float a = x[0];\n"
    "  R3(R1(a = a * x[((int)a) & 7] + x[((int)(a * 3.0f)) & 15];))\n"
    "  x[1] = a;\n"
    "}\n"
)


def test_code_generation_past_the_limit_skips_resources_with_information(tmp_path: Path) -> None:
    source = tmp_path / "slow.cu"
    source.write_text(SLOW)
    analysis = analyze(SLOW, source, Settings(compile_timeout_s=4))
    assert analysis.errors == ()
    quick, slow = analysis.kernels
    assert quick.resources is not None
    assert slow.resources is None and slow.timed_out
    assert slow.symbol_note.startswith("resources skipped")
    [skipped] = [d for d in analysis.diagnostics if d.code == "resources-skipped"]
    assert skipped.severity == "information" and skipped.line == 5
    assert "took longer than 4 s" in skipped.message and "compileTimeoutS" in skipped.message
    assert analysis.compile is not None and analysis.compile.ok  # says nothing about the code
    # and one warning on line 1 naming it (issue 38: `check` prints no information notes)
    [late] = [d for d in analysis.diagnostics if d.code == "codegen-timeout"]
    assert (late.severity, late.line) == (
        "warning",
        1,
    ) and "code generation of slow " in late.message
    assert "took longer than 4 s" in late.message


def test_execution_space_chosen_by_a_conditional_before_the_function() -> None:
    # CUTLASS's half_t::convert: `#if ... __device__ __noinline__ #else HD #endif` then the
    # function; its head is the whole conditional
    source = (
        "#define HD __host__ __device__\n"
        "struct half_t {\n"
        "  unsigned short storage;\n"
        "  #if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ < 530)\n"
        "    __device__ __noinline__\n"
        "  #else\n"
        "    HD\n"
        "  #endif\n"
        "  static half_t convert(float const& flt) { return half_t(); }\n"
        "  #ifdef SOMETHING\n"
        "    int extra;\n"
        "  #endif\n"
        "  static half_t host_only(float const& flt) { return half_t(); }\n"
        "};\n"
    )
    lines = build_device_unit(source).text.split("\n")
    assert lines[3:9] == source.split("\n")[3:9]
    assert lines[10] == "    int extra;" and lines[12].strip() == ""


def test_header_constants_used_only_by_other_files_are_kept(tmp_path: Path) -> None:
    # CuTe's `template <class T> constexpr size_t tuple_size_v` is used by other headers, not
    # its own: dropped as unused, `cute::tuple_size_v` was a false error everywhere
    (tmp_path / "consts.h").write_text(
        "#pragma once\nconstexpr int kBlock = 256;\nconst float kUnused = 2.0f;\n"
        "template <class T> constexpr int size_v = sizeof(T);\n"
    )
    text = '#include "consts.h"\n__global__ void k(int* x) { x[0] = kBlock + size_v<int>; }\n'
    source = tmp_path / "k.cu"
    source.write_text(text)
    analysis = analyze(text, source, Settings())
    assert analysis.diagnostics == (), analysis.diagnostics
    assert analysis.kernels[0].resources is not None


def test_host_class_with_a_std_base_and_a_stream_operator_are_blanked(tmp_path: Path) -> None:
    # CUTLASS's util/exceptions.h: `class cuda_exception : public std::exception {...}` and
    # `inline std::ostream& operator<<(...)`: kept, each was an error from a host-only name
    (tmp_path / "exc.h").write_text(
        "#pragma once\n#include <stdexcept>\n#include <ostream>\n"
        "class failure : public std::exception {\n"
        " public:\n"
        "  int code;\n"
        "};\n"
        "inline std::ostream& operator<<(std::ostream& out, failure const& e) {\n"
        "  return out << e.what();\n"
        "}\n"
        "int& host_counter() { static int n = 0; return n; }\n"
    )
    text = '#include "exc.h"\n__global__ void k(int* x) { x[0] = 1; }\n'
    source = tmp_path / "k.cu"
    source.write_text(text)
    analysis = analyze(text, source, Settings())
    assert analysis.diagnostics == (), analysis.diagnostics
    header = build_device_unit(text, source).headers["exc.h"]
    assert "failure" not in header and "host_counter" not in header


def test_struct_with_an_alignment_macro_tree_sitter_misreads_is_kept() -> None:
    # CuTe: `template <...> struct CUTE_ALIGNAS(Alignment) array_aligned : cute::array<T,N> {};`
    # reads as a declaration `struct CUTE_ALIGNAS (Alignment)` with no `;`: not a host variable
    source = (
        "#define ALIGNAS(n) alignas(n)\n"
        "template <class T, int N> struct arr { T v[N]; };\n"
        "template <class T, int N, int Alignment = 16>\n"
        "struct ALIGNAS(Alignment) arr_aligned : arr<T,N> {};\n"
    )
    lines = build_device_unit(source).text.split("\n")
    assert lines[2:4] == source.split("\n")[2:4]


def test_header_named_like_a_toolkit_header_next_to_its_includer_keeps_one_name(
    tmp_path: Path,
) -> None:
    # CUTLASS's `cutlass/arch/mma_sm80.h` includes `"mma.h"` (its neighbour cutlass/arch/mma.h):
    # registered as `mma.h`, it shadowed the toolkit's <mma.h> and was read twice, once per name
    arch = tmp_path / "lib" / "arch"
    arch.mkdir(parents=True)
    (arch / "mma.h").write_text("#pragma once\nstruct OpMultiplyAdd {};\n")
    (arch / "mma_sm80.h").write_text(
        '#pragma once\n#include "mma.h"\nstruct Sm80 { OpMultiplyAdd op; };\n'
    )
    text = (
        "#include <mma.h>\n"
        '#include "arch/mma.h"\n'
        '#include "arch/mma_sm80.h"\n'
        "__global__ void k(float* x) {\n"
        "  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> acc;\n"
        "  nvcuda::wmma::fill_fragment(acc, 0.0f);\n"
        "  Sm80 s;\n"
        "  x[0] = acc.x[0] + sizeof(s.op);\n"
        "}\n"
    )
    source = tmp_path / "k.cu"
    source.write_text(text)
    lib = str(tmp_path / "lib")
    unit = build_device_unit(text, source, (lib,))
    assert "mma.h" not in unit.headers
    assert '#include "arch/mma.h"' in unit.headers["arch/mma_sm80.h"]
    analysis = analyze(text, source, Settings(include_paths=(lib,), arch="sm_80"))
    assert analysis.errors == (), analysis.errors


def test_member_of_a_class_only_nvcc_sees_is_blanked(tmp_path: Path) -> None:
    # CUTLASS's util/device_memory.h: the host class DeviceAllocation holds a
    # `platform::unique_ptr`, defined under `#if !defined(__CUDACC_RTC__)`: NVRTC never sees it
    (tmp_path / "plat.h").write_text(
        "#pragma once\n"
        "namespace plat {\n"
        "#if !defined(__CUDACC_RTC__)\n"
        "template <class T> class holder {\n"
        "  T* p;\n"
        " public:\n"
        "  ~holder() { delete p; }\n"
        "};\n"
        "#else\n"
        "template <class T> struct shown {};\n"
        "#endif\n"
        "}\n"
    )
    (tmp_path / "mem.h").write_text(
        "#pragma once\n"
        '#include "plat.h"\n'
        "template <class T> class Alloc {\n"
        " public:\n"
        "  int count;\n"
        "  plat::holder<T> owner;\n"
        "  plat::shown<T> kept;\n"
        "};\n"
    )
    text = '#include "mem.h"\n__global__ void k(int* x) { x[0] = sizeof(plat::shown<int>); }\n'
    source = tmp_path / "k.cu"
    source.write_text(text)
    header = build_device_unit(text, source).headers["mem.h"]
    assert "owner" not in header
    assert "int count;" in header and "plat::shown<T> kept;" in header
    analysis = analyze(text, source, Settings())
    assert analysis.errors == (), analysis.errors


ADAPTER_H = """\
#pragma once
#include "hd.h"
namespace lib {
struct Adapter {
  static constexpr int kMax = 4;
  int handles[kMax];
  int count = 0;
  int extra = 0;
  LIB_HOST_DEVICE Adapter() {}
  LIB_HOST_DEVICE
  Adapter(const Adapter & rhs)
      : count(rhs.count),
        extra(rhs.extra) {
    LIB_ASSERT(rhs.count >= 0 && rhs.count < kMax);
    for (int i = 0; i < rhs.count && i < kMax; ++i) {
      handles[i] = rhs.handles[i];
    }
  }
  LIB_HOST_DEVICE
  Adapter& operator=(const Adapter & rhs) {
    for (int i = 0; i < rhs.count && i < kMax; ++i) {
      handles[i] = rhs.handles[i];
    }
    return *this;
  }
};
}  // namespace lib
"""


def test_constructor_after_a_device_macro_with_two_initializers_is_kept(tmp_path: Path) -> None:
    # CUTLASS's CudaHostAdapter: tree-sitter read `MACRO Ctor(...) : a(x), b(y) {` as a member
    # with a bit-field, the class body broke, and `for (int32_t i = 0;` was blanked as a host
    # prototype: "identifier i is undefined"
    (tmp_path / "hd.h").write_text(
        "#pragma once\n#define LIB_HOST_DEVICE __host__ __device__\n#define LIB_ASSERT(x)\n"
    )
    (tmp_path / "adapter.h").write_text(ADAPTER_H)
    text = (
        '#include "adapter.h"\n'
        "__global__ void k(int* x) { lib::Adapter a; lib::Adapter b(a); x[0] = b.handles[0]; }\n"
    )
    source = tmp_path / "k.cu"
    source.write_text(text)
    header = build_device_unit(text, source).headers["adapter.h"]
    assert header.count("    for (int i = 0; i < rhs.count && i < kMax; ++i) {") == 2
    analysis = analyze(text, source, Settings())
    assert analysis.errors == (), analysis.errors


def test_static_assert_macro_misread_as_a_member_function_is_kept() -> None:
    # CuTe's `CUTE_STATIC_ASSERT_V(TiledNumThr{} % AtomNumThr{} == Int<0>{}, "...");` in a
    # class reads as a member function `M (TiledNumThr) {}`: blanking it left half a line
    source = (
        "#define ASSERT_V(x, ...) static_assert(decltype(x)::value, ##__VA_ARGS__)\n"
        "template <int N> struct Int { static constexpr bool value = N == 0; };\n"
        "using A = Int<0>;\n"
        "using B = Int<0>;\n"
        "struct Atom {};\n"
        "struct Tiled : Atom\n"
        "{\n"
        '  ASSERT_V(A{} % B{} == Int<0>{}, "too few threads");\n'
        "  __device__ int f() const { return 1; }\n"
        "};\n"
    )
    lines = build_device_unit(source).text.split("\n")
    assert lines[7] == source.split("\n")[7]


def test_host_member_with_an_if_inside_its_declarator_is_blanked(tmp_path: Path) -> None:
    # CUTLASS's cluster_launch.hpp: `static inline CUTLASS_HOST Status` then `#if ...`
    # `init(void const* f)` `#else` `init(void const*)` `#endif` and the body: tree-sitter read
    # no function, it was kept and NVRTC rejected the `__host__` function in JIT mode
    (tmp_path / "launch.h").write_text(
        "#pragma once\n"
        "struct Launcher {\n"
        "  static inline __host__\n"
        "  int\n"
        "#if defined(LAUNCH_ENABLED)\n"
        "  init(void const* kernel)\n"
        "#else\n"
        "  init(void const* /* kernel */)\n"
        "#endif\n"
        "  {\n"
        "    return 0;\n"
        "  }\n"
        "  __device__ static int lanes() { return 32; }\n"
        "};\n"
    )
    text = '#include "launch.h"\n__global__ void k(int* x) { x[0] = Launcher::lanes(); }\n'
    source = tmp_path / "k.cu"
    source.write_text(text)
    header = build_device_unit(text, source).headers["launch.h"]
    assert "init" not in header and "__device__ static int lanes()" in header
    analysis = analyze(text, source, Settings())
    assert analysis.errors == (), analysis.errors


def test_host_template_with_a_comment_after_its_parameters_is_blanked(tmp_path: Path) -> None:
    # CUTLASS's reference/host/tensor_compare.h: `typename Layout>  ///< Layout function` then
    # `std::pair<...> TensorFind(...)`: the comment was taken for the template's declaration
    (tmp_path / "find.h").write_text(
        "#pragma once\n"
        "#include <utility>\n"
        "template <\n"
        "  typename Element>   ///< Element type\n"
        "std::pair<bool, int> find(Element const* data, int n, Element value) {\n"
        "  for (int i = 0; i < n; ++i) { if (data[i] == value) return std::make_pair(true, i); }\n"
        "  return std::make_pair(false, 0);\n"
        "}\n"
    )
    text = '#include "find.h"\n__global__ void k(int* x) { x[0] = 1; }\n'
    source = tmp_path / "k.cu"
    source.write_text(text)
    assert "find(" not in build_device_unit(text, source).headers["find.h"]
    analysis = analyze(text, source, Settings())
    assert analysis.errors == (), analysis.errors


def test_class_alias_of_a_host_std_type_and_its_members_are_blanked(tmp_path: Path) -> None:
    # CUTLASS's reference/host/tensor_fill.h: `using engine_type = std::mt19937;` in a class,
    # then `engine_type rnd;`: NVRTC has no std::mt19937
    (tmp_path / "fill.h").write_text(
        "#pragma once\n"
        "#include <random>\n"
        "struct Filler {\n"
        "  int seed;\n"
        " private:\n"
        "  using engine_type = std::mt19937;\n"
        " public:\n"
        "  engine_type rnd;\n"
        "};\n"
    )
    text = '#include "fill.h"\n__global__ void k(int* x) { x[0] = sizeof(Filler); }\n'
    source = tmp_path / "k.cu"
    source.write_text(text)
    header = build_device_unit(text, source).headers["fill.h"]
    assert "mt19937" not in header and "rnd" not in header and "int seed;" in header
    analysis = analyze(text, source, Settings())
    assert analysis.errors == (), analysis.errors


# CuTe's shape (cute/container/array.hpp): std's tuple protocol declared again for an NVRTC
# that had none, in a form the toolkit's CCCL now declares otherwise
PAIR_H = """\
#pragma once
#include <cuda/std/tuple>
struct Pair { int a, b; };
namespace std {
#if defined(__CUDACC_RTC__)
template <class... _Tp>
struct tuple_size;

template <size_t _Ip, class... _Tp>
struct tuple_element;
#endif
template <> struct tuple_size<Pair> : cuda::std::integral_constant<size_t, 2> {};
template <size_t I> struct tuple_element<I, Pair> { using type = int; };
}  // namespace std
"""
PAIR_KERNEL = (
    "#include <lib/pair.h>\n__global__ void k(int* x) { x[0] = std::tuple_size<Pair>::value; }\n"
)


def _pair_library(tmp_path: Path, header: str, kernel: str = PAIR_KERNEL) -> Path:
    (tmp_path / "inc" / "lib").mkdir(parents=True)
    (tmp_path / "inc" / "lib" / "pair.h").write_text(header)
    source = tmp_path / "k.cu"
    source.write_text(kernel)
    return source


def test_nvrtc_only_std_forward_declaration_agrees_with_cccl(tmp_path: Path) -> None:
    # nvcc never reads the `__CUDACC_RTC__` branch; NVRTC stopped at it ("declaration is
    # incompatible with template parameter _Tp") in 40 CUTLASS files
    source = _pair_library(tmp_path, PAIR_H)
    settings = Settings(include_paths=(str(tmp_path / "inc"),))
    analysis = analyze(source.read_text(), source, settings)
    assert analysis.diagnostics == (), analysis.diagnostics
    assert analysis.kernels[0].resources is not None


def test_std_forward_declaration_nvcc_reads_too_is_still_an_error(tmp_path: Path) -> None:
    # outside an NVRTC-only branch nvcc reads it too (against libstdc++'s): a real error
    header = PAIR_H.replace("#if defined(__CUDACC_RTC__)\n", "").replace("#endif\n", "")
    source = _pair_library(tmp_path, header)
    settings = Settings(include_paths=(str(tmp_path / "inc"),))
    analysis = analyze(source.read_text(), source, settings)
    assert any(d.severity == "error" for d in analysis.diagnostics), analysis.diagnostics


def test_error_in_user_code_after_the_rewritten_declarations_is_reported(tmp_path: Path) -> None:
    kernel = PAIR_KERNEL.replace("x[0] =", "x[0] = undeclared_name +")
    source = _pair_library(tmp_path, PAIR_H, kernel)
    settings = Settings(include_paths=(str(tmp_path / "inc"),))
    analysis = analyze(source.read_text(), source, settings)
    found = [(d.line, d.message) for d in analysis.diagnostics]
    assert len(found) == 1 and found[0][0] == 2 and "undeclared_name" in found[0][1], found


# CUTLASS's tools/util host_tensor.h: `std::is_same_v` with only `<vector>` included
HOST_TENSOR_H = """\
#pragma once
#include <vector>
template <class T> struct HostTensor {
  using Unit = typename std::conditional_t<std::is_same_v<T, bool>, unsigned char, T>;
  std::vector<Unit> host;
};
"""


def test_host_header_brings_type_traits_as_under_nvcc(tmp_path: Path) -> None:
    # under nvcc <vector> includes libstdc++'s <type_traits>; dropped, its traits were
    # "namespace std has no member is_same_v"
    (tmp_path / "tensor.h").write_text(HOST_TENSOR_H)
    text = '#include "tensor.h"\n__global__ void k(HostTensor<bool>::Unit* x) { x[0] = 1; }\n'
    source = tmp_path / "k.cu"
    source.write_text(text)
    analysis = analyze(text, source, Settings())
    assert analysis.diagnostics == (), analysis.diagnostics
    assert analysis.kernels[0].resources is not None


def test_trait_no_header_brings_is_still_an_error(tmp_path: Path) -> None:
    text = "#include <vector>\n__global__ void k(int* x) { x[0] = std::is_nothing_v<int>; }\n"
    source = tmp_path / "k.cu"
    source.write_text(text)
    analysis = analyze(text, source, Settings())
    errors = [d for d in analysis.diagnostics if d.severity == "error"]
    assert errors and {d.line for d in errors} == {2}, errors
    # the missing name itself is a warning that names it (NVRTC's `std` is only part of the
    # host's: nvcc decides), and what follows from it on the line stays an error
    named = [d for d in analysis.diagnostics if "is_nothing_v" in d.message]
    assert [(d.line, d.severity) for d in named] == [(2, "warning")], named


# CUTLASS's relatively_equal.h: `cuda::std::abs` for NVRTC, from a <cuda/std/cmath> that an
# older libcu++ brought along and the toolkit's CCCL does not
CLOSE_H = """\
#pragma once
#include <cuda/std/cstdint>
template <class T> __host__ __device__ bool close(T a, T b) {
#if defined(__CUDACC_RTC__)
  using cuda::std::USED;
#else
  using std::abs;
#endif
  return abs(a - b) < T(1e-3);
}
"""
CLOSE_KERNEL = (
    '#include "close.h"\n__global__ void k(int* x, float* y) { x[0] = close(y[0], y[1]); }\n'
)


def test_nvrtc_only_using_of_a_cuda_std_math_function_reads_as_nvcc_does(tmp_path: Path) -> None:
    (tmp_path / "close.h").write_text(CLOSE_H.replace("USED", "abs"))
    source = tmp_path / "k.cu"
    source.write_text(CLOSE_KERNEL)
    analysis = analyze(CLOSE_KERNEL, source, Settings())
    assert analysis.diagnostics == (), analysis.diagnostics
    assert analysis.kernels[0].resources is not None


def test_nvrtc_only_using_of_an_unknown_cuda_std_name_is_still_an_error(tmp_path: Path) -> None:
    (tmp_path / "close.h").write_text(CLOSE_H.replace("USED", "no_such_function"))
    source = tmp_path / "k.cu"
    source.write_text(CLOSE_KERNEL)
    analysis = analyze(CLOSE_KERNEL, source, Settings())
    assert any("no_such_function" in d.message for d in analysis.diagnostics), analysis
