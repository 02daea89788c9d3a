"""The device unit: host code blanked with line numbers kept, includes resolved, headers handled."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_llm_lsp.compile.analysis import analyze
from cuda_llm_lsp.compile.device_unit import build_device_unit
from cuda_llm_lsp.config import Settings

HOST_FILE = """\
#include <vector>
#include <cstdio>
#include <cuda_runtime.h>
#define HD __host__ __device__
using namespace std;
static std::vector<float> cache;
int counter = 0;
const int kUnusedOnDevice = 7;
const int kBlock = 256;
struct Timer { Timer() { cudaEventCreate(&e); } cudaEvent_t e; __device__ int get() { return 1; } };
void prototype(std::vector<float>& v);
HD inline float twice(float x) { return 2 * x; }
__device__ float helper(float x) { return x + kBlock; }
__global__ void kernel(float* x) { x[0] = helper(twice(x[0])); }
namespace util { int host_only() { return 1; } __device__ int dev() { return 2; } }
extern "C" { void c_host() {} }
template <typename T> T host_template(T x) { return x; }
int main() {
  std::vector<float> h(kUnusedOnDevice);
  kernel<<<1, kBlock>>>(nullptr);
  return counter;
}
"""


def lines_of(unit_text: str) -> list[str]:
    return unit_text.split("\n")


def test_line_structure_is_kept_exactly() -> None:
    unit = build_device_unit(HOST_FILE)
    original = HOST_FILE.split("\n")
    blanked = lines_of(unit.text)
    assert len(blanked) == len(original)
    for before, after in zip(original, blanked, strict=True):
        assert len(after) == len(before)
        assert after.strip() == "" or after == before or set(after) - {" "} <= set(before)


def test_host_code_is_blanked_and_device_code_kept() -> None:
    unit = build_device_unit(HOST_FILE)
    text = lines_of(unit.text)
    assert text[0] == "#include <vector>"  # host-only: read as what it brings, <type_traits>
    assert unit.headers["vector"] == "#include <type_traits>\n"
    assert text[1] == "#include <cstdio>"  # served by a stand-in
    assert text[2] == "#include <cuda_runtime.h>"  # exists in the toolkit, NVRTC can read it
    assert text[5].strip() == ""  # std::vector variable
    assert text[6].strip() == ""  # host variable (NVRTC rejects them in JIT mode)
    assert text[7].strip() == ""  # constant only host code uses
    assert text[8] == "const int kBlock = 256;"  # constant device code uses
    assert "Timer()" not in text[9] and "__device__ int get()" in text[9]
    assert text[10].strip() == ""  # host prototype
    assert text[11].startswith("HD inline float twice")  # macro standing for __device__
    assert text[12].startswith("__device__ float helper")
    assert text[13].startswith("__global__ void kernel")
    assert "host_only" not in text[14] and "__device__ int dev()" in text[14]
    assert "c_host" not in text[15]
    assert text[16].strip() == ""
    assert all(line.strip() == "" for line in text[17:22])  # main with its <<<>>> launch


def test_quoted_include_resolved_relative_to_file_and_host_code_in_it_blanked(
    tmp_path: Path,
) -> None:
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "util.cuh").write_text(
        '#pragma once\n#include <vector>\n#include "deeper.cuh"\n'
        "void host_side(std::vector<int>& v) { v.clear(); }\n"
        "__device__ float scale(float x) { return x * 2; }\n"
    )
    (tmp_path / "inc" / "deeper.cuh").write_text("__device__ int deeper() { return 1; }\n")
    source = '#include "inc/util.cuh"\n__global__ void k(float* x) { x[0] = scale(x[0]); }\n'
    unit = build_device_unit(source, tmp_path / "k.cu")
    assert unit.problems == ()
    assert set(unit.headers) == {"inc/util.cuh", "deeper.cuh", "vector"}
    header = unit.headers["inc/util.cuh"].split("\n")
    assert header[1] == "#include <vector>" and header[3].strip() == ""
    assert header[4].startswith("__device__ float scale")
    assert unit.include_lines == {"inc/util.cuh": 0, "deeper.cuh": 0}
    assert unit.include_dirs[0] == str(tmp_path.resolve())


def test_include_found_through_configured_paths(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "common.cuh").write_text("#define FACTOR 3\n")
    unit = build_device_unit('#include "common.cuh"\n', tmp_path / "src" / "a.cu", [str(lib)])
    assert unit.problems == ()
    assert unit.headers["common.cuh"].startswith("#define FACTOR 3")


def test_missing_include_is_a_problem_on_its_line_not_a_crash(tmp_path: Path) -> None:
    source = '// header\n#include "nowhere.cuh"\n__global__ void k() {}\n'
    unit = build_device_unit(source, tmp_path / "a.cu")
    (problem,) = unit.problems
    assert problem.span.start.line == 1
    assert problem.span.slice(source) == '"nowhere.cuh"'
    assert "nowhere.cuh" in problem.message
    assert unit.text.split("\n")[1].strip() == ""  # NVRTC must not stop at it


def test_missing_nested_include_reported_on_the_top_level_include(tmp_path: Path) -> None:
    (tmp_path / "a.cuh").write_text('#include "gone.cuh"\n')
    unit = build_device_unit('\n#include "a.cuh"\n', tmp_path / "k.cu")
    (problem,) = unit.problems
    assert problem.span.start.line == 1 and "gone.cuh" in problem.message


@pytest.mark.parametrize(
    ("header", "package"),
    [
        ("cublas_v2.h", "cuda-toolkit[cublas]==13.*"),
        ("cusolverDn.h", "cuda-toolkit[cusolver]==13.*"),
        ("cufft.h", "cuda-toolkit[cufft]==13.*"),
        ("nccl.h", "nvidia-nccl-cu13"),
        ("cudnn.h", "nvidia-cudnn-cu13"),
    ],
)
def test_a_missing_toolkit_library_header_names_the_package_that_brings_it(
    header: str, package: str
) -> None:
    """Was: "cannot find <cublas_v2.h>" named no package (issue 41)."""
    unit = build_device_unit(f"#include <{header}>\n")
    if not unit.problems:
        pytest.skip(f"<{header}> is installed here")
    (problem,) = unit.problems
    assert f"cannot find <{header}>" in problem.message
    assert f"`pip install '{package}'` in the environment cuda-llm runs from" in problem.message


def test_a_header_that_only_resembles_a_library_names_no_package(tmp_path: Path) -> None:
    unit = build_device_unit("#include <cublasfoo.h>\n", include_paths=[str(tmp_path)])
    (problem,) = unit.problems
    assert "cannot find <cublasfoo.h>" in problem.message and "pip install" not in problem.message


def test_unknown_system_header_is_dropped_with_a_warning_saying_where_it_looked(
    tmp_path: Path,
) -> None:
    """A <...> header found nowhere is left out (NVRTC would stop at it) with a warning on its
    line naming the directories searched and how to add one; a host header (<omp.h>, which the
    host compiler has) is dropped silently."""
    text = "#include <omp.h>\n#include <curand_kernel_missing.h>\n"
    unit = build_device_unit(text, include_paths=[str(tmp_path)])
    (problem,) = unit.problems
    assert problem.severity == "warning" and problem.span.start.line == 1
    assert "cannot find <curand_kernel_missing.h>" in problem.message
    assert str(tmp_path) in problem.message and "-I" in problem.message
    assert "compile_commands.json" in problem.message
    assert unit.text.strip() == ""


def test_nul_bytes_and_non_ascii_keep_columns() -> None:
    source = "int host() { return 0; /* é */ } __device__ int d() { return 1; }\nchar\0x;\n"
    unit = build_device_unit(source)
    first = unit.text.split("\n")[0]
    assert len(first) == len(source.split("\n")[0])
    assert first.index("__device__") == source.index("__device__")
    assert "\0" not in unit.text


def test_unterminated_comment_or_string_does_not_crash() -> None:
    for source in ("__global__ void k() { /* never closed\n", 'const char* s = "open\n', "{{{{"):
        unit = build_device_unit(source)
        assert len(unit.text) == len(source.replace("\0", " "))


def test_no_path_gives_a_stable_name() -> None:
    assert build_device_unit("").name == "input.cu"
    assert build_device_unit("", Path("/x/y/kern.cu")).name == "kern.cu"


def test_quoted_toolkit_and_standard_headers_fall_back_to_system_search(tmp_path: Path) -> None:
    source = '#include "cuda_fp16.h"\n#include "vector"\n#include "math.h"\n'
    unit = build_device_unit(source, tmp_path / "a.cu")
    assert unit.problems == ()
    kept = unit.text.split("\n")
    assert kept[0] == '#include "cuda_fp16.h"' and kept[1].strip() == "" and kept[2] != ""


def test_every_prefix_of_the_examples_keeps_its_shape() -> None:
    """Half-typed files: whatever tree-sitter makes of them, lines and lengths never move."""
    examples = Path(__file__).resolve().parents[2] / "examples"
    for example in sorted(examples.glob("*.cu")):
        text = example.read_text()
        for cut in range(0, len(text), 37):
            prefix = text[:cut]
            unit = build_device_unit(prefix, example)
            assert [len(line) for line in unit.text.split("\n")] == [
                len(line) for line in prefix.split("\n")
            ], (example.name, cut)


def test_heads_tree_sitter_misreads_are_kept_for_nvrtc() -> None:
    source = (
        "struct __align__(16) Vec { float x, y; };\n"
        "struct Timer { Timer(); int a; };\n"
        "Timer::Timer() { a = 1; }\n"
    )
    lines = build_device_unit(source).text.split("\n")
    assert lines[0].startswith("struct __align__(16) Vec")  # parsed as a broken function
    assert lines[2].strip() == ""  # an out-of-class constructor is host code


def test_unterminated_host_function_is_blanked_to_the_end_unterminated_kernel_kept() -> None:
    kernel = "__global__ void k(float* x) {\n  x[0] = 1;\n}\n"
    typing_in_main = kernel + "int main() {\n  float* d;\n  cudaMalloc(&d, 4);\n  k<<<1, 1>>>(d);\n"
    lines = build_device_unit(typing_in_main).text.split("\n")
    assert lines[:3] == kernel.split("\n")[:3]
    assert all(line.strip() == "" for line in lines[3:])
    typing_in_kernel = "__global__ void k(float* x) {\n  int row = blockIdx.x;\n  if (row) {\n"
    assert build_device_unit(typing_in_kernel).text == typing_in_kernel


def test_execution_space_macros_from_user_headers(tmp_path: Path) -> None:
    (tmp_path / "macros.h").write_text(
        "#define HOST_FN __host__\n#define DEV_FN __device__ __forceinline__\n"
    )
    source = (
        '#include "macros.h"\n'
        "HOST_FN int host_side() { return 1; }\n"
        "DEV_FN float dev_side(float x) { return x; }\n"
    )
    lines = build_device_unit(source, tmp_path / "k.cu").text.split("\n")
    assert lines[1].strip() == ""
    assert lines[2].startswith("DEV_FN float dev_side")


def test_missing_device_library_header_is_a_warning() -> None:
    from cuda_llm_lsp.compile.headers import find_system_header

    if find_system_header("curand_kernel.h") is not None:
        pytest.skip("cuRAND headers are installed here")
    unit = build_device_unit("#include <curand_kernel.h>\n#include <vector>\n")
    (problem,) = unit.problems
    assert problem.severity == "warning" and problem.span.start.line == 0
    assert "curand" in problem.message


def test_kernels_with_attributes_tree_sitter_lacks_are_kept() -> None:
    source = (
        "__global__ void __cluster_dims__(2, 1, 1) k(float* x) { x[0] = 1; }\n"
        "__global__ void __maxnreg__(64) m(float* x) { x[0] = 2; }\n"
        "int host_only() { return 3; }\n"
    )
    lines = build_device_unit(source).text.split("\n")
    assert lines[:2] == source.split("\n")[:2]
    assert lines[2].strip() == ""


def test_one_parse_serves_the_kernels_and_the_unit_even_with_header_macros(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cuda_llm_lsp.compile.unit import masks
    from cuda_llm_lsp.source import kernels

    (tmp_path / "macros.h").write_text("#define DEV_FN __device__\n")
    source = '#include "macros.h"\nDEV_FN float f(float x) { return x; }\nint h() { return 1; }\n'
    parsed = kernels.parse_tree(source)
    calls: list[str] = []
    real = masks.parse_tree

    def counting(text: str):  # type: ignore[no-untyped-def]
        calls.append(text)
        return real(text)

    monkeypatch.setattr(masks, "parse_tree", counting)
    unit = build_device_unit(source, tmp_path / "k.cu", (), parsed)
    assert calls == ["#define DEV_FN __device__\n"]  # only the header is parsed again
    lines = unit.text.split("\n")
    assert lines[1].startswith("DEV_FN float f") and lines[2].strip() == ""
    assert unit.text == build_device_unit(source, tmp_path / "k.cu").text


def test_missing_device_library_inside_a_user_header_is_a_warning_too(tmp_path: Path) -> None:
    from cuda_llm_lsp.compile.headers import find_system_header

    if find_system_header("curand_kernel.h") is not None:
        pytest.skip("cuRAND headers are installed here")
    (tmp_path / "rng.cuh").write_text("#pragma once\n#include <curand_kernel.h>\n")
    unit = build_device_unit('\n#include "rng.cuh"\n', tmp_path / "k.cu")
    (problem,) = unit.problems
    assert problem.severity == "warning" and problem.span.start.line == 1
    assert 'included from "rng.cuh" line 2' in problem.message
    assert unit.headers["rng.cuh"].split("\n")[1] == "#include <curand_kernel.h>"
    assert "curandState" in unit.headers["curand_kernel.h"]  # the stand-in for its names


CUBLAS_FILE = """#include <cublas_v2.h>
struct Ctx { cublasHandle_t handle; float* workspace; };
__device__ Ctx* context;
__global__ void k(float* x) { x[threadIdx.x] = 1.0f; undeclared_here(); }
"""


def test_errors_naming_a_missing_librarys_types_point_at_its_include(tmp_path: Path) -> None:
    """A missing <cublas_v2.h>'s names (cublasHandle_t in a struct the device code keeps) are
    warnings pointing at the include, not errors of their own (was: a cascade of errors on a
    real file); an error about any other name stays an error."""
    from cuda_llm_lsp.compile.analysis import analyze_syntax
    from cuda_llm_lsp.config import Settings

    monkey = pytest.MonkeyPatch()
    monkey.setenv("CUDA_LLM_CACHE_DIR", str(tmp_path / "cache"))
    try:
        found = analyze_syntax(CUBLAS_FILE, tmp_path / "m.cu", Settings(arch="sm_90"))
    finally:
        monkey.undo()
    said = {d.message: d.severity for d in found.diagnostics}
    if not any("cannot find <cublas_v2.h>" in m for m in said):
        pytest.skip("<cublas_v2.h> is installed here")
    cublas = [m for m in said if '"cublasHandle_t"' in m]
    assert cublas and all(said[m] == "warning" for m in cublas), said
    assert all("a name of <cublas_v2.h>, which was not found: see line 1" in m for m in cublas)
    assert any('"undeclared_here"' in m and s == "error" for m, s in said.items()), said


def test_class_deriving_from_a_blanked_host_alias_is_blanked(tmp_path: Path) -> None:
    """An owning pointer's alias of `std::unique_ptr` is host code, blanked; a class deriving
    from it was kept, and NVRTC's "not a template" stopped the file's kernels' figures."""
    (tmp_path / "owners.h").write_text(
        "#pragma once\n#include <functional>\n#include <memory>\n"
        "template <typename T>\n"
        "using owner_base = std::unique_ptr<T, std::function<void(T*)>>;\n"
        "template <typename T>\n"
        "class dev_owner : public owner_base<T> {\n"
        " public:\n"
        "  explicit dev_owner(T* p) : owner_base<T>(p, [](T* q) { cudaFree(q); }) {}\n"
        "};\n"
        "class counted : public dev_owner<int> { public: int uses = 0; };\n"
        "struct plain { int n; };\n"
    )
    text = '#include "owners.h"\n__global__ void k(int* x) { x[0] = sizeof(plain); }\n'
    source = tmp_path / "k.cu"
    source.write_text(text)
    header = build_device_unit(text, source).headers["owners.h"]
    assert "dev_owner" not in header and "counted" not in header, header
    assert "struct plain { int n; };" in header
    analysis = analyze(text, source, Settings(arch="sm_90"))
    assert analysis.diagnostics == (), analysis.diagnostics
    assert analysis.kernels[0].resources is not None


# A host launcher whose per-device macro's argument holds an `if` block of launches through
# a macro (nvcc compiles it): tree-sitter ends the function's body at the `}` inside it
EARLY_CLOSED_BODY = """\
#define EACH_DEV(...) do { for (int dev = 0; dev < 2; dev++) { __VA_ARGS__; } } while (false)
#define PICK(f, ...) do { if (wide) { f<true>__VA_ARGS__; } else { f<false>__VA_ARGS__; } } \\
  while (false)
#define CHECKED(call, code) do { if ((call) != cudaSuccess) return code; } while (false)
__device__ int d_launched;
template <bool W> __global__ void fill(int* x, int n) { x[threadIdx.x] = W + n; }
__global__ void shift(int* x, int n) { x[threadIdx.x] += n; }
int parts_of(int n, int size) { return n / size; }
extern "C" {
int launch_all(int* x, const int* sizes, int n, bool wide) {
  const int blocks = n / 32, threads = 32;
  EACH_DEV(
    int first, count;
    if (parts_of(n, sizes[dev]) > 1) {
      PICK(fill, <<<blocks, threads>>>(
          x + dev * n, n));
      shift<<<blocks, threads>>>(
          x, n);
      shift<<<blocks, threads>>>(
          x, 2 * n);
      PICK(
          fill, <<<blocks, threads, 64 * sizeof(int)>>>(
              x + dev * n, n));
    }
  );
  int launched = 0;
  EACH_DEV(
    CHECKED(cudaMemcpyFromSymbol(&launched, d_launched, sizeof(launched)),
            -1);
  );
  return launched;
}
}  // extern "C"
__global__ void after(float* y) { y[threadIdx.x] *= 2.0f; }
"""


def test_rest_of_a_host_body_tree_sitter_closed_early_is_blanked(tmp_path: Path) -> None:
    source = tmp_path / "k.cu"
    source.write_text(EARLY_CLOSED_BODY)
    unit = lines_of(build_device_unit(EARLY_CLOSED_BODY, source).text)
    rest = ("int launched = 0;", "CHECKED(cudaMemcpyFromSymbol", "return launched;")
    assert not any(part in line for line in unit for part in rest), unit
    after = EARLY_CLOSED_BODY.split("\n").index(EARLY_CLOSED_BODY.split("\n")[-2])
    assert unit[after].startswith("__global__ void after"), unit  # line numbers kept
    analysis = analyze(EARLY_CLOSED_BODY, source, Settings(arch="sm_90"))
    assert analysis.errors == (), analysis.errors
    with_figures = [k.kernel.name for k in analysis.kernels if k.resources is not None]
    assert with_figures == ["shift", "after"], analysis.kernels


# NanoVDB's PNanoVDB.h (warp-lang 0.8.0): macros for `static const` and for the functions'
# execution space, each after a macro call without `;`, which tree-sitter reads together with
# the next line's first word into an ERROR node
SPECIFIER_MACROS_HEADER = """\
#define PN_STRUCT_TYPEDEF(X) typedef struct X X;
#define PN_STATIC_CONST static const
#if defined(__CUDACC__)
#define PN_FORCE_INLINE __host__ __device__ static __forceinline__
#else
#define PN_FORCE_INLINE static inline __attribute__((always_inline))
#endif
struct pn_sizes_t { unsigned root; unsigned leaf; };
PN_STRUCT_TYPEDEF(pn_sizes_t)

PN_STATIC_CONST pn_sizes_t pn_sizes[2] =
{
    {28, 80},
    {32, 96},
};
struct pn_acc_t { unsigned key; };
PN_STRUCT_TYPEDEF(pn_acc_t)

PN_FORCE_INLINE void pn_acc_init(pn_acc_t* acc) { acc->key = 7u; }
PN_STATIC_CONST unsigned pn_unused = 3u;
PN_FORCE_INLINE unsigned pn_leaf(int type) { return pn_sizes[type].leaf; }
PN_STRUCT_TYPEDEF(pn_acc_t)
PN_STATIC_CONST unsigned pn_scale = 3u;
"""


def test_specifier_and_device_macros_tree_sitter_left_out_of_their_items(tmp_path: Path) -> None:
    (tmp_path / "pn.h").write_text(SPECIFIER_MACROS_HEADER)
    source = tmp_path / "k.cu"
    text = (
        '#include "pn.h"\n'
        "__global__ void leaf(unsigned* out) {\n"
        "  pn_acc_t acc; pn_acc_init(&acc); out[0] = pn_scale * acc.key;\n"
        "}\n"
    )
    source.write_text(text)
    unit = build_device_unit(text, source)
    header = lines_of(unit.headers["pn.h"])
    # the table keeps its `static const` (a host constant: nvcc takes `pn_leaf`, which device
    # code never calls), the device functions their heads, the constant device code reads its
    # `static const`; the unused one goes whole, no `static const` left for what follows
    assert header[10].startswith("PN_STATIC_CONST pn_sizes_t pn_sizes[2]"), header
    assert header[18].startswith("PN_FORCE_INLINE void pn_acc_init"), header
    assert header[19].strip() == "", header
    assert header[20].startswith("PN_FORCE_INLINE unsigned pn_leaf"), header
    assert header[22].startswith("PN_STATIC_CONST unsigned pn_scale = 3u;"), header
    analysis = analyze(text, source, Settings(arch="sm_90"))
    assert analysis.errors == (), analysis.errors
    assert not [d for d in analysis.diagnostics if "unavailable" in d.message], analysis.diagnostics
    assert [k.resources is not None for k in analysis.kernels] == [True], analysis.kernels


# cuSPARSE's opaque types: `typedef CUSPARSE_DEPRECATED_TYPE_MSVC struct info* info_t ...;`
# where the MSVC macro is defined empty; `REAL` is empty in one branch, a type in the other
EMPTY_MACRO_TYPEDEF = """\
#if defined(_MSC_VER)
#define REAL double
#else
#define REAL
#endif
#define LIB_DEPRECATED_MSVC
struct info;
typedef LIB_DEPRECATED_MSVC
struct info* info_t;
float REAL scale = 2.0f;
"""


@pytest.mark.parametrize("in_header", [False, True], ids=["file", "header"])
def test_a_macro_defined_empty_is_read_as_nothing(tmp_path: Path, in_header: bool) -> None:
    """`#define API` alone stands for nothing: `typedef API struct s* s_t;` stays whole, not
    `typedef API struct` beside a host variable `s* s_t` blanked (NVRTC's "expected either a
    definition or a tag name"); a name another branch defines as a type is not masked."""
    kernel = "__global__ void k(info_t* p, float* o) { o[0] = p ? 1.0f : 0.0f; }\n"
    if in_header:
        (tmp_path / "lib.h").write_text(EMPTY_MACRO_TYPEDEF)
        text = '#include "lib.h"\n' + kernel
    else:
        text = EMPTY_MACRO_TYPEDEF + kernel
    source = tmp_path / "k.cu"
    source.write_text(text)
    unit = build_device_unit(text, source)
    body = unit.headers["lib.h"] if in_header else unit.text
    assert "struct info* info_t;" in body, body
    analysis = analyze(text, source, Settings(arch="sm_90"))
    assert analysis.errors == (), analysis.errors
    assert [k.resources is not None for k in analysis.kernels] == [True], analysis.kernels
