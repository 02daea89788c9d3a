"""Host-library headers (cuBLAS, cuSPARSE, NCCL...) as nvcc resolves them (issue 38, item 4).

The GPU machine's PyTorch venv has CUDA 13.0 runtime wheels with a 13.1 cuBLAS in the same
`nvidia/cu13/include`: its `<cublas_api.h>` declares host functions taking `cudaEmulation...`
types the 13.0 runtime lacks, and NVRTC, reading it raw from its own toolkit directory, gave
four errors in every file including cuBLAS (`check` and `bench`). Here a cuBLAS-shaped header
beside NVRTC's toolkit names a runtime type no runtime has (`cudaEmulationFutureKind`), the
same failure on any NVRTC version; its host API must be blanked, its own `"driver_types.h"`
must be NVRTC's, it must come from the nvcc's toolkit first, and a version mismatch (runtime
names the library uses that NVRTC's runtime lacks, not a version number unlike CUDA's) is one
warning naming both versions. NVRTC runs in this process so the toolkit directories can be
faked (`headers.toolkit_include_dirs`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_llm_lsp.compile import device_unit, headers, nvrtc
from cuda_llm_lsp.compile.types import CompileOptions
from cuda_llm_lsp.compile.unit import includes

ROOT = Path(__file__).resolve().parents[2]

FILE = """\
#include <cublas_v2.h>
#include "cublasLt.h"

__global__ void scale(float* x, int n) { if (threadIdx.x < n) x[threadIdx.x] *= 2.0f; }

void run(cublasHandle_t h, float* x) { cublasSscal(h, 32, nullptr, x, 1); }
"""


def _cublas(directory: Path, minor: int, marker: str, *, newer_runtime: bool = True) -> Path:
    """A cuBLAS 13.`minor` include directory shaped like the wheel's (a version header, host
    declarations naming runtime types, toolkit includes beside it); `newer_runtime`: one of
    them is a type no runtime has (the mismatch), else only types every runtime has."""
    emulation = (
        "cublasStatus_t cublasGetEmulationSpecialValuesSupport(cublasHandle_t h,\n"
        "                                                     cudaEmulationFutureKind* mask);\n"
        if newer_runtime
        else ""
    )
    directory.mkdir(parents=True)
    (directory / "cublas_v2.h").write_text('#pragma once\n#include "cublas_api.h"\n')
    (directory / "cublasLt.h").write_text('#pragma once\n#include "cublas_api.h"\n')
    (directory / "cublas_api.h").write_text(
        f"""#pragma once
// {marker}
#include "driver_types.h"
#include "library_types.h"
#define CUBLAS_VER_MAJOR 13
#define CUBLAS_VER_MINOR {minor}
#define CUBLAS_VER_PATCH 0
typedef enum {{ CUBLAS_STATUS_SUCCESS = 0 }} cublasStatus_t;
struct cublasContext;
typedef struct cublasContext* cublasHandle_t;
cublasStatus_t cublasSscal(cublasHandle_t h, int n, const float* a, float* x, int incx);
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s);
{emulation}"""
    )
    # a copy of another runtime's header beside it: never NVRTC's to read
    (directory / "driver_types.h").write_text('#error "the library directory\'s copy"\n')
    return directory


@pytest.fixture
def toolkit(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):  # type: ignore[no-untyped-def]
    """NVRTC's toolkit directories with `extra` after them; the nvcc's include dirs `nvcc`."""
    real = headers.toolkit_include_dirs()
    if headers.nvrtc_toolkit_version() is None:
        pytest.skip("NVRTC's runtime headers are not installed")

    def use(extra: tuple[Path, ...] = (), nvcc: tuple[Path, ...] = ()) -> None:
        dirs = (*real, *map(str, extra))
        monkeypatch.setattr(headers, "toolkit_include_dirs", lambda: dirs)
        monkeypatch.setattr(includes, "_nvcc_include_dirs", lambda: tuple(map(str, nvcc)))
        headers.runtime_names.cache_clear()

    yield use
    headers.runtime_names.cache_clear()  # the names of the faked directories go with them


def _compile(tmp_path: Path):  # type: ignore[no-untyped-def]
    source = tmp_path / "k.cu"
    source.write_text(FILE)
    unit = device_unit.build_device_unit(FILE, source, ())
    options = CompileOptions(
        arch="sm_90", include_paths=(), defines=(), extra_flags=(), std="c++17"
    )
    return unit, nvrtc.compile_unit(unit, options, ("scale",))


def test_a_newer_cublas_beside_nvrtcs_runtime_builds_with_one_warning(
    toolkit, tmp_path: Path
) -> None:
    wheels = _cublas(tmp_path / "cu13" / "include", 1, "wheel")
    toolkit(extra=(wheels,))
    unit, result = _compile(tmp_path)
    assert result.ok and result.errors == (), [d.message for d in result.errors]
    assert result.cubin is not None
    ours, where = headers.nvrtc_toolkit_version() or ("", "")
    (warning,) = [p.message for p in unit.problems]  # two cuBLAS headers: one warning
    assert f"cuBLAS 13.1 headers ({wheels})" in warning
    assert f"CUDA {ours} runtime headers ({where})" in warning
    assert "cudaEmulationFutureKind" in warning  # what the runtime lacks
    # its host API is blanked: the unknown type never reaches NVRTC
    assert "cudaEmulationFutureKind" not in unit.headers["cublas_api.h"]


def test_the_nvcc_toolkits_cublas_comes_before_nvrtcs_wheel_set(toolkit, tmp_path: Path) -> None:
    ours, _ = headers.nvrtc_toolkit_version() or ("13.0", "")
    minor = int(ours.split(".")[1])
    wheels = _cublas(tmp_path / "wheels", minor + 1, "wheel")
    system = _cublas(tmp_path / "cuda" / "include", minor, "system", newer_runtime=False)
    toolkit(extra=(wheels,), nvcc=(system,))
    unit, result = _compile(tmp_path)
    assert result.ok, [d.message for d in result.errors]
    assert "system" in unit.headers["cublas_api.h"]
    assert [p.message for p in unit.problems] == []  # NVRTC's runtime has what it uses


def _cufft(directory: Path) -> Path:
    """A cuFFT 12.5 include directory as CUDA 13's wheel has it: numbered its own way, with a
    runtime-style type of its own (`cudaLibXtDesc`, declared in its `cudalibxt.h`)."""
    directory.mkdir(parents=True)
    (directory / "cudalibxt.h").write_text(
        "#pragma once\nstruct cudaXtDesc_t;\n"
        "typedef struct cudaLibXtDesc_t {\n  int version;\n  struct cudaXtDesc_t* descriptor;\n"
        "} cudaLibXtDesc;\n"
    )
    (directory / "cufft.h").write_text(
        '#pragma once\n#include "driver_types.h"\n#include "library_types.h"\n'
        "#define CUFFT_VER_MAJOR 12\n#define CUFFT_VER_MINOR 5\n"
        "typedef int cufftHandle;\ntypedef enum { CUFFT_SUCCESS = 0 } cufftResult;\n"
        "cufftResult cufftSetStream(cufftHandle plan, cudaStream_t stream);\n"
    )
    (directory / "cufftXt.h").write_text(
        '#pragma once\n#include "cudalibxt.h"\n#include "cufft.h"\n'
        "cufftResult cufftXtFree(cudaLibXtDesc* descriptor);\n"
        "cufftResult cufftXtMakePlanMany(cufftHandle plan, cudaDataType inputtype);\n"
    )
    return directory


def test_libraries_numbered_their_own_way_get_no_warning(toolkit, tmp_path: Path) -> None:
    """cuda-toolkit 13.5's wheels pin cuBLAS 13.8, cuFFT 12.4 and cuSPARSE 12.8: a version
    number unlike CUDA's is no mismatch. Only runtime names the runtime lacks are."""
    cublas = _cublas(tmp_path / "cublas", 10, "cuBLAS 13.10", newer_runtime=False)
    cufft = _cufft(tmp_path / "cufft")
    toolkit(nvcc=(cublas, cufft))  # found first, and not read as NVRTC's runtime
    text = FILE.replace('#include "cublasLt.h"', "#include <cufftXt.h>")
    source = tmp_path / "k.cu"
    source.write_text(text)
    unit = device_unit.build_device_unit(text, source, ())
    assert "cufftXt.h" in unit.headers and "cublas_api.h" in unit.headers
    assert [p.message for p in unit.problems] == []
    assert headers.version_mismatch("cuFFT", cufft / "cufft.h") is None
    assert "cudaLibXtDesc" in headers.declared_names(cufft)  # its own, not the runtime's
    assert "cudaLibXtDesc" not in headers.runtime_names()
    assert headers.version_mismatch("cuBLAS", cublas / "cublas_v2.h") is None


def test_host_library_names() -> None:
    assert headers.host_library("cublas_v2.h") == "cuBLAS"
    assert headers.host_library("cublasLt.h") == "cuBLAS"
    assert headers.host_library("cusparse.h") == "cuSPARSE"
    assert headers.host_library("nccl.h") == "NCCL"
    assert headers.host_library("cufftdx.hpp") is None  # device code
    assert headers.host_library("curand_kernel.h") is None
    assert headers.host_library("cuda_fp16.h") is None


def test_versions_are_read_from_the_headers(tmp_path: Path) -> None:
    lib = _cublas(tmp_path / "inc", 1, "x")
    assert headers.library_version("cuBLAS", lib / "cublas_v2.h") == "13.1"
    (tmp_path / "rt").mkdir()
    (tmp_path / "rt" / "cuda_runtime_api.h").write_text("#define CUDART_VERSION  13000\n")
    assert headers.toolkit_version(str(tmp_path / "rt")) == "13.0"


def test_check_reads_cublas_from_the_nvcc_toolkit_with_one_mismatch_warning(
    tmp_path: Path,
) -> None:
    """`cuda-llm check` end to end (compile processes, the cache): the nvcc in use
    (`CUDA_LLM_NVCC`) belongs to a toolkit whose `include` has a cuBLAS of another version;
    device code using a cuBLAS enum builds, the file gets one warning naming both versions."""
    ours = headers.nvrtc_toolkit_version()
    if ours is None:
        pytest.skip("NVRTC's runtime headers are not installed")
    major, minor = (int(p) for p in ours[0].split("."))
    kit = tmp_path / "kit"
    _cublas(kit / "include", minor + 1, "nvcc's toolkit")
    (kit / "bin").mkdir()
    nvcc = kit / "bin" / "nvcc"
    nvcc.write_text("#!/bin/sh\nexit 1\n")  # never run by the fast tier: its place matters
    nvcc.chmod(0o755)
    source = tmp_path / "k.cu"
    source.write_text(
        "#include <cublas_v2.h>\n"
        "__global__ void status(int* s) { *s = CUBLAS_STATUS_SUCCESS; }\n"
        "void run(cublasHandle_t h, float* x) { cublasSscal(h, 32, nullptr, x, 1); }\n"
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.update(CUDA_LLM_NVCC=str(nvcc), CUDA_LLM_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run(
        # the fast tier's reading: the stand-in nvcc only says where the toolkit is
        [sys.executable, "-m", "cuda_llm_lsp.cli", "check", "--no-nvcc", "--format=json", source],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=env,
    )
    diagnostics = json.loads(done.stdout)["diagnostics"]
    assert [d for d in diagnostics if d["severity"] == "error"] == [], diagnostics
    (warning,) = [d["message"] for d in diagnostics if "cuBLAS" in d["message"]]
    assert f"cuBLAS {major}.{minor + 1} headers ({kit / 'include'})" in warning
    assert f"CUDA {ours[0]} runtime headers" in warning
