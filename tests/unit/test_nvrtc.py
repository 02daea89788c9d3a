"""NVRTC compile through cuda-python: diagnostics from the log, ptxas resources, cache, arch."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from cuda_llm_lsp.compile import arch as arch_module
from cuda_llm_lsp.compile import nvrtc as nvrtc_module
from cuda_llm_lsp.compile.arch import normalize_arch, resolve_arch
from cuda_llm_lsp.compile.cache import CompileCache, cache_dir, cache_key
from cuda_llm_lsp.compile.device_unit import DeviceUnit, build_device_unit
from cuda_llm_lsp.compile.nvrtc import compile_unit, parse_log, parse_ptxas
from cuda_llm_lsp.compile.types import CompileOptions, Diagnostic, NvrtcUnavailable
from cuda_llm_lsp.config import Settings
from tests.support.load import slack

OPTIONS = CompileOptions(arch="sm_90")


def compile_text(text: str, names: tuple[str, ...] = (), path: Path | None = None):
    return compile_unit(build_device_unit(text, path), OPTIONS, names)


def test_mangled_extern_c_and_template_kernels_all_get_resources() -> None:
    source = (
        "template <typename T, int B>\n"
        "__global__ void tk(T* x) { __shared__ T s[B]; s[threadIdx.x] = x[threadIdx.x];\n"
        "  __syncthreads(); x[threadIdx.x] = s[B - 1 - threadIdx.x]; }\n"
        'extern "C" __global__ void ck(float* x) { x[0] = 1.0f; }\n'
        "__global__ void cpp(float a, const float* x, float* y) { y[0] = a * x[0]; }\n"
    )
    result = compile_text(source, ("tk<float, 128>", "ck", "cpp"))
    assert result.ok and result.cubin and result.diagnostics == ()
    assert result.lowered_names == {
        "tk<float, 128>": "_Z2tkIfLi128EEvPT_",
        "ck": "ck",
        "cpp": "_Z3cppfPKfPf",
    }
    assert set(result.resources) == {"tk<float, 128>", "ck", "cpp"}
    assert result.resources["tk<float, 128>"].shared_bytes == 512
    assert all(r.registers > 0 for r in result.resources.values())


def test_error_line_column_and_token_end_from_the_caret() -> None:
    source = "__global__ void k(float* x) {\n\tx[0] = undefined_name + 1;\n}\n"
    result = compile_text(source, ("k",))
    assert not result.ok and result.cubin is None and result.resources == {}
    (d,) = result.diagnostics
    assert (d.line, d.column, d.end_line, d.end_column) == (2, 9, 2, 23)  # tab counts as one
    assert d.severity == "error" and d.message == 'identifier "undefined_name" is undefined'


def test_warning_number_and_instantiation_context() -> None:
    source = (
        "template <typename T> __global__ void k(T* x) { x[0] = x[0].foo; }\n"
        "template __global__ void k<float>(float*);\n"
        "__global__ void w(float* x) { int unused; x[0] = 1; }\n"
    )
    result = compile_text(source)
    by_line = {d.line: d for d in result.diagnostics}
    assert by_line[3].severity == "warning" and by_line[3].code == "177-D"
    assert by_line[3].message == 'variable "unused" was declared but never referenced'
    assert by_line[3].column == source.split("\n")[2].index("unused") + 1
    assert "detected during instantiation" in by_line[1].message
    assert by_line[1].severity == "error"


def test_header_error_is_attached_to_its_include_line(tmp_path: Path) -> None:
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "util.cuh").write_text(
        "#pragma once\n__device__ float helper(float x) {\n  return x + missing_thing;\n}\n"
    )
    source = (
        '// kernels\n#include "inc/util.cuh"\n__global__ void k(float* x) { x[0] = helper(1); }\n'
    )
    result = compile_text(source, ("k",), tmp_path / "k.cu")
    (d,) = result.diagnostics
    assert d.line == 2 and d.file is None and d.severity == "error"
    assert d.message.startswith('in included file "inc/util.cuh" line 3: ')
    assert "missing_thing" in d.message
    assert (d.column, d.end_column) == (1, len('#include "inc/util.cuh"') + 1)


REALISTIC = """\
#include <math.h>
#include <cmath>
#include <cstdio>
#include <stdio.h>
#include <cstdint>
#include <cfloat>
#include <climits>
#include <cassert>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <vector>
#include <algorithm>
#include <iostream>
#include <chrono>
#include <cuda_runtime.h>

__device__ const float kNegInf = -INFINITY;

__global__ void mix(const float* x, float* y, uint32_t n, __half* h, __nv_bfloat16* b) {
  uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = fmaxf(x[i], kNegInf) + expf(-x[i]) + std::sqrt(fabsf(x[i])) + M_PI;
  if (isinf(v) || isnan(v) || v > FLT_MAX) v = NAN;
  assert(n < INT_MAX);
  int64_t wide = static_cast<int64_t>(n) * 2;
  h[i] = __float2half(v);
  b[i] = __float2bfloat16(v + wide);
  if (i == 0) printf("v = %f\\n", v);
  y[i] = v;
}

int main() {
  std::vector<float> host(1024);
  std::sort(host.begin(), host.end());
  auto start = std::chrono::steady_clock::now();
  float* d = nullptr;
  cudaMalloc(&d, 4096);
  mix<<<4, 256>>>(d, d, 1024, nullptr, nullptr);
  std::cout << "done" << std::endl;
  return 0;
}
"""


def test_realistic_math_stdio_file_has_no_false_diagnostics() -> None:
    result = compile_text(REALISTIC, ("mix",))
    assert result.diagnostics == ()
    assert result.ok and result.resources["mix"].registers > 0


def test_bad_name_expression_is_dropped_without_hiding_real_diagnostics() -> None:
    source = "template <int B> __global__ void k(float* x) { x[0] = B; }\n"
    result = compile_text(source, ("k<T>", "nothere", "k<4>"))
    assert result.ok and result.diagnostics == ()
    assert set(result.resources) == {"k<4>"}


def test_parse_ptxas_reads_spills_stack_and_shared() -> None:
    log = (
        "ptxas info    : 0 bytes gmem\n"
        "ptxas info    : Compiling entry function '_Z3fooPf' for 'sm_90'\n"
        "ptxas info    : Function properties for _Z3fooPf\n"
        "ptxas         .     24 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n"
        "ptxas info    : Used 255 registers, used 1 barriers, 4096 bytes smem, 380 bytes cmem[0]\n"
    )
    (r,) = parse_ptxas(log).values()
    assert (r.registers, r.spill_stores, r.spill_loads, r.shared_bytes, r.stack_bytes) == (
        255,
        8,
        12,
        4096,
        24,
    )
    assert r.constant_bytes == 380


def test_parse_ptxas_reads_nvccs_indented_stack_frame_line() -> None:
    """nvcc prints the stack frame line indented, not behind "ptxas": its spills count too."""
    log = (
        "ptxas info    : Compiling entry function '_Z3fooPf' for 'sm_90'\n"
        "ptxas info    : Function properties for _Z3fooPf\n"
        "    16 bytes stack frame, 20 bytes spill stores, 24 bytes spill loads\n"
        "ptxas info    : Used 64 registers, used 1 barriers, 1024 bytes smem\n"
    )
    (r,) = parse_ptxas(log).values()
    assert (r.registers, r.stack_bytes, r.spill_stores, r.spill_loads, r.shared_bytes) == (
        64, 16, 20, 24, 1024,
    )  # fmt: skip


def test_ptxas_error_without_a_line_is_reported_with_the_kernel_name() -> None:
    unit = DeviceUnit(text="", name="a.cu", include_dirs=())
    log = "ptxas error   : Entry function '_Z1kPf' uses too much shared data (0x10000 bytes)\n"
    (d,) = parse_log(log, unit, {"k": "_Z1kPf"})
    assert d.severity == "error" and d.code == "ptxas" and "'k'" in d.message


def test_nvrtc_unavailable_is_a_clear_exception(monkeypatch: pytest.MonkeyPatch) -> None:
    from cuda.bindings import nvrtc

    def broken() -> None:
        raise RuntimeError("libnvrtc.so.13: cannot open shared object file")

    monkeypatch.setattr(nvrtc_module, "_module", None)
    monkeypatch.setattr(nvrtc, "nvrtcVersion", broken)
    with pytest.raises(NvrtcUnavailable, match="NVRTC could not be loaded"):
        compile_text("__global__ void k() {}\n")


def test_resolve_arch_configured_else_local_else_sm90(monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_arch("sm_80") == "sm_80"
    assert resolve_arch("90a") == "sm_90a"
    assert resolve_arch(Settings(arch="sm_89")) == "sm_89"
    assert normalize_arch("banana") is None
    arch_module.local_gpu_arch.cache_clear()
    start = time.perf_counter()
    local = arch_module.local_gpu_arch()
    assert time.perf_counter() - start < 2.0 * slack()  # no driver here: must fail fast, not hang
    expected = local or "sm_90"
    assert resolve_arch(None) == expected
    assert resolve_arch("not-an-arch") == expected


def test_cache_hits_in_memory_then_on_disk_and_ignores_corrupt_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_LLM_CACHE_DIR", str(tmp_path))
    unit = build_device_unit("__global__ void k(float* x) { x[0] = 2; }\n")
    cache = CompileCache()
    first = cache.compile(unit, OPTIONS, ("k",))
    assert not first.from_cache
    again = cache.compile(unit, OPTIONS, ("k",))
    assert again.from_cache and again.resources == first.resources
    fresh = CompileCache()  # a new process: only the disk copy is there
    from_disk = fresh.compile(unit, OPTIONS, ("k",))
    assert from_disk.from_cache and from_disk.cubin == first.cubin
    assert from_disk.diagnostics == first.diagnostics
    key = cache_key(unit, OPTIONS, ("k",))
    entry = cache_dir() / key[:2] / f"{key}.json"
    assert json.loads(entry.read_text())["result"]["ok"] is True
    entry.write_text("{not json")
    recompiled = CompileCache().compile(unit, OPTIONS, ("k",))
    assert not recompiled.from_cache and recompiled.ok
    other_arch = CompileCache().compile(unit, CompileOptions(arch="sm_80"), ("k",))
    assert not other_arch.from_cache and other_arch.arch == "sm_80"


def test_defines_and_extra_flags_reach_nvrtc() -> None:
    unit = build_device_unit("__global__ void k(float* x) { x[0] = SCALE; }\n")
    missing = compile_unit(unit, OPTIONS, ("k",))
    assert not missing.ok
    defined = compile_unit(unit, CompileOptions(arch="sm_90", defines=("SCALE=2.0f",)), ("k",))
    assert defined.ok and defined.diagnostics == ()


def test_continuation_lines_join_the_message_and_notes_are_information() -> None:
    source = (
        "__device__ void f(int a) {}\n"
        "__device__ void f(float a) {}\n"
        '__global__ void k() {\n  f("x");\n}\n'
    )
    result = compile_text(source)
    error = next(d for d in result.diagnostics if d.severity == "error")
    assert error.line == 4 and (error.column, error.end_column) == (3, 4)
    assert error.message == (
        'no instance of overloaded function "f" matches the argument list '
        "argument types are: (const char [2])"
    )
    notes = [d for d in result.diagnostics if d.severity == "information"]
    assert {d.line for d in notes} == {1, 2} and all(d.code == "3326-D" for d in notes)


def test_toolkit_header_errors_named_by_include_every_error_kept(tmp_path: Path) -> None:
    """Issue 38: a cap of header messages per #include line, warnings first, once hid every
    real error behind "... and N more": errors come first and none is dropped."""
    source = "#define __half int\n#include <cuda_fp16.h>\n__global__ void k(float* x) {}\n"
    result = compile_text(source, ("k",), tmp_path / "k.cu")
    assert not result.ok
    assert {d.line for d in result.diagnostics} == {2}
    errors = [d for d in result.diagnostics if d.severity == "error"]
    assert len(errors) > nvrtc_module.MAX_PER_INCLUDE  # not capped
    assert list(result.diagnostics[: len(errors)]) == errors  # errors first
    assert result.diagnostics[0].message.startswith('in included file "<cuda_fp16.h')
    assert "site-packages" not in "".join(d.message for d in result.diagnostics)
    others = result.diagnostics[len(errors) :]
    assert len(others) <= nvrtc_module.MAX_PER_INCLUDE + 1
    assert not any(d.message.startswith("... and ") for d in errors)


def test_header_warnings_are_capped_after_the_errors() -> None:
    many = [
        Diagnostic(3, 1, 3, 2, "warning", f'in included file "h.cuh" line {n}: w{n}')
        for n in range(30)
    ]
    real = Diagnostic(3, 1, 3, 2, "error", 'in included file "h.cuh" line 99: the real one')
    shown = nvrtc_module._unique([*many, real])
    assert shown[0] == real
    assert len(shown) == 1 + nvrtc_module.MAX_PER_INCLUDE + 1
    assert shown[-1].message == "... and 20 more warnings and notes in included files"


def test_compiles_from_many_threads_at_once() -> None:
    from concurrent.futures import ThreadPoolExecutor

    def one(i: int) -> int:
        text = f"__global__ void k{i}(float* x) {{ x[0] = {i}; }}\n"
        result = compile_text(text, (f"k{i}",))
        assert result.ok, result.log
        return result.resources[f"k{i}"].registers

    with ThreadPoolExecutor(max_workers=4) as pool:
        assert all(r > 0 for r in pool.map(one, range(12)))


def test_stand_ins_work_without_cccl(monkeypatch: pytest.MonkeyPatch) -> None:
    from cuda_llm_lsp.compile import headers

    cudart_only = tuple(d for d in headers.toolkit_include_dirs() if not d.endswith("cccl"))
    assert cudart_only
    monkeypatch.setattr(headers, "toolkit_include_dirs", lambda: cudart_only)
    flags = nvrtc_module.build_flags(build_device_unit(""), OPTIONS)
    assert not any(f.endswith("cccl") for f in flags)
    result = compile_text(REALISTIC, ("mix",))
    assert result.diagnostics == () and result.ok


def test_unclosed_brace_is_reported_at_the_end_of_the_file() -> None:
    source = "__global__ void k(float* x) {\n  if (x) {\n    x[0] = 1;\n"
    result = compile_text(source)
    error = next(d for d in result.diagnostics if d.severity == "error")
    assert error.line == 4 and error.message == 'expected a "}" at the end of the file'
    notes = [d for d in result.diagnostics if d.severity == "information"]
    assert {d.line for d in notes} <= {1, 2} and notes


def test_type_traits_in_device_templates() -> None:
    source = (
        "#include <type_traits>\n"
        "#include <cuda_fp16.h>\n"
        "template <typename T>\n"
        "using Acc = std::conditional_t<std::is_same_v<T, __half>, float, T>;\n"
        "template <typename T, typename = std::enable_if_t<std::is_floating_point<T>::value>>\n"
        "__global__ void k(T* x) {\n"
        "  if constexpr (std::is_same_v<T, double>) { x[0] = 2; }\n"
        "  x[1] = static_cast<T>(Acc<T>(x[0]) + std::is_integral_v<std::remove_cv_t<const int>>);\n"
        "}\n"
    )
    result = compile_text(source, ("k<float>", "k<double>"))
    assert result.diagnostics == () and set(result.resources) == {"k<float>", "k<double>"}


def test_editing_a_header_from_a_configured_path_invalidates_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`#include <mylib/ops.cuh>` through a configured path: NVRTC reads the file itself, so only
    its size and time in the key keep a cached result from hiding the edit."""
    monkeypatch.setenv("CUDA_LLM_CACHE_DIR", str(tmp_path / "cache"))
    include = tmp_path / "include"
    (include / "mylib").mkdir(parents=True)
    header = include / "mylib" / "ops.cuh"
    header.write_text("#pragma once\n__device__ float twice(float x) { return 2 * x; }\n")
    source = "#include <mylib/ops.cuh>\n__global__ void k(float* x) { x[0] = twice(x[0]); }\n"

    def compile_now():
        unit = build_device_unit(source, tmp_path / "k.cu", include_paths=(str(include),))
        return CompileCache().compile(unit, OPTIONS, ("k",))

    assert compile_now().ok
    header.write_text("#pragma once\n__device__ float twice(float x) { return 2 * y; }\n")
    broken = compile_now()
    assert not broken.from_cache and not broken.ok
    assert any("ops.cuh" in d.message and '"y"' in d.message for d in broken.diagnostics)
    assert compile_now().from_cache  # unchanged again: a hit


_UNROLL_PROBE = (
    "#include <cuda/std/type_traits>\n"
    'static_assert(_CCCL_META_UNROLL_LIMIT == EXPECTED, "unroll limit");\n'
    "__global__ void k(int* x) { x[0] = cuda::std::is_same_v<int, int>; }\n"
)


@pytest.mark.parametrize(("defines", "limit"), [((), 10), (("_CCCL_META_UNROLL_LIMIT=12",), 12)])
def test_libcu_plus_plus_unrolls_as_under_nvcc_unless_the_project_says(
    defines: tuple[str, ...], limit: int
) -> None:
    """CCCL picks 16 for any compiler but nvcc: 1.2 s of every cold parse of a libcu++ header
    under NVRTC. The prelude gives NVRTC nvcc's 10; a project's own -D wins."""
    text = _UNROLL_PROBE.replace("EXPECTED", str(limit))
    options = CompileOptions(arch="sm_90", defines=defines)
    result = compile_unit(build_device_unit(text), options, ("k",), syntax_only=True)
    assert result.ok and not [d for d in result.diagnostics if d.severity == "error"], (
        result.diagnostics
    )


@pytest.mark.parametrize("header", ["cfloat", "float.h"])
def test_float_limits_where_cccls_cfloat_defines_none_under_nvrtc(
    tmp_path: Path, header: str
) -> None:
    """CCCL 3.0's <cuda/std/cfloat> (CUDA 13.0's toolkit, the GPU machine's) includes the host's
    <cfloat> except under NVRTC, where it defines nothing: ggml's argmax.cu, nvcc-clean, had
    "identifier FLT_MAX is undefined". The stand-in defines each limit still missing."""
    cccl_3_0 = tmp_path / "cccl" / "cuda" / "std"
    cccl_3_0.mkdir(parents=True)
    (cccl_3_0 / "cfloat").write_text("#pragma once\n/* under NVRTC: nothing */\n")
    text = (
        f"#include <{header}>\n"
        "__global__ void k(float* x, double* y) {\n"
        "  x[0] = -FLT_MAX + FLT_EPSILON + FLT_MIN;\n"
        "  y[0] = DBL_MAX - DBL_EPSILON + FLT_MANT_DIG + DBL_DIG;\n"
        "}\n"
    )
    unit = build_device_unit(text, None, (str(tmp_path / "cccl"),))
    options = CompileOptions(arch="sm_90", include_paths=(str(tmp_path / "cccl"),))
    result = compile_unit(unit, options, ("k",))
    assert result.ok, [d.message for d in result.diagnostics]
