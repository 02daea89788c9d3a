"""The nvcc tier (`cuda-llm check`, where nvcc is found; `--no-nvcc` is the fast tier alone):
nvcc's whole-file verdict replaces the fast tier's.

Planted errors the fast tier cannot see (they appear only when host code instantiates a
template) are reported; a fast-tier error nvcc does not report is withdrawn.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from cuda_llm_lsp.compile.nvcc import find_nvcc
from tests.support.cli import check_json

pytestmark = pytest.mark.skipif(
    find_nvcc() is None or shutil.which("g++") is None, reason="needs nvcc and g++"
)


def check(tmp_path: Path, files: dict[str, str], *flags: str) -> tuple[int, dict]:
    return check_json(tmp_path, files, *flags)


HOST_TEMPLATE = {
    "util.h": "#pragma once\n"
    "template <typename T> __host__ __device__ T half_of(T x) { return x.value / 2; }\n",
    "nested/deep.h": "#pragma once\n"
    "template <typename T> __device__ T twice(T x) { return x.missing * 2; }\n"
    "template <typename T> __global__ void apply(T* o) { o[0] = twice(o[0]); }\n",
    "main.cu": '#include "util.h"\n#include "nested/deep.h"\n'
    "__global__ void k(float* o) { o[threadIdx.x] = 1.0f; }\n"
    "int main() {\n  int bad = half_of(4);\n  apply<int><<<1, 1>>>(nullptr);\n"
    "  k<<<1, 1>>>(nullptr);\n  return bad;\n}\n",
}


def test_errors_only_host_instantiation_shows_are_reported_with_nvcc(tmp_path: Path) -> None:
    """The issue's missed kinds: a __host__ __device__ header template called from host code,
    a __device__ template in a nested header reached through a launched template kernel."""
    _, fast = check(tmp_path, HOST_TEMPLATE, "--no-nvcc")
    fast_errors = [d for d in fast["diagnostics"] if d["severity"] == "error"]
    status_nvcc, full = check(tmp_path, HOST_TEMPLATE, "--nvcc")
    errors = [d["message"] for d in full["diagnostics"] if d["severity"] == "error"]
    assert status_nvcc == 1
    assert any('util.h" line 2' in e and "class type" in e for e in errors), errors
    assert any('deep.h" line 2' in e and "class type" in e for e in errors), errors
    assert len(errors) > len(fast_errors)


def test_a_fast_tier_error_nvcc_does_not_report_is_withdrawn(tmp_path: Path) -> None:
    files = {
        "main.cu": "#ifdef __CUDACC_RTC__\n#error only NVRTC defines __CUDACC_RTC__\n#endif\n"
        "__global__ void k(float* o) { o[0] = 1.0f; }\n"
    }
    status, fast = check(tmp_path, files, "--no-nvcc")
    assert status == 1 and fast["diagnostics"][0]["line"] == 2
    status, full = check(tmp_path, files, "--nvcc")
    assert status == 0 and full["diagnostics"] == [], full
    assert full["kernels"][0]["name"] == "k"


HOST_LAUNCHED = {
    "kernels.cuh": "#pragma once\n"
    "template <typename T, int B> __global__ void tile(T* o) {\n"
    "  __shared__ T s[B];\n"
    "  s[threadIdx.x] = o[threadIdx.x]; __syncthreads(); o[threadIdx.x] = s[B - 1 - threadIdx.x];\n"
    "}\n",
    "main.cu": '#include "kernels.cuh"\n'
    "#include <cub/block/block_reduce.cuh>\n"
    "template <typename T, int B> __global__ void fill(T* o) {\n"
    "  __shared__ T s[B];\n"
    "  s[threadIdx.x] = o[threadIdx.x]; __syncthreads(); o[threadIdx.x] = s[B - 1 - threadIdx.x];\n"
    "}\n"
    "template <typename T> void run(T* p) {\n"  # host code alone instantiates these
    "  fill<T, 256><<<1, 256>>>(p);\n  fill<T, 64><<<1, 64>>>(p);\n  tile<T, 128><<<1, 128>>>(p);\n"
    "}\n"
    "namespace ns { __global__ void plain(float* o) { o[threadIdx.x] = 1.0f; } }\n"
    "int main() { run<float>(nullptr); run<int>(nullptr); ns::plain<<<1, 1>>>(nullptr); }\n",
}


def ptxas_registers(tmp_path: Path) -> dict[str, int]:
    """Registers per entry function as nvcc -Xptxas -v prints them, read independently."""
    nvcc = find_nvcc()
    assert nvcc is not None
    done = subprocess.run(
        [str(nvcc), "-c", "main.cu", "-o", "main.o", "-arch=sm_90", "-Xptxas", "-v"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    found: dict[str, int] = {}
    entry = None
    for line in (done.stdout + done.stderr).splitlines():
        if "Compiling entry function" in line:
            entry = line.split("'")[1]
        elif entry and "Used " in line:
            found[entry] = int(line.split("Used ")[1].split()[0])
            entry = None
    return found


def test_nvcc_gives_every_instance_host_code_launches_its_own_figures(tmp_path: Path) -> None:
    """Template kernels only host templates launch: the fast tier has no figures for them; the
    nvcc tier lists each instance ptxas compiled, with ptxas's registers and shared memory."""
    _, fast = check(tmp_path, HOST_LAUNCHED, "--arch", "sm_90", "--no-nvcc")
    assert not any(k["registers"] for k in fast["kernels"] if k["name"] == "fill")
    status, full = check(tmp_path, HOST_LAUNCHED, "--arch", "sm_90", "--nvcc")
    assert status == 0, full["diagnostics"]
    fill = {k["instance"]: k for k in full["kernels"] if k["name"] == "fill"}
    assert set(fill) == {"fill<float, 256>", "fill<float, 64>", "fill<int, 256>", "fill<int, 64>"}
    assert fill["fill<float, 256>"]["shared_bytes"] == 1024
    assert fill["fill<int, 64>"]["shared_bytes"] == 256
    assert all(k["line"] == 3 for k in fill.values())
    tile = [k for k in full["kernels"] if k["name"] == "tile"]  # defined in the header
    assert {k["file"] for k in tile} == {"kernels.cuh"} and len(tile) == 2
    (plain,) = [k for k in full["kernels"] if k["name"] == "plain"]
    assert plain["registers"] and plain["line"] == 12
    listed = sorted(k["registers"] for k in full["kernels"])
    assert listed == sorted(ptxas_registers(tmp_path).values())  # every kernel, nvcc's figures


CUB_REDUCE = {
    "main.cu": "#include <cub/cub.cuh>\n"
    "__global__ void mine(float* o) { o[threadIdx.x] = 2.0f; }\n"
    "int main() {\n"
    "  float *in = nullptr, *out = nullptr; void* tmp = nullptr; size_t bytes = 0;\n"
    "  cub::DeviceReduce::Sum(tmp, bytes, in, out, 1024);\n"
    "  mine<<<1, 32>>>(out);\n}\n"
}


def test_library_kernels_nvcc_compiles_are_listed_as_the_librarys(tmp_path: Path) -> None:
    status, full = check(tmp_path, CUB_REDUCE, "--arch", "sm_90", "--nvcc")
    assert status == 0, full["diagnostics"]
    library = [k for k in full["kernels"] if k.get("library")]
    assert library and all(k["name"].startswith("cub::") for k in library)
    assert any("DeviceReduceKernel<" in k["name"] for k in library)
    assert [k["name"] for k in full["kernels"] if not k.get("library")] == ["mine"]


def test_a_relative_include_directory_reaches_nvcc(tmp_path: Path) -> None:
    """nvcc runs in a temporary directory: `-I inc` must mean the caller's `inc`."""
    files = {
        "inc/scale.h": "#pragma once\n__device__ inline float scale(float x) { return 2 * x; }\n",
        "main.cu": "#include <scale.h>\n"
        "__global__ void k(float* o) { o[threadIdx.x] = scale(o[threadIdx.x]); }\n",
    }
    status, full = check(tmp_path, files, "-I", "inc", "--nvcc")
    assert status == 0 and full["diagnostics"] == [], full["diagnostics"]


def test_an_arch_specific_target_compiles_for_that_target_alone(tmp_path: Path) -> None:
    """`--arch sm_90a` (ThunderKittens' compile_flags.txt): nvcc 13's `-arch=sm_90a` also
    assembles compute_90 PTX for plain sm_90, where wgmma does not exist, and failed the file;
    its Makefile's `-gencode arch=compute_90a,code=sm_90a` is what the check must run."""
    files = {
        "main.cu": "__global__ void k(float* o) {\n"
        '  asm volatile("wgmma.fence.sync.aligned;\\n" ::: "memory");\n'
        "  o[threadIdx.x] = 1.0f;\n}\n",
    }
    status, full = check(tmp_path, files, "--arch", "sm_90a", "--nvcc")
    assert status == 0 and full["diagnostics"] == [], full["diagnostics"]
    (kernel,) = full["kernels"]
    assert kernel["registers"]


LAUNCHER_ONLY = {
    "main.cu": "struct Max { __device__ float operator()(float a, float b) const; };\n"
    "template <typename T, typename Op> __global__ void reduce(T* o, Op op) {\n"
    "  o[0] = op.apply(o[0], o[1]);\n"  # Max has no apply: an error only instantiation shows
    "}\n"
    "template <typename T> void launch(T* p) { reduce<<<1, 32>>>(p, Max()); }\n"
    "int main() { launch<float>(nullptr); }\n"
}


def test_a_kernel_only_a_host_launcher_template_launches_gets_nvccs_error_at_its_line(
    tmp_path: Path,
) -> None:
    """Issue 38 (a real `cub::Max` error): the fast tier never instantiates such a kernel, so
    it has nothing to say; nvcc's verdict, the default, shows the error on its own line."""
    status, fast = check(tmp_path, LAUNCHER_ONLY, "--no-nvcc")
    assert status == 0 and fast["diagnostics"] == [], fast["diagnostics"]
    status, full = check(tmp_path, LAUNCHER_ONLY)
    assert status == 1
    errors = [d for d in full["diagnostics"] if d["severity"] == "error"]
    assert [(e["line"], "apply" in e["message"]) for e in errors] == [(3, True)], errors


# dynamic parallelism: a kernel launching another, as its build compiles it (`-rdc=true`)
DEVICE_LAUNCH = {
    "main.cu": "__global__ void child(int* p) { p[threadIdx.x] = 1; }\n"
    "__global__ void parent(int* p) { child<<<1, 32>>>(p); }\n"
    "int main() { parent<<<1, 1>>>(nullptr); return 0; }\n",
}


@pytest.mark.parametrize("rdc", ["-rdc=true", "-dc", "--relocatable-device-code=true"])
def test_a_projects_rdc_reaches_both_tiers_no_device_launch_error(tmp_path: Path, rdc: str) -> None:
    """Was: the project's `-rdc=true` ignored (compile_flags.txt, compile_commands.json) and the
    nvcc tier given NVRTC's flags' nvcc-only ones alone: nvcc said "kernel launch from
    __device__ or __global__ functions requires separate compilation mode" where the build
    compiles, and the fast tier's ptxas an unresolved extern. Both now compile it relocatable."""
    files = {**DEVICE_LAUNCH, "compile_flags.txt": f"{rdc}\n"}
    for tier in ("--nvcc", "--no-nvcc"):
        status, report = check(tmp_path, files, "--arch", "sm_90", tier)
        assert status == 0 and report["diagnostics"] == [], (tier, report["diagnostics"])
        figures = {k["name"]: k["registers"] for k in report["kernels"]}
        assert set(figures) == {"child", "parent"} and all(figures.values()), (tier, figures)
