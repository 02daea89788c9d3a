"""A project's flags naming the CUDA toolkit's or CCCL's own include directories (issue 28).

Real builds do: a Makefile's `-I$(CUDA_HOME)/include`, CMake's `CUDAToolkit_INCLUDE_DIRS` in
compile_commands.json, a project pinning a newer CCCL (`-I cccl/libcudacxx/include`). Headers
found through a configured directory are a project's and get their host code blanked; blanking
the toolkit's `cuda_fp16.h` or libcu++'s templates broke them (hundreds of false errors on files
nvcc compiles cleanly). Also: CUB's host algorithms (`<cub/device/...>`) refuse NVRTC with an
`#error`, so including one, as host code calling `cub::DeviceScan` does, was a false error.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_llm_lsp.compile import headers
from cuda_llm_lsp.compile.analysis import analyze
from cuda_llm_lsp.config import Settings


def _toolkit_dir(kind: str) -> Path:
    for directory in headers.toolkit_include_dirs():
        path = Path(directory)
        if kind == "cudart" and (path / "cuda_runtime_api.h").is_file():
            return path
        if kind == "cccl" and (path / "cuda" / "std").is_dir():
            return path
    pytest.skip(f"the toolkit's {kind} headers are not installed")


def _check(tmp_path: Path, text: str, *include_paths: Path) -> tuple[list[str], list[str]]:
    source = tmp_path / "k.cu"
    source.write_text(text)
    analysis = analyze(text, source, Settings(include_paths=tuple(map(str, include_paths))))
    errors = [f"{e.line}: {e.message}" for e in analysis.errors]
    with_resources = [k.kernel.name for k in analysis.kernels if k.resources is not None]
    return errors, with_resources


HALF_KERNEL = """\
#include <cuda_fp16.h>
#include <cooperative_groups.h>
#include <cuda_runtime.h>
namespace cg = cooperative_groups;
__global__ void scale(__half* x) {
  cg::thread_block block = cg::this_thread_block();
  x[block.thread_rank()] = __float2half(2.0f * __half2float(x[block.thread_rank()]));
}
"""


def test_the_toolkits_own_include_directory_among_the_flags_is_clean(tmp_path: Path) -> None:
    errors, with_resources = _check(tmp_path, HALF_KERNEL, _toolkit_dir("cudart"))
    assert errors == []
    assert with_resources == ["scale"]


def test_a_real_error_is_still_reported_with_the_toolkit_directory(tmp_path: Path) -> None:
    text = HALF_KERNEL.replace("__float2half(", "__float2halfx(")
    errors, _ = _check(tmp_path, text, _toolkit_dir("cudart"))
    assert len(errors) == 1 and errors[0].startswith("7: ") and "__float2halfx" in errors[0]


CCCL_KERNEL = """\
#include <cuda/std/utility>
#include <cuda/std/type_traits>
#include <cub/block/block_reduce.cuh>
__global__ void total(float* x) {
  using Reduce = cub::BlockReduce<float, 128>;
  __shared__ typename Reduce::TempStorage scratch;
  static_assert(cuda::std::is_same_v<float, decltype(x[0] + 1.0f)>);
  float sum = Reduce(scratch).Sum(cuda::std::move(x[threadIdx.x]));
  if (threadIdx.x == 0) x[0] = sum;
}
"""


def test_a_cccl_directory_among_the_flags_is_read_by_nvrtc_as_it_is(tmp_path: Path) -> None:
    errors, with_resources = _check(tmp_path, CCCL_KERNEL, _toolkit_dir("cccl"))
    assert errors == []
    assert with_resources == ["total"]


def test_a_projects_own_cuda_directory_is_still_a_project_header(tmp_path: Path) -> None:
    # `include/cuda/helpers.h` of a project is not libcu++: its host code is still blanked
    (tmp_path / "include" / "cuda").mkdir(parents=True)
    (tmp_path / "include" / "cuda" / "helpers.h").write_text(
        "#pragma once\n#include <vector>\n"
        "std::vector<float> host_values();\n"
        "__device__ inline float twice(float v) { return 2 * v; }\n"
    )
    text = "#include <cuda/helpers.h>\n__global__ void k(float* x) { x[0] = twice(x[1]); }\n"
    errors, with_resources = _check(tmp_path, text, tmp_path / "include")
    assert errors == []
    assert with_resources == ["k"]


def test_cubs_host_algorithms_give_kernels_what_they_bring(tmp_path: Path) -> None:
    # `<cub/device/device_scan.cuh>` refuses NVRTC (`#error`); host code calls DeviceScan,
    # kernels use the scan tile state it brings (CCCL's decoupled look-back example)
    text = (
        "#include <cub/device/device_scan.cuh>\n#include <cub/util_allocator.cuh>\n"
        "__global__ void k(int* x) { x[threadIdx.x] += 1; }\n"
        "__global__ void init(cub::ScanTileState<int> s) { s.InitializeStatus(4); }\n"
        "void scan(int* d, int n, void* tmp, size_t bytes) {\n"
        "  cub::DeviceScan::InclusiveSum(tmp, bytes, d, d, n);\n}\n"
    )
    errors, with_resources = _check(tmp_path, text)
    assert errors == []
    assert with_resources == ["k", "init"]
    errors, _ = _check(tmp_path, text.replace("x[threadIdx.x] += 1", "x[threadIdx.x] += y"))
    assert len(errors) == 1 and errors[0].startswith("3: ")


def test_another_toolkits_directory_gives_only_what_ours_lacks(tmp_path: Path) -> None:
    # a CUDA 12 `/usr/local/cuda/include` beside NVRTC 13: its `cuda_fp16.h` must not be read
    # (NVRTC's own is), its `cublas_v2.h`, which our toolkit lacks, still is (blanked)
    other = tmp_path / "cuda-12" / "include"
    (other / "crt").mkdir(parents=True)
    (other / "cuda_runtime_api.h").write_text("#error another toolkit's runtime API\n")
    (other / "cuda_fp16.h").write_text("#error another toolkit's cuda_fp16.h\n")
    (other / "blas_v9.h").write_text(
        "#pragma once\n#include <vector>\ntypedef int blasStatus_t;\n"
        "blasStatus_t blasCreate(std::vector<int>* handle);\n"
    )
    text = HALF_KERNEL.replace(
        "#include <cuda_runtime.h>\n", "#include <cuda_runtime.h>\n#include <blas_v9.h>\n"
    ).replace("x[block.thread_rank()] = ", "blasStatus_t s = 0; x[block.thread_rank() + s] = ")
    errors, with_resources = _check(tmp_path, text, other)
    assert errors == []
    assert with_resources == ["scale"]


def test_finding_the_toolkit_headers_starts_no_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """cuda.pathfinder's last resort for a library no wheel holds (cuRAND here) is a Python
    subprocess loading cudart: 0.3-0.7 s inside the first document's check. With cudart's
    headers found, it is never asked."""
    import subprocess

    started: list[object] = []

    class NoProcess:
        def __init__(self, *args: object, **kwargs: object) -> None:
            started.append(args)
            raise OSError("no process may start here")

    headers.toolkit_include_dirs.cache_clear()
    monkeypatch.setattr(subprocess, "Popen", NoProcess)
    try:
        dirs = headers.toolkit_include_dirs()
    finally:
        headers.toolkit_include_dirs.cache_clear()
    if not any((Path(d) / "cuda_runtime_api.h").is_file() for d in dirs):
        pytest.skip("no toolkit headers in this environment")
    assert not started, started


def test_the_probe_is_asked_where_cudart_is_found_nowhere_else(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A toolkit only the dynamic loader reaches (no wheel, no CUDA_HOME, no nvcc): pathfinder's
    probe finds it, for every library still missing."""
    probed: list[str] = []

    def probe(lib: str) -> str | None:
        probed.append(lib)
        return f"/opt/cuda/include/{lib}"

    monkeypatch.setattr(headers, "_in_environment", {"cccl": "/wheel/cccl"}.get)
    monkeypatch.setattr(headers, "_from_nvcc_toolkit", lambda lib: None)
    monkeypatch.setattr(headers, "_probed", probe)
    headers.toolkit_include_dirs.cache_clear()
    try:
        dirs = headers.toolkit_include_dirs()
    finally:
        headers.toolkit_include_dirs.cache_clear()
    assert dirs == ("/opt/cuda/include/cudart", "/wheel/cccl", "/opt/cuda/include/curand")
    assert probed == ["cudart", "curand"]
