"""Each root cause of false errors on real projects' files (issue #28), planted small.

Every file here is one that nvcc compiles cleanly with the flags given; the fast tier must
report no error on it. Each test failed before its fix.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_llm_lsp.compile.analysis import FileAnalysis, analyze
from cuda_llm_lsp.compile.project_config import find_flags
from cuda_llm_lsp.config import Settings, settings_from_mapping


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_LLM_CACHE_DIR", str(tmp_path / "cache"))


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")


def check(path: Path, **settings: object) -> FileAnalysis:
    return analyze(path.read_text(encoding="utf-8"), path, Settings(arch="sm_90", **settings))  # type: ignore[arg-type]


def messages(analysis: FileAnalysis) -> list[str]:
    return [f"{d.line}: {d.message}" for d in analysis.errors]


KERNEL = "__global__ void k(float* o) { o[threadIdx.x] = twice(o[threadIdx.x]); }\n"


def test_angle_include_of_a_project_header_found_through_dash_i_is_blanked(tmp_path: Path) -> None:
    """cuda-samples' `#include <helper_cuda.h>` with -I Common: its host includes and host
    functions must not reach NVRTC raw (was: cannot open source file "fstream")."""
    write(tmp_path, {
        "common/helper.h": "#pragma once\n#include <fstream>\n#include <string>\n"
        "inline bool save(const std::string& p) { std::ofstream f(p); return f.good(); }\n"
        "__device__ inline float twice(float x) { return 2.0f * x; }\n",
        "src/main.cu": "#include <helper.h>\n" + KERNEL + "int main() { return save(\"x\"); }\n",
    })  # fmt: skip
    analysis = check(tmp_path / "src/main.cu", include_paths=(str(tmp_path / "common"),))
    assert messages(analysis) == []
    assert analysis.kernels[0].resources is not None


def test_file_is_declared_by_the_stdio_stand_in(tmp_path: Path) -> None:
    """cublasLt.h and cusparse.h name FILE* once <stdio.h> is included (was: FILE undefined)."""
    write(tmp_path, {
        "main.cu": "#include <stdio.h>\n#include <cstdio>\n"
        "struct Sink { FILE* out; std::FILE* err; int level; };\n"
        "__global__ void k(Sink s, int* o) { o[0] = s.level; }\n",
    })  # fmt: skip
    assert messages(check(tmp_path / "main.cu")) == []


def test_glibc_short_names_and_stdint_types_need_no_include(tmp_path: Path) -> None:
    """nvcc's host headers declare uint/ushort/ulong and uint8_t for every file."""
    write(tmp_path, {
        "main.cu": "#include <vector>\n"
        "__global__ void k(uint n, ushort s, ulong z, uint8_t* b, int64_t* w) {\n"
        "  if (threadIdx.x < n) b[threadIdx.x] = (uint8_t)(s + z + w[0]);\n}\n",
    })  # fmt: skip
    analysis = check(tmp_path / "main.cu")
    assert messages(analysis) == [] and analysis.kernels[0].resources is not None


def test_a_compile_past_the_time_limit_is_a_warning_not_an_error(tmp_path: Path) -> None:
    """A busy machine must not turn a clean file red: the diagnostics are skipped, said so."""
    doubling = "".join(f"#define X{i + 1} X{i} X{i}\n" for i in range(30))
    write(tmp_path, {"slow.cu": "#define X0 x = x + 1;\n" + doubling
                     + "__global__ void k(int* o) { int x = 0; X22 o[0] = x; }\n"})  # fmt: skip
    analysis = check(tmp_path / "slow.cu", compile_timeout_s=1)
    assert analysis.errors == ()
    (skipped,) = [d for d in analysis.diagnostics if d.severity == "warning"]
    assert skipped.message.startswith("diagnostics skipped: NVRTC took longer than 1 s")


def test_host_only_struct_members_in_a_user_header_are_blanked(tmp_path: Path) -> None:
    """llm.c's logger: a struct with a glob_t and a struct timeval member (was: glob_t
    undefined, incomplete type timeval)."""
    write(tmp_path, {
        "logger.h": "#pragma once\n#include <glob.h>\n#include <stdio.h>\n#include <sys/time.h>\n"
        "typedef struct {\n  FILE* file;\n  glob_t matches;\n  struct timeval started;\n"
        "  int step;\n} Logger;\n"
        "struct Timer { struct timespec t0; double total; };\n"
        "__device__ inline float twice(float x) { return 2.0f * x; }\n",
        "main.cu": '#include "logger.h"\n' + KERNEL,
    })  # fmt: skip
    analysis = check(tmp_path / "main.cu")
    assert messages(analysis) == [] and analysis.diagnostics == ()


def test_the_dialect_is_selectable(tmp_path: Path) -> None:
    """torch 2.x headers need C++20; NVRTC was fixed at C++17."""
    write(tmp_path, {
        "main.cu": "#if __cplusplus < 202002L\n#error needs C++20\n#endif\n"
        "__global__ void k(int* o) { o[0] = 1; }\n",
    })  # fmt: skip
    assert messages(check(tmp_path / "main.cu")) == ["2: #error directive: needs C++20"]
    assert messages(check(tmp_path / "main.cu", std="c++20")) == []
    chosen, problems = settings_from_mapping({"cudaLlm": {"std": "c++20"}})
    assert chosen.std == "c++20" and problems == []
    kept, problems = settings_from_mapping({"cudaLlm": {"std": "c++99"}})
    assert kept.std is None and "cudaLlm.std" in problems[0]


def test_cuda_h_types_are_usable_in_device_code(tmp_path: Path) -> None:
    write(tmp_path, {
        "main.cu": "#include <cuda.h>\n"
        "__global__ void k(CUtexObject t, float* o) { o[0] = tex1Dfetch<float>(t, 0); }\n",
    })  # fmt: skip
    analysis = check(tmp_path / "main.cu")
    assert messages(analysis) == [] and analysis.kernels[0].resources is not None


def test_a_header_reached_under_two_spellings_keeps_its_directory(tmp_path: Path) -> None:
    """`"sub/b.h"` from the file and `"b.h"` from sub/a.h: NVRTC must get the blanked text
    under both names, not read sub/b.h raw (host code, host includes) under the second."""
    write(tmp_path, {
        "sub/a.h": '#pragma once\n#include "b.h"\n',
        "sub/b.h": '#pragma once\n#include <vector>\n#include "c.h"\n'
        "inline std::vector<int> host_only() { return {}; }\n",
        "sub/c.h": "#pragma once\n__device__ inline float twice(float x) { return 2.0f * x; }\n",
        "main.cu": '#include "sub/a.h"\n#include "sub/b.h"\n' + KERNEL,
    })  # fmt: skip
    analysis = check(tmp_path / "main.cu")
    assert messages(analysis) == [] and analysis.kernels[0].resources is not None


PROJECT = {
    "include/lib/ops.cuh": "#pragma once\n#include <iostream>\n#ifndef SCALE\n"
    "#error SCALE must come from the build\n#endif\n"
    "__device__ inline float twice(float x) { return SCALE * x; }\n",
    "src/k.cu": "#include <lib/ops.cuh>\n#if __cplusplus < 202002L\n#error needs C++20\n#endif\n"
    "#ifdef BROKEN\n#error BROKEN must be undefined\n#endif\n" + KERNEL,
}


def test_compile_commands_json_gives_the_files_flags(tmp_path: Path) -> None:
    """The file's own entry: -I (relative to its directory), -D then -U, -std, -gencode;
    the rest is ignored and named."""
    write(tmp_path, PROJECT)
    command = (
        "/usr/local/cuda/bin/nvcc -I../include -DSCALE=3 -DBROKEN -UBROKEN -O3 "
        "--use_fast_math -std=c++20 -gencode arch=compute_80,code=sm_80 "
        "-gencode arch=compute_90,code=sm_90 -x cu -c ../src/k.cu -o k.o"
    )
    entry = {"directory": str(tmp_path / "build"), "file": "../src/k.cu", "command": command}
    write(tmp_path, {"build/compile_commands.json": json.dumps([entry])})
    source = tmp_path / "src/k.cu"
    assert messages(check(source)) == []  # found in the ancestor's build/
    flags = find_flags(source)
    assert flags is not None and flags.std == "c++20" and flags.arch == "sm_90"
    assert flags.include_paths == (str(tmp_path / "include"),)
    assert flags.defines == ("SCALE=3",)
    assert "-O3" in flags.ignored and "--use_fast_math" in flags.ignored
    # a header has no entry: the entry of a file that includes it
    header = find_flags(tmp_path / "include/lib/ops.cuh")
    assert header is not None and "which includes it" in header.source
    # an explicit --std wins over the project's
    assert messages(check(source, std="c++17")) == ["3: #error directive: needs C++20"]


def test_compile_flags_txt_and_an_explicit_build_dir(tmp_path: Path) -> None:
    write(tmp_path, PROJECT)
    write(tmp_path, {"compile_flags.txt": "-Iinclude\n-DSCALE=2\n--std=c++20\n-Wall\n"})
    assert messages(check(tmp_path / "src/k.cu")) == []
    # -p: a build directory elsewhere, whose entry wins over compile_flags.txt
    elsewhere = tmp_path / "out"
    entry = {"directory": str(tmp_path), "file": "src/k.cu",
             "arguments": ["nvcc", "-Iinclude", "-std=c++17", "-c", "src/k.cu"]}  # fmt: skip
    write(elsewhere, {"compile_commands.json": json.dumps([entry])})
    broken = check(tmp_path / "src/k.cu", compile_commands_dir=str(elsewhere))
    assert "SCALE must come from the build" in " ".join(messages(broken))  # no -DSCALE there


def test_a_malformed_compile_commands_json_is_ignored(tmp_path: Path) -> None:
    write(tmp_path, {"compile_commands.json": "{not json", "main.cu": "__global__ void k() {}\n"})
    assert find_flags(tmp_path / "main.cu") is None
    assert check(tmp_path / "main.cu").diagnostics == ()


def test_kernels_keep_their_resources_when_another_kernel_has_an_error(tmp_path: Path) -> None:
    """An error in one kernel's body costs no other kernel its figures (was: all unknown)."""
    write(tmp_path, {
        "main.cu": "__device__ float twice(float x) { return 2.0f * x; }\n"
        "__global__ void good1(float* o) { o[threadIdx.x] = twice(o[threadIdx.x]); }\n"
        "__global__ void bad(float* o) { o[0] = undefined_name; }\n"
        "template <int N> __global__ void good2(float* o) { o[threadIdx.x % N] = 1.0f; }\n"
        "int main() { good2<4><<<1, 1>>>(nullptr); }\n",
    })  # fmt: skip
    analysis = check(tmp_path / "main.cu")
    assert messages(analysis) == ['3: identifier "undefined_name" is undefined']
    figures = {k.kernel.name: k.resources for k in analysis.kernels}
    assert figures["good1"] is not None and figures["good2"] is not None
    assert figures["bad"] is None
    # an error outside every kernel (a helper they share) still leaves them all unknown
    (tmp_path / "main.cu").write_text(
        (tmp_path / "main.cu").read_text().replace("undefined_name", "1.0f").replace("* x;", "* y;")
    )
    assert all(k.resources is None for k in check(tmp_path / "main.cu").kernels)


def test_kernels_of_an_included_header_that_the_file_launches_are_listed(tmp_path: Path) -> None:
    """SGEMM_CUDA's runner.cu: every kernel lives in a header and is launched with a host
    function's local constants as template arguments (was: "no kernels")."""
    write(tmp_path, {
        "kernels/naive.cuh": "#pragma once\n"
        "__global__ void naive(float* o) { o[threadIdx.x] = 1.0f; }\n",
        "kernels/tiled.cuh": "#pragma once\n#include <cstdio>\n"
        "template <const int BM, const int BN>\n"
        "__global__ void tiled(float* o) {\n  __shared__ float s[BM * BN];\n"
        "  s[threadIdx.x] = o[threadIdx.x];\n  __syncthreads();\n  o[threadIdx.x] = s[BM];\n}\n"
        "template <int N> __global__ void never(float* o) { o[0] = N; }\n",
        "kernels.cuh": '#pragma once\n#include "kernels/naive.cuh"\n#include "kernels/tiled.cuh"\n',
        "runner.cu": '#include "kernels.cuh"\nconst int WIDE = 64;\n'
        "void run(float* o, int m) {\n  naive<<<1, 32>>>(o);\n  if (m > 64) {\n"
        "    const uint BM = 32;\n    tiled<BM, WIDE><<<1, 32>>>(o);\n  } else {\n"
        "    const uint BM = 16;\n    constexpr int HALF = BM / 2;\n"
        "    tiled<HALF, WIDE><<<1, 32>>>(o);\n  }\n}\n",
    })  # fmt: skip
    analysis = check(tmp_path / "runner.cu")
    assert messages(analysis) == [] and analysis.kernels == ()
    listed = {h.info.kernel.name: h for h in analysis.header_kernels}
    assert set(listed) == {"naive", "tiled"}  # `never` is instantiated by nobody
    assert listed["naive"].header == "kernels/naive.cuh" and listed["naive"].include_line == 1
    assert listed["naive"].info.resources is not None
    tiled = listed["tiled"].info.instances
    assert list(tiled) == ["tiled<32, 64>", "tiled<(16 / 2), 64>"]
    assert [r.shared_bytes for r in tiled.values()] == [32 * 64 * 4, 8 * 64 * 4]


def test_platform_code_of_cuda_samples_helpers(tmp_path: Path) -> None:
    """cuda-samples' helper_multiprocess.h and multithreading.h, reduced: a typedef of a host
    type, `#error` unless a platform macro is set (nvcc's device pass has the host's), Windows
    headers under `#if _WIN32` (no "cannot find" warning: nvcc never reads them), and an explicit
    instantiation of a host template (was: "reduce is not a template")."""
    write(tmp_path, {
        "platform.h": "#pragma once\n#if defined(_WIN32)\n#include <windows.h>\n"
        "#include <tchar.h>\ntypedef HANDLE Thread;\n#else\n#include <pthread.h>\n"
        "typedef pthread_t Thread;\ntypedef pid_t Process;\n#endif\n"
        "#if defined(__linux__)\n#define ADD(a, x) __sync_add_and_fetch(a, x)\n#else\n"
        "#error Unsupported system\n#endif\n",
        "main.cu": '#include "platform.h"\n'
        "template <class T> __global__ void k(T* o) { o[0] = 1; }\n"
        "template <class T> void reduce(T* o) { k<T><<<1, 1>>>(o); }\n"
        "template void reduce<int>(int* o);\ntemplate void reduce<float>(float* o);\n",
    })  # fmt: skip
    analysis = check(tmp_path / "main.cu")
    assert analysis.diagnostics == ()


def test_a_failing_static_assert_in_a_launched_header_template_is_reported(
    tmp_path: Path,
) -> None:
    """Only the file's launch instantiates the header's kernel: the fast tier reports it too
    (was: missed, as the issue's planted errors showed)."""
    write(tmp_path, {
        "kern.cuh": "#pragma once\ntemplate <int N> __global__ void k(float* o) {\n"
        '  static_assert(N % 2 == 0, "N must be even");\n  o[0] = N;\n}\n',
        "main.cu": '#include "kern.cuh"\nint main() { k<3><<<1, 1>>>(nullptr); return 0; }\n',
    })  # fmt: skip
    (error,) = check(tmp_path / "main.cu").errors
    assert error.line == 1 and 'static assertion failed with "N must be even"' in error.message
    write(tmp_path, {"main.cu": '#include "kern.cuh"\nint main() { k<4><<<1, 1>>>(nullptr); }\n'})
    assert check(tmp_path / "main.cu").errors == ()


def test_a_host_callback_with_a_calling_convention_macro_is_blanked(tmp_path: Path) -> None:
    """cuda-samples' `void CUDART_CB myStreamCallback(...)`: tree-sitter misreads the head;
    the calling convention says host (was: its host calls reported undefined)."""
    write(tmp_path, {
        "main.cu": "#include <cuda_runtime.h>\nvoid start(void* p);\nvoid report(cudaError_t e);\n"
        "void CUDART_CB callback(cudaStream_t s, cudaError_t e, void* data) {\n"
        "  report(e);\n  start(data);\n}\n"
        "__global__ void k(int* o) { o[0] = 1; }\n",
    })  # fmt: skip
    assert messages(check(tmp_path / "main.cu")) == []


def test_an_aligned_anonymous_struct_in_a_union_keeps_the_unions_members(tmp_path: Path) -> None:
    """cuda-samples' dct8x8: `struct __align__(8) {...};` inside a union made tree-sitter end
    the union early, and its next member was blanked as a host variable (was: union
    "PackedShorts" has no member "hInt")."""
    write(tmp_path, {
        "main.cu": "union Packed {\n  struct __align__(8) {\n    short lo;\n    short hi;\n  };\n"
        "  unsigned int whole;\n};\n"
        "__global__ void k(unsigned int* v, short* o) {\n"
        "  Packed p;\n  p.whole = v[0];\n  o[0] = p.lo + p.hi;\n}\n",
    })  # fmt: skip
    analysis = check(tmp_path / "main.cu")
    assert messages(analysis) == [] and analysis.kernels[0].resources is not None


def test_the_device_runtime_api_is_declared_as_nvcc_declares_it(tmp_path: Path) -> None:
    """cuda-samples' graphConditionalNodes: nvcc declares cudaGraphSetConditional for device
    code through cuda_runtime.h, NVRTC only with -rdc (was: identifier undefined)."""
    write(tmp_path, {
        "main.cu": "#include <cuda_runtime.h>\n"
        "__global__ void k(cudaGraphConditionalHandle h, const int* n) {\n"
        "  cudaGraphSetConditional(h, n[0] > 0 ? 1 : 0);\n}\n",
    })  # fmt: skip
    analysis = check(tmp_path / "main.cu")
    assert messages(analysis) == [] and analysis.kernels[0].resources is not None


def test_a_constant_that_only_an_included_header_uses_is_kept(tmp_path: Path) -> None:
    """cuda-samples' dwtHaar1D: the .cu defines `LOG_NUM_BANKS` for the kernel header it
    includes next; no kept code of the file itself names it (was: identifier undefined)."""
    write(tmp_path, {
        "kernel.cuh": "__global__ void k(float* o) { o[threadIdx.x >> SHIFT] = 1.0f; }\n",
        "main.cu": "#include <vector>\nconst unsigned int SHIFT = 4;\n"
        "const unsigned int UNUSED = 16;\n"
        '#include "kernel.cuh"\n'
        "int main() { std::vector<float> v(UNUSED); return (int)v.size(); }\n",
    })  # fmt: skip
    analysis = check(tmp_path / "main.cu")
    assert messages(analysis) == [] and analysis.diagnostics == ()


def test_a_namespace_scope_macro_list_of_host_declarations_is_blanked(tmp_path: Path) -> None:
    """cuda-samples' EGL interop: `EXTENSION_LIST(EXTLST_DECL)` declares host function pointers
    of types from host headers the unit drops (was: PFNEGLCREATEIMAGEKHRPROC undefined). An
    invocation whose expansion is device code stays, and its errors are still reported."""
    write(tmp_path, {
        "ext.h": "#pragma once\n#include <pthread.h>\n"
        "#define HOST_LIST(T) T(pthread_mutex_t, lock) T(pthread_cond_t, ready)\n"
        "#define DECLARE(tx, x) tx my_##x;\n#define EXTERN(tx, x) extern tx my_##x;\n"
        "#define KERNEL(name, body) __global__ void name(float* o) { body; }\n",
        "main.cu": '#include "ext.h"\n#if defined(HOST_LIST)\nHOST_LIST(DECLARE)\n#endif\n'
        "HOST_LIST(EXTERN)\nKERNEL(k, o[0] = 1.0f)\n"
        "int main() { return pthread_mutex_lock(&my_lock); }\n",
    })  # fmt: skip
    analysis = check(tmp_path / "main.cu")
    assert messages(analysis) == [] and analysis.diagnostics == ()
    write(tmp_path, {"main.cu": '#include "ext.h"\nHOST_LIST(DECLARE)\nKERNEL(k, o[0] = nope)\n'})
    (error,) = check(tmp_path / "main.cu").errors
    assert error.line == 3 and 'identifier "nope" is undefined' in error.message


def test_a_struct_declared_under_extern_c_is_kept(tmp_path: Path) -> None:
    """numba-cuda's nrt.cuh: `extern "C" struct MemInfo {...};` is a type, not a host variable
    (was: pointer or reference to incomplete type "MemInfo"). An error in it is reported."""
    write(tmp_path, {
        "nrt.cuh": 'extern "C"\nstruct MemInfo {\n  void* data;\n  size_t size;\n};\n'
        "typedef struct MemInfo NRT_MemInfo;\n",
        "main.cu": '#include "nrt.cuh"\n'
        'extern "C" __device__ void init(NRT_MemInfo* mi) { mi->data = 0; mi->size = 1; }\n',
    })  # fmt: skip
    analysis = check(tmp_path / "main.cu")
    assert messages(analysis) == []
    write(tmp_path, {"nrt.cuh": 'extern "C" struct MemInfo {\n  void* data;\n  nope size;\n};\n'
                     "typedef struct MemInfo NRT_MemInfo;\n"})  # fmt: skip
    assert any('"nope" is undefined' in m for m in messages(check(tmp_path / "main.cu")))


THRUST_USER = (
    "#include <thrust/device_vector.h>\n#include <thrust/transform.h>\n"
    "struct saxpy : public thrust::binary_function<float, float, float> {\n"
    "  float a;\n"
    "  __host__ __device__ float operator()(float x, float y) const { return a * x + y; }\n"
    "};\n"
    "struct dot {\n  template <typename T>\n"
    "  __host__ __device__ float operator()(T t) { return thrust::get<0>(t) * 2.0f; }\n"
    "};\n"
)


def test_user_code_naming_thrust_is_skipped_with_a_note(tmp_path: Path) -> None:
    """Thrust's headers are dropped (NVRTC cannot compile them): a functor deriving from
    `thrust::binary_function` or calling `thrust::get` is left out with a note, not reported
    (was: name followed by "::" must be a class or namespace name). A real error elsewhere is
    still reported, and so is `thrust::` in a file that includes no Thrust header."""
    kernel = "__global__ void k(float* o) { o[threadIdx.x] = BODY; }\n"
    main = "int main() { thrust::device_vector<float> v(4); return 0; }\n"
    write(tmp_path, {"main.cu": THRUST_USER + kernel.replace("BODY", "1.0f") + main})
    analysis = check(tmp_path / "main.cu")
    assert messages(analysis) == [] and analysis.kernels[0].resources is not None
    notes = [d for d in analysis.diagnostics if d.severity == "information"]
    assert [d.line for d in notes] == [3, 7] and "nvcc check, on open and save" in notes[0].message
    write(tmp_path, {"main.cu": THRUST_USER + kernel.replace("BODY", "nope") + main})
    (error,) = check(tmp_path / "main.cu").errors
    assert error.line == 11 and '"nope" is undefined' in error.message
    write(tmp_path, {"main.cu": "__device__ float f(float x) { return thrust::abs(x); }\n"})
    assert check(tmp_path / "main.cu").errors


def test_what_needs_a_skipped_thrust_item_is_skipped_too(tmp_path: Path) -> None:
    """Thrust's range_view.cu: a class template whose typedefs name `thrust::iterator_traits`
    is left out, and so is a header function returning it (was: range_view is not a template);
    a kernel that needs neither is still compiled, and its own error reported."""
    write(tmp_path, {
        "view.cuh": "#pragma once\n#include <thrust/iterator/iterator_traits.h>\n"
        "template <class It> struct view {\n"
        "  typedef typename thrust::iterator_traits<It>::value_type value_type;\n  It first;\n};\n",
        "main.cu": '#include "view.cuh"\n'
        "template <class It> __host__ __device__ view<It> make_view(It first) {\n"
        "  return view<It>{first};\n}\n"
        "__global__ void k(float* o) { o[threadIdx.x] = BODY; }\n",
    })  # fmt: skip
    main = (tmp_path / "main.cu").read_text()
    (tmp_path / "main.cu").write_text(main.replace("BODY", "1.0f"))
    analysis = check(tmp_path / "main.cu")
    assert messages(analysis) == [] and analysis.kernels[0].resources is not None
    (note,) = [d for d in analysis.diagnostics if d.severity == "information"]
    assert note.line == 2 and "view, which needs thrust" in note.message
    (tmp_path / "main.cu").write_text(main.replace("BODY", "nope"))
    (error,) = check(tmp_path / "main.cu").errors
    assert error.line == 5 and '"nope" is undefined' in error.message


def test_a_user_header_extending_namespace_thrust_is_compiled(tmp_path: Path) -> None:
    """CuPy's complex.h opens namespace thrust with THRUST_NAMESPACE_BEGIN from Thrust's config
    header (macros only, which NVRTC compiles: kept) and defines `thrust::complex` there: code
    naming it is compiled, not left out; code naming Thrust's own `thrust::less` is (was:
    identifier "THRUST_NAMESPACE_END" is undefined)."""
    write(tmp_path, {
        "cx.h": "#pragma once\n#include <thrust/detail/config/namespace.h>\n"
        "THRUST_NAMESPACE_BEGIN\ntemplate <class T> struct cx { T re; };\nTHRUST_NAMESPACE_END\n",
        "main.cu": '#include "cx.h"\n#include <thrust/sort.h>\n'
        "template <class T> struct pick { using type = thrust::less<T>; };\n"
        "__global__ void k(thrust::cx<float>* o) { o[threadIdx.x].re = 1.0f; }\n",
    })  # fmt: skip
    analysis = check(tmp_path / "main.cu")
    assert messages(analysis) == []
    assert [d.line for d in analysis.diagnostics if d.severity == "information"] == [3]
    main = (tmp_path / "main.cu").read_text()
    (tmp_path / "main.cu").write_text(main.replace("].re", "].nope"))
    (error,) = check(tmp_path / "main.cu").errors
    assert error.line == 4 and 'no member "nope"' in error.message


def test_a_host_function_in_a_misread_region_ends_at_its_brace(tmp_path: Path) -> None:
    """CuPy's cupy_thrust.cu: `#ifdef`s among a call's arguments make tree-sitter misread the
    rest of the file; a host member template there was blanked to the end of the file (its
    class's head left: expected a "}" at the end of the file), kernels after it with it.
    Now it ends at its own `}`: what follows is still compiled, its errors reported."""
    call = (
        "        fill(v.begin(),\n#ifdef OTHER\n             other::make<size_t>(0),\n#else\n"
        "             make<size_t>(0),\n#endif\n             n);\n"
    )
    write(tmp_path, {"main.cu": "#include <vector>\nstruct runner {\n"
        "    template <typename T>\n    void operator()(std::vector<T>& v, int n) {\n"
        + call + call + "    }\n};\n"
        "int helper(int n) { std::vector<int> v(n); return (int)v.size(); }\n"
        "__global__ void k(float* o) { o[threadIdx.x] = BODY; }\n"})  # fmt: skip
    main = (tmp_path / "main.cu").read_text()
    (tmp_path / "main.cu").write_text(main.replace("BODY", "1.0f"))
    assert messages(check(tmp_path / "main.cu")) == []
    (tmp_path / "main.cu").write_text(main.replace("BODY", "nope"))
    (error,) = check(tmp_path / "main.cu").errors
    assert error.line == 22 and '"nope" is undefined' in error.message


def test_a_nested_host_struct_that_a_device_constructor_takes_is_kept(tmp_path: Path) -> None:
    """CUTLASS 2.x's `TrmmUniversal::Arguments`: a host struct whose methods use `std::swap`,
    taken by the `CUTLASS_HOST_DEVICE Params(Arguments const&)` constructor. Its host methods
    go, the struct stays (was: the whole struct blanked, "expected a )" at the constructor)."""
    write(tmp_path, {
        "trmm.h": "#pragma once\n#include <utility>\n"
        "#define HD __forceinline__ __host__ __device__\n"
        "template <int N> struct Trmm {\n"
        "  struct Arguments {\n"
        "    int m{0}; int n{0}; void const* ptr{nullptr};\n"
        "    Arguments() = default;\n"
        "    Arguments transposed() const { Arguments a(*this); std::swap(a.m, a.n); return a; }\n"
        "  };\n"
        "  struct Params {\n"
        "    int m{0}; int n{0};\n"
        "    Params() = default;\n"
        "    HD\n"
        "    Params(\n"
        "      Arguments const &args\n"
        "    ): m(args.m), n(args.n) {}\n"
        "  };\n"
        "  __device__ void operator()(Params const& p, int* o) { o[0] = p.m * N + p.n; }\n"
        "};\n",
        "main.cu": '#include "trmm.h"\n'
        "__global__ void k(Trmm<2>::Params p, int* o) { Trmm<2>{}(p, o); }\n"
        "int main() { Trmm<2>::Arguments a; Trmm<2>::Params p(a.transposed()); (void)p; }\n",
    })  # fmt: skip
    analysis = check(tmp_path / "main.cu")
    assert messages(analysis) == []
    assert analysis.kernels[0].resources is not None


@pytest.mark.parametrize("nested", [False, True])
def test_a_host_template_read_only_in_decltype_is_kept(tmp_path: Path, nested: bool) -> None:
    """CUTLASS 3's `Params` names its problem shape as `decltype(detail::get_problem_shape_
    MNKL_helper<...>(...))`, a host function template defined in another header: nvcc only
    deduces its type. It must stay in the unit, whether the file includes that header first
    or the header using it does, which is walked before its includes (was: "namespace has no
    member get_problem_shape_MNKL_helper"). Another host template still goes."""
    helper = (
        "#pragma once\n#include <string>\nnamespace lib::detail {\n"
        "template <class T, class Shape> auto shape_helper(Shape const& s) { return T::mnkl(s); }\n"
        "template <class T> std::string host_only(T) { return {}; }\n"
        "}\n"
    )
    user = (
        "#pragma once\n"
        + ('#include "helper.h"\n' if nested else "")
        + "template <class Mainloop, class Shape> struct Kernel {\n"
        "  struct Params {\n"
        "    using ShapeMNKL = decltype(lib::detail::shape_helper<Mainloop>(Shape{}));\n"
        "    ShapeMNKL shape{};\n"
        "  };\n"
        "  __device__ void operator()(Params const& p, int* o) { o[0] = p.shape; }\n"
        "};\n"
    )
    write(tmp_path, {
        "helper.h": helper,
        "user.h": user,
        "main.cu": ("" if nested else '#include "helper.h"\n') + '#include "user.h"\n'
        "struct Mainloop { __host__ __device__ static int mnkl(int s) { return 2 * s; } };\n"
        "__global__ void k(Kernel<Mainloop, int>::Params p, int* o) {\n"
        "  Kernel<Mainloop, int>{}(p, o);\n}\n"
        "int main() { return lib::detail::host_only(1).size(); }\n",
    })  # fmt: skip
    analysis = check(tmp_path / "main.cu")
    assert messages(analysis) == []
    assert analysis.kernels[0].resources is not None


def test_a_header_reached_under_two_spellings_is_read_once(tmp_path: Path) -> None:
    """DeepSpeed's memory_access_utils.h: `"memory_access_utils.h"` through `-I csrc/includes`
    and, from a header there, the same file under a project-root spelling. nvcc reads it once
    (`#pragma once` is by file); NVRTC, given the text under both names, read it twice (was:
    enum "mem_access::LoadPolicy" has already been defined)."""
    write(tmp_path, {
        "csrc/includes/mem.h": "#pragma once\nnamespace mem { enum class Policy { a, b }; }\n"
        "template <mem::Policy P = mem::Policy::a> __device__ int load(const int* p) {\n"
        "  return p[0];\n}\n",
        "csrc/includes/layers.h": '#pragma once\n#include "mem.h"\n',
        "csrc/q/main.cu": '#include "layers.h"\n#include "mem.h"\n'
        "__global__ void k(int* o) { o[0] = load(o); }\n",
    })  # fmt: skip
    dirs = (str(tmp_path), str(tmp_path / "csrc/includes"))  # the project root first
    analysis = check(tmp_path / "csrc/q/main.cu", include_paths=dirs)
    assert messages(analysis) == [] and analysis.kernels[0].resources is not None


SPLIT_TAIL = """\
int gemm_ex(int handle,
            const float* A,
            float* C,
// TODO HIP: the algorithm's type differs
#if defined(__HIP_PLATFORM_AMD__) && \\
    (TORCH_VERSION_MAJOR < 2)
            rocblas_gemm_algo algo = rocblas_gemm_algo_standard){BODY}
#else
            cublasGemmAlgo_t algo = CUBLAS_GEMM_DEFAULT){BODY}
#endif
"""


def test_a_parameter_list_ending_in_an_if_branch_is_blanked_whole(tmp_path: Path) -> None:
    """DeepSpeed's cublas_wrappers.h/.cu: host prototypes and definitions whose last parameter
    comes in `#if` / `#else` branches. tree-sitter read no function there, so the head stayed
    and the rest of the header was misread (was: "template" is not allowed, "expected a )")."""
    prototype = SPLIT_TAIL.replace("{BODY}", ";")
    definition = SPLIT_TAIL.replace("{BODY}", "").replace("#endif\n", "#endif\n{\n  return 0;\n}\n")
    write(tmp_path, {
        "wrappers.h": "#pragma once\n#include <cublas_v2.h>\n" + prototype
        + "template <typename T> class GemmTest { public: __device__ T run(T x) { return x; } };\n",
        "main.cu": '#include "wrappers.h"\n' + definition
        + "__global__ void k(float* o) { o[0] = GemmTest<float>{}.run(o[0]); }\n",
    })  # fmt: skip
    analysis = check(tmp_path / "main.cu")
    assert messages(analysis) == [] and analysis.kernels[0].resources is not None


def test_instantiation_macros_of_host_templates_go_with_them(tmp_path: Path) -> None:
    """DeepSpeed's inference kernels: `INSTANTIATE_LAUNCH_BIAS_GELU(__half)` lines, often with
    no `;`, expanding to `template void launch_bias_gelu<T>(...);` of a host template. Without
    the `;` tree-sitter read the line and the kernel after it as one declaration and the
    kernel's head was blanked; NVRTC then met the instantiation of a blanked template (was:
    "launch_bias_gelu is not a template", "attributes are not allowed here")."""
    write(tmp_path, {
        "main.cu": "template <typename T>\n"
        "__global__ void gelu(T* x) { x[threadIdx.x] = x[threadIdx.x] * T(2); }\n"
        "template <typename T>\nvoid launch_gelu(T* x, cudaStream_t stream) {\n"
        "  gelu<<<1, 32, 0, stream>>>(x);\n}\n"
        "#define INSTANTIATE_GELU(T) \\\n"
        "    template void launch_gelu<T>(T*, cudaStream_t);\n"
        "INSTANTIATE_GELU(float)\n#ifdef BF16_AVAILABLE\nINSTANTIATE_GELU(double)\n#endif\n"
        "INSTANTIATE_GELU(int)\n\n"
        "__global__ void residual(float* out,\n                         const float* in) {\n"
        "  out[threadIdx.x] += in[threadIdx.x];\n}\n"
        "template <typename T>\nvoid pad(T* x, int n) { gelu<<<1, n>>>(x); }\n"
        "#define INSTANTIATE_PAD(T) template void pad(T*, int);\n"
        "INSTANTIATE_PAD(float);\nINSTANTIATE_PAD(int);\n"
        "#define INSTANTIATE_DEVICE(T) template __global__ void gelu<T>(T*);\n"
        "INSTANTIATE_DEVICE(float)\n",
    })  # fmt: skip
    analysis = check(tmp_path / "main.cu")
    assert messages(analysis) == []
    residual = next(k for k in analysis.kernels if k.kernel.name == "residual")
    assert residual.resources is not None


def test_a_function_head_in_both_branches_of_an_if_is_blanked_whole(tmp_path: Path) -> None:
    """DeepSpeed's cublas_wrappers.cu: `#if HIP` / a whole multi-line head / `#else` / another
    / `#endif` / `{ body }` of a host function (was: its body kept, "cublasGemmEx" undefined,
    or its `#if` line left without an `#endif`)."""
    write(tmp_path, {
        "main.cu": "#include <cstdio>\n"
        "#if defined(__HIP_PLATFORM_AMD__) && \\\n    (TORCH_VERSION_MAJOR < 2)\n"
        "int gemm_ex(rocblas_handle handle,\n            rocblas_gemm_algo algo)\n"
        "#else\n"
        "int gemm_ex(cublasHandle_t handle,\n            cublasGemmAlgo_t algo)\n"
        "#endif\n"
        "{\n"
        "#if defined(__HIP_PLATFORM_AMD__)\n  rocblas_status status = rocblas_gemm_ex(handle,\n"
        "#else\n  cublasStatus_t status = cublasGemmEx(handle,\n#endif\n      algo);\n"
        '  if (status) fprintf(stderr, "failed\\n");\n  return 0;\n}\n'
        "__global__ void k(float* o) { o[threadIdx.x] = 1.0f; }\n",
    })  # fmt: skip
    analysis = check(tmp_path / "main.cu")
    assert messages(analysis) == [] and analysis.kernels[0].resources is not None


def test_a_cxx11_file_gets_stdint_and_limits_without_libcuxx(tmp_path: Path) -> None:
    """StarPU builds its kernels with -std=c++11; its headers include <stdint.h>. The stand-ins
    forwarded to libcu++, which CUDA 13 stops below C++17 with `#error` (was: no figures for
    any StarPU kernel). They give their own definitions there; an error is still reported."""
    write(tmp_path, {
        "main.cu": "#include <stdint.h>\n#include <climits>\n#include <cfloat>\n"
        "__global__ void k(int64_t* o, float* f) {\n"
        "  o[0] = INT64_MAX; o[1] = INT_MAX; f[0] = FLT_MAX;\n}\n",
    })  # fmt: skip
    for std in ("c++11", "c++14", "c++17"):
        analysis = check(tmp_path / "main.cu", std=std)
        assert analysis.diagnostics == (), std
        assert analysis.kernels[0].resources is not None, std
    write(
        tmp_path,
        {"main.cu": "#include <stdint.h>\n__global__ void k(int64_t* o) { o[0] = nope; }\n"},
    )
    (error,) = check(tmp_path / "main.cu", std="c++11").errors
    assert error.line == 2 and 'identifier "nope" is undefined' in error.message


def test_a_portability_inline_macro_keeps_its_device_definition(tmp_path: Path) -> None:
    """LAMMPS's `ucl_inline`: `static __inline__ __device__` in the CUDA header its preprocessor
    header includes, `inline` in the OpenCL branch after it. Reading the `inline` body as an
    attribute (for StarPU's STARPU_INLINE) made `ucl_inline int sbmask(int j)` a host function,
    blanked: 48 LAMMPS files lost their kernels' figures on the GPU machine."""
    write(tmp_path, {
        "cuda.h": "#pragma once\n#define ucl_inline static __inline__ __device__\n",
        "pre.h": '#pragma once\n#if defined(NV_KERNEL)\n#include "cuda.h"\n#else\n'
        "#define ucl_inline inline\n#endif\n"
        "ucl_inline int sbmask(int j) { return j >> 3 & 3; };\n",
        "main.cu": '#include "pre.h"\n__global__ void k(int* o) { o[0] = sbmask(o[1]); }\n',
    })  # fmt: skip
    analysis = check(tmp_path / "main.cu", defines=("NV_KERNEL",))
    assert analysis.diagnostics == (), [d.message for d in analysis.diagnostics]
    assert analysis.kernels[0].resources is not None


def test_sys_types_sizes_and_pthread_attribute_types_of_host_headers(tmp_path: Path) -> None:
    """nvcc's host headers declare <sys/types.h> for every file: StarPU's starpu_config.h has
    `typedef ssize_t starpu_ssize_t;` (device code may use it), starpu_disk.h `off_t`, and
    starpu_thread.h aliases every pthread attribute type (host-only: blanked). Was: ssize_t,
    pthread_mutexattr_t undefined. An error beside them is still reported."""
    header = (
        "#pragma once\n#include <sys/types.h>\n#include <pthread.h>\n"
        "typedef ssize_t my_ssize_t;\ntypedef pthread_mutexattr_t my_mutexattr_t;\n"
        "typedef pthread_key_t my_key_t;\ntypedef pthread_condattr_t my_condattr_t;\n"
        "typedef pthread_rwlockattr_t my_rwlockattr_t;\n"
        "typedef pthread_barrierattr_t my_barrierattr_t;\n"
        "struct ops { int (*read)(void* obj, off_t offset, size_t size); };\n"
    )
    write(tmp_path, {
        "types.h": header,
        "main.cu": '#include "types.h"\n'
        "__global__ void k(my_ssize_t* o, off_t* p) { o[0] = -1; p[0] = 2; }\n",
    })  # fmt: skip
    analysis = check(tmp_path / "main.cu")
    assert analysis.diagnostics == () and analysis.kernels[0].resources is not None
    write(
        tmp_path,
        {"main.cu": '#include "types.h"\n__global__ void k(my_ssize_t* o) { o[0] = nope; }\n'},
    )
    (error,) = check(tmp_path / "main.cu").errors
    assert error.line == 2 and 'identifier "nope" is undefined' in error.message


def test_runs_of_instantiation_macros_over_lines_go_with_their_host_template(
    tmp_path: Path,
) -> None:
    """bitsandbytes' ops.cu after clang-format: several `MAKE_optimizer32bit(ADAM, half)` on a
    line, one of them split over three, each expanding to an explicit instantiation of a host
    template (was: "optimizer32bit is not a template" per invocation). A kernel's error after
    them is still reported."""
    head = (
        "template <typename T, int N> __global__ void k(T* o) { o[0] = N; }\n"
        "template <typename T, int N> void launch(T* o) { k<T, N><<<1, 1>>>(o); }\n"
        "#define MAKE(n, T) template void launch<T, n>(T * o);\n"
        "MAKE(1, float) MAKE((2), float) MAKE(\n    ((3)), float\n) MAKE(4, int)\n"
    )
    write(tmp_path, {"main.cu": head})
    assert messages(check(tmp_path / "main.cu")) == []
    write(tmp_path, {"main.cu": head + "__global__ void bad(float* o) { o[0] = nope; }\n"})
    (error,) = check(tmp_path / "main.cu").errors
    assert error.line == 7 and 'identifier "nope" is undefined' in error.message


def test_kernels_instantiated_by_macro_lines_get_figures(tmp_path: Path) -> None:
    """bitsandbytes' kernels.cu instantiates 126 of its 151 kernel instances by macro lines
    (`MAKE_kQuantizeBlockwise(half, 4096, 4, 0, General8bit)`): each gets its figures (was:
    none of them), and an instance that fails to compile is reported as nvcc reports it."""
    head = (
        "template <typename T, int N> __global__ void k(T* o) {\n"
        '  static_assert(N % 2 == 0, "N must be even");\n  o[0] = T(N);\n}\n'
        "#define MAKE(T, n) template __global__ void k<T, n>(T * o);\n"
        "MAKE(float, 2)\nMAKE(int, 4)\n"
    )
    write(tmp_path, {"main.cu": head})
    analysis = check(tmp_path / "main.cu")
    assert analysis.diagnostics == ()
    assert list(analysis.kernels[0].instances) == ["k<float, 2>", "k<int, 4>"]
    write(tmp_path, {"main.cu": head + "MAKE(double, 3)\n"})
    errors = check(tmp_path / "main.cu").errors
    assert errors and 'static assertion failed with "N must be even"' in errors[0].message


EMPTY_DEFINES = (
    "#include <unistd.h>\n"
    "#ifndef USE_ROCM\n#define ROCM_ONLY(x) \n#else\n#include <hipcub/hipcub.hpp>\n#endif\n"
    "#define EMPTY \n"
    "__global__ void k(int* o) { o[0] = 1; }\n"
    "#define HOST_ONLY(x)\t\n"
    "void pause_host() { sleep(1); }\n"
    "__global__ void k2(int* o) { o[0] = 2; }\n"
)


def test_an_empty_define_with_trailing_blanks_leaves_the_next_line_alone(tmp_path: Path) -> None:
    """causal-conv1d's `#define ROCM_ONLY(x) ` (a blank before the line's end): tree-sitter
    read the next line as the macro's body, so its `#else` was lost (was: "cannot find
    <hipcub/hipcub.hpp>" on the branch nvcc skips), a kernel after such a define went
    unlisted, and a host function after one was not blanked (was: "sleep" is undefined)."""
    write(tmp_path, {"main.cu": EMPTY_DEFINES})
    analysis = check(tmp_path / "main.cu")
    assert not analysis.diagnostics, analysis.diagnostics
    assert [(k.kernel.name, k.resources is not None) for k in analysis.kernels] == [
        ("k", True),
        ("k2", True),
    ]
    name = analysis.kernels[0].kernel.name_span  # from bytes: the mask moved no column
    assert (name.start.line, name.start.column, name.end.column) == (7, 16, 17)
    write(tmp_path, {"main.cu": EMPTY_DEFINES.replace("o[0] = 2;", "o[0] = 2 + nope;")})
    assert messages(check(tmp_path / "main.cu")) == ['11: identifier "nope" is undefined']
