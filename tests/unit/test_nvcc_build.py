"""nvcc as the evaluator's builder of last resort (`evaluate.nvcc_build`), with real NVRTC/nvcc.

A file NVRTC cannot build (a device-side launch needs `-rdc=true` and the device runtime) is
built by `nvcc -cubin`, and every candidate for it too; a plain file stays NVRTC's; nvcc is
only ever asked for device code (`-cubin`, never `-c`, an object or a link of host code)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from cuda_llm_lsp.compile import nvcc as nvcc_module
from cuda_llm_lsp.compile.nvcc import find_nvcc
from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.evaluate.candidate import CandidateRejected, build_binary
from cuda_llm_lsp.evaluate.nvcc_build import INSTANCE_VARIABLE
from cuda_llm_lsp.evaluate.types import KernelBinary
from tests.unit.test_bench_cli import FAST_TWICE, bench

pytestmark = pytest.mark.skipif(find_nvcc() is None, reason="no nvcc here")

# `parent` launches `child` from device code: NVRTC refuses it without -rdc (and cannot link
# the device runtime); nvcc builds it with -rdc=true and `nvcc -dlink -cubin -lcudadevrt`.
DEVICE_LAUNCH = """
__global__ void child(float* x) { x[threadIdx.x] *= 2.0f; }

/* @cuda-llm
sizes.n = [32]
grid = 1
block = 1
args.x = "float32[n]"
args.n = "n"
*/
__global__ void parent(float* x, int n) {
    if (threadIdx.x == 0) child<<<1, n>>>(x);
}
"""

CANDIDATE = """__global__ void parent(float* x, int n) {
    if (threadIdx.x == 0) child<<<2, n / 2>>>(x);
    if (threadIdx.x == 0) child<<<2, n / 2>>>(x + n / 2);
}
"""

# a template kernel the host code never instantiates: the spec's instance is evaluated
TEMPLATE = """
template <typename T> __global__ void child(T* x) { x[threadIdx.x] *= T(2); }

/* @cuda-llm
sizes.n = [32]
grid = 1
block = 1
args.x = "float64[n]"
args.n = "n"
instance = "grow<double>"
*/
template <typename T> __global__ void grow(T* x, int n) {
    if (threadIdx.x == 0) child<T><<<1, n>>>(x);
}
"""

PLAIN = """
/* @cuda-llm
sizes.n = [32]
grid = 1
block = 32
args.x = "float32[n]"
args.n = "n"
*/
__global__ void scale(float* x, int n) { if (threadIdx.x < n) x[threadIdx.x] *= 2.0f; }
"""


@pytest.fixture
def nvcc_commands(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Every command line `compile.nvcc` starts (they still run)."""
    seen: list[list[str]] = []
    real = subprocess.Popen

    def recording(command, *args, **kwargs):  # type: ignore[no-untyped-def]
        argv = [str(c) for c in command]
        # nvcc runs under `tools.guarded`'s watchdog: its own argv follows the "--"
        argv = argv[argv.index("--") + 1 :] if "--" in argv[:6] else argv
        if Path(argv[0]).name == "nvcc":  # not the compile pool's processes started meanwhile
            seen.append(argv)
        return real(command, *args, **kwargs)

    monkeypatch.setattr(nvcc_module.subprocess, "Popen", recording)
    return seen


def _file(tmp_path: Path, text: str, name: str = "k.cu") -> tuple[str, Path]:
    path = tmp_path / name
    path.write_text(text)
    return text, path


def test_a_device_side_launch_is_built_by_nvcc_with_the_mangled_entry(
    tmp_path: Path, nvcc_commands: list[list[str]]
) -> None:
    text, path = _file(tmp_path, DEVICE_LAUNCH)
    built = build_binary(text, path, "parent", Settings(), arch="sm_90")
    assert isinstance(built, KernelBinary), built
    assert built.builder == "nvcc"
    assert built.entry == "_Z6parentPfi"  # not extern "C": the mangled symbol ptxas named
    assert built.cubin.startswith(b"\x7fELF") and built.arch == "sm_90"
    assert built.resources is not None and built.resources.registers > 0
    compiles = [c for c in nvcc_commands if "-cubin" in c and "-dlink" not in c]
    assert compiles and all("-c" not in c for c in compiles)
    assert any("-rdc=true" in c for c in compiles)
    (link,) = [c for c in nvcc_commands if "-dlink" in c]
    assert "-lcudadevrt" in link and not any(a.endswith(".cu") for a in link)


def test_a_plain_file_is_still_built_by_nvrtc(
    tmp_path: Path, nvcc_commands: list[list[str]]
) -> None:
    text, path = _file(tmp_path, PLAIN)
    built = build_binary(text, path, "scale", Settings(), arch="sm_90")
    assert isinstance(built, KernelBinary), built
    assert built.builder == "nvrtc"
    assert nvcc_commands == []
    candidate = build_binary(
        text, path, "scale", Settings(), arch="sm_90", kernel_source=PLAIN.split("*/")[1]
    )
    assert isinstance(candidate, KernelBinary) and candidate.builder == "nvrtc"
    assert nvcc_commands == []


def test_a_candidate_for_an_nvcc_built_original_is_built_by_nvcc_as_device_code_only(
    tmp_path: Path, nvcc_commands: list[list[str]]
) -> None:
    text, path = _file(tmp_path, DEVICE_LAUNCH)
    hostile = CANDIDATE + 'int main() { return system("touch pwned"); }\n'
    built = build_binary(text, path, "parent", Settings(), arch="sm_90", kernel_source=hostile)
    assert isinstance(built, KernelBinary), built
    assert built.builder == "nvcc" and built.entry == "_Z6parentPfi"
    assert nvcc_commands
    for command in nvcc_commands:  # device code only: no host object, nothing linked but cubins
        assert "-c" not in command and "-cubin" in command
        assert not any(a.endswith((".o", ".obj", ".so")) or a == "-run" for a in command)
        outputs = [command[i + 1] for i, a in enumerate(command) if a == "-o"]
        assert all(o.endswith(".cubin") for o in outputs), command
    assert not (tmp_path / "pwned").exists()


def test_a_candidate_error_under_nvcc_is_shown_on_the_candidates_lines(tmp_path: Path) -> None:
    text, path = _file(tmp_path, DEVICE_LAUNCH)
    broken = "__global__ void parent(float* x, int n) {\n    undefined_name(x);\n}\n"
    built = build_binary(text, path, "parent", Settings(), arch="sm_90", kernel_source=broken)
    assert isinstance(built, CandidateRejected) and built.status == "compile_error"
    assert "undefined_name" in built.message and "line 2 of the candidate" in built.message


def test_a_template_instance_the_host_never_launches_gets_its_mangled_entry(
    tmp_path: Path,
) -> None:
    text, path = _file(tmp_path, TEMPLATE)
    built = build_binary(text, path, "grow", Settings(), arch="sm_90")
    assert isinstance(built, KernelBinary), built
    assert built.builder == "nvcc"
    assert built.entry == "_Z4growIdEvPT_i"  # grow<double>(double*, int)
    assert INSTANCE_VARIABLE not in text


def test_bench_on_the_driver_double_says_nvcc_built_the_file(tmp_path: Path) -> None:
    """`cuda-llm bench` end to end on the CPU: NVRTC cannot build the file (a device-side
    launch elsewhere in it), nvcc does, and the run says so; the fake driver runs the kernel."""
    spawner = (
        '\nextern "C" __global__ void spawn(const float* x, float* y, int n) {\n'
        "    twice<<<1, 1>>>(x, y, n);\n}\n"
    )
    f = tmp_path / "twice.cu"
    f.write_text(FAST_TWICE + spawner)
    out = bench(str(f), "--kernel", "twice", driver="tests.unit.fake_cuda_driver", home=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "built by nvcc -cubin" in out.stdout
    js = bench(
        str(f),
        "--kernel",
        "twice",
        "--format",
        "json",
        driver="tests.unit.fake_cuda_driver",
        home=tmp_path,
    )
    (report,) = json.loads(js.stdout)["kernels"]
    assert report["status"] == "ok" and report["builder"] == "nvcc"


# Thrust's algorithms called inside a kernel: NVRTC's unit leaves the kernel out (Thrust's
# headers are not NVRTC's), so it compiles to nothing and lowers no instance; nvcc builds it.
THRUST_IN_KERNEL = """
#include <thrust/reduce.h>
#include <thrust/execution_policy.h>

template <typename T>
__global__ void total(const T* first, int n, T* result) {
    *result = thrust::reduce(thrust::device, first, first + n, T(0));
}
"""


def test_a_kernel_nvrtc_compiles_to_nothing_is_built_by_nvcc(tmp_path: Path) -> None:
    source = tmp_path / "total.cu"
    source.write_text(THRUST_IN_KERNEL)
    built = build_binary(
        THRUST_IN_KERNEL, source, "total", Settings(), instance="total<float>", arch="sm_90"
    )
    assert isinstance(built, KernelBinary), built
    assert built.builder == "nvcc" and built.entry == "_Z5totalIfEvPKT_iPS0_", built.entry


def test_an_entry_the_demangler_cannot_read_is_found_by_its_source_name() -> None:
    from cuda_llm_lsp.evaluate.nvcc_build import entry_symbol
    from cuda_llm_lsp.source.kernels import find_kernels

    kernel = find_kernels("template <class T> __global__ void gemm_device(T t) {}")[0]
    unreadable = "_Z11gemm_deviceIN4cute5tupleIJiiiEEEEvT_" + "X" * 40  # not a valid mangling
    other = "_ZN3cub17CUB_300001_SM_9006detail11EmptyKernelIvEEvv"
    assert entry_symbol([unreadable, other], kernel, "gemm_device<int>") == unreadable
