"""The GPU machine's own environment (issue 38, items 4 and 7): a PyTorch venv whose NVRTC and
runtime wheels ship no CCCL, a system CUDA 13.0 toolkit (CCCL 3.0) with the nvcc a user finds.

Measured there (real-world corpus, 162 nvcc-clean files): 12 false errors in the fast tier,
45 in the nvcc tier. Each test plants one cause: libcu++ not found (`cuda/std/algorithm`),
CUTLASS's `<cccl/cuda/std/...>` spelling, CCCL 3.0's own `cuda::std::move` beside NVRTC's
builtin `std::move`, an error in a header cuda-llm wrote shown as the user's, and the nvcc
tier answering `<math.h>` with a project's `math.h` beside the file.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cuda_llm_lsp.compile import device_unit, headers, nvrtc, std_names
from cuda_llm_lsp.compile.honesty import Rewrites, be_honest
from cuda_llm_lsp.compile.nvcc import compile_file, find_nvcc
from cuda_llm_lsp.compile.types import CompileOptions, Diagnostic

OPTIONS = CompileOptions(arch="sm_90", include_paths=(), defines=(), extra_flags=(), std="c++17")


def _cudart_dir() -> Path:
    for directory in headers.toolkit_include_dirs():
        if (Path(directory) / "cuda_runtime_api.h").is_file():
            return Path(directory)
    pytest.skip("NVRTC's runtime headers are not installed")


def _cccl_dir() -> Path:
    for directory in headers.toolkit_include_dirs():
        if (Path(directory) / "cuda" / "std" / "version").is_file():
            return Path(directory)
    pytest.skip("no CCCL headers")


def _wheel_without_cccl(tmp_path: Path) -> Path:
    """NVRTC's runtime include directory as PyTorch's wheels have it: no `cccl/` inside."""
    cudart = tmp_path / "cu13" / "include"
    cudart.mkdir(parents=True)
    for entry in _cudart_dir().iterdir():
        if entry.name != "cccl":
            os.symlink(entry, cudart / entry.name)
    return cudart


def _use_dirs(monkeypatch: pytest.MonkeyPatch, *dirs: Path) -> None:
    found = tuple(map(str, dirs))
    monkeypatch.setattr(headers, "toolkit_include_dirs", lambda: found)


def _compile(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    source = tmp_path / "k.cu"
    source.write_text(text)
    unit = device_unit.build_device_unit(text, source, ())
    return unit, nvrtc.compile_unit(unit, OPTIONS, ())


# --- libcu++ from the nvcc's toolkit where NVRTC's environment lacks it --------------------------


def _fake_toolkit(root: Path, version: int) -> Path:
    """A toolkit with `bin/nvcc`, a runtime header of CUDA `version` and CCCL (no cuRAND)."""
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "nvcc").write_text("#!/bin/sh\nexit 0\n")
    (root / "bin" / "nvcc").chmod(0o755)
    include = root / "include"
    (include / "cccl" / "cuda" / "std").mkdir(parents=True)
    (include / "cccl" / "cuda" / "std" / "version").write_text("#pragma once\n")
    (include / "cuda_runtime_api.h").write_text(f"#define CUDART_VERSION {version}\n")
    return include


def test_cccl_missing_from_nvrtcs_wheels_comes_from_the_nvcc_toolkit(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    include = _fake_toolkit(tmp_path / "cuda-13.0", 13000)
    wheel = tmp_path / "wheel" / "include"
    wheel.mkdir(parents=True)
    (wheel / "cuda_runtime_api.h").write_text("#define CUDART_VERSION 13000\n")
    found = {"cudart": str(wheel)}
    monkeypatch.setattr(headers, "_in_environment", found.get)
    monkeypatch.setenv("CUDA_LLM_NVCC", str(tmp_path / "cuda-13.0" / "bin" / "nvcc"))
    caches = (
        headers.toolkit_include_dirs,
        headers.borrowed_include_dirs,
        headers.borrowed_mismatch,
        headers.toolkit_version,
    )
    for cached in caches:
        cached.cache_clear()
    try:
        dirs = headers.toolkit_include_dirs()
        assert dirs == (str(wheel), str(include / "cccl")), dirs
        assert headers.borrowed_include_dirs() == (str(include / "cccl"),)
        assert headers.borrowed_mismatch() is None  # both CUDA 13.0
        headers.toolkit_version.cache_clear()
        headers.borrowed_mismatch.cache_clear()
        (wheel / "cuda_runtime_api.h").write_text("#define CUDART_VERSION 13020\n")
        mismatch = headers.borrowed_mismatch()
        assert mismatch is not None and "CUDA 13.0 toolkit of nvcc" in mismatch
        assert "NVRTC's CUDA 13.2" in mismatch and str(include / "cccl") in mismatch
    finally:
        for cached in caches:
            cached.cache_clear()


# --- CUTLASS's `<cccl/cuda/std/...>` (CUDA 13) with CCCL outside the runtime's directory -------

CUTLASS_STYLE = """\
#if (__CUDACC_VER_MAJOR__ >= 13)
  #define CUDA_STD_HEADER(header) <cccl/cuda/std/header>
#else
  #define CUDA_STD_HEADER(header) <cuda/std/header>
#endif
#include CUDA_STD_HEADER(cstdint)
__global__ void k(cuda::std::uint32_t* x) { x[threadIdx.x] = 1u; }
"""


def test_cutlass_cccl_spelling_is_found_where_ccccl_is_not_under_the_runtime(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    cccl = _cccl_dir()
    _use_dirs(monkeypatch, _wheel_without_cccl(tmp_path), cccl)
    _unit, result = _compile(tmp_path, CUTLASS_STYLE)
    assert result.ok and result.errors == (), [d.message for d in result.errors]


# --- the std names header: only headers the toolkit's libcu++ has, never NVRTC's own names ------


def test_std_names_header_takes_a_missing_public_header_from_its_own_header() -> None:
    have = {"cuda/std/utility", "cuda/std/__algorithm/min.h"}
    text = std_names.header_text(["min", "max", "move"], (), have.__contains__)
    assert "#include <cuda/std/__algorithm/min.h>" in text
    assert "cuda/std/algorithm" not in text and "::max;" not in text  # no header: not given
    assert "using ::cuda::std::min;" in text
    # NVRTC declares std::move itself where it says so: libcu++'s only where it does not
    assert "#ifndef __NV_BUILTIN_MOVE_FORWARD\nusing ::cuda::std::move;\n#endif" in text
    assert std_names.given(text) == {"min", "move"}


def _cccl_30() -> Path:
    """A CCCL without `<cuda/std/algorithm>` and with its own `cuda::std::move` (CUDA 13.0's)."""
    for root in sorted(Path("/usr/local").glob("cuda*/include/cccl")):
        if (root / "cuda" / "std" / "utility").is_file() and not (
            root / "cuda" / "std" / "algorithm"
        ).exists():
            return root
    pytest.skip("no CUDA 13.0 toolkit's CCCL (3.0) here")


STD_NAMES_KERNEL = """\
#include <algorithm>
#include <utility>
#include <cstdint>
__device__ uint64_t take(uint64_t v) { return std::move(v); }
__global__ void k(uint64_t* x, int n) { x[0] = take(std::min<uint64_t>(x[1], n)); }
"""


def test_std_names_with_cuda_13_0s_cccl_compile_cleanly(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # the GPU machine: XGBoost, LightGBM, dlib (`cuda/std/algorithm` not found) and numba-cuda's
    # cta_barrier.cu (`std::move` ambiguous between NVRTC's and CCCL 3.0's)
    _use_dirs(monkeypatch, _wheel_without_cccl(tmp_path), _cccl_30())
    unit, result = _compile(tmp_path, STD_NAMES_KERNEL)
    assert std_names.HEADER in unit.headers
    assert result.ok and result.errors == (), [d.message for d in result.errors]


# --- an error in what cuda-llm wrote is never shown as the user's --------------------------------


def test_errors_of_our_own_headers_are_warnings_that_say_so() -> None:
    changes = Rewrites(
        frozenset(),
        frozenset(),
        frozenset({std_names.HEADER, "cccl/cuda/std/cstdint"}),
        ours=frozenset({std_names.HEADER, "cccl/cuda/std/cstdint"}),
        std_given=frozenset({"move"}),
    )
    ours = Diagnostic(
        4, 1, 4, 2, "error",
        f'in included file "{std_names.HEADER}" line 6: cannot open source file "cuda/std/x"',
    )  # fmt: skip
    ambiguous = Diagnostic(
        14, 15, 14, 20, "error",
        'more than one instance of overloaded function "std::move" matches the argument list: '
        'function template "cuda::std::__4::remove_reference_t<_Tp> &&cuda::std::__4::move()"',
    )  # fmt: skip
    planted = Diagnostic(9, 3, 9, 4, "error", 'identifier "y" is undefined')
    wrong_call = Diagnostic(
        11, 3, 11, 4, "error",
        'no instance of function template "cuda::std::__4::move" matches the argument list',
    )  # fmt: skip
    out = be_honest([ours, ambiguous, planted, wrong_call], changes)
    assert [d.severity for d in out] == ["warning", "warning", "error", "error"]
    assert "cuda-llm wrote for NVRTC" in out[0].message
    assert "libcu++'s here, given by cuda-llm" in out[1].message


# --- the nvcc tier: the file's directory answers its quoted includes only -------------------------

needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="needs nvcc (the nvcc extra)")


@needs_nvcc
def test_a_projects_math_h_beside_the_file_is_not_the_systems(tmp_path: Path) -> None:
    # XGBoost's src/common/math.h beside common.cu: nvcc run on the file finds glibc's <math.h>
    # for <cmath>; the nvcc tier gave the file's directory as -I, and 44 false errors followed
    (tmp_path / "math.h").write_text('#error "the project\'s math.h read as <math.h>"\n')
    (tmp_path / "common.h").write_text("#pragma once\n#include <cmath>\n")
    text = (
        '#include "common.h"\n'
        "__global__ void k(float* x) { x[0] = isnan(x[1]) ? 0.0f : sqrtf(x[1]); }\n"
    )
    path = tmp_path / "common.cu"
    path.write_text(text)
    result = compile_file(text, path, timeout=300)
    assert result.ok, result.log
