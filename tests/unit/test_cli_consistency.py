"""The CLI's subcommands agree (issue 15, item 6): usage problems are exit 2 and are found before
the GPU is asked for; JSON failures carry `error`; `check` says what it checked.

One test per finding; each runs the real `cuda-llm` entry point in a subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "benchmarks" / "suite"

TEMPLATE = """template <typename T>
__global__ void scale_kernel(T* y, T a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] *= a;
}
template __global__ void scale_kernel<float>(float*, float, int);
"""


def cli(tmp_path: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """`cuda-llm ARGS` with no GPU driver (the double's module name does not exist)."""
    env = dict(
        os.environ,
        CUDA_LLM_LSP_DRIVER="no_such_driver_module",
        CUDA_LLM_CACHE_DIR=str(tmp_path / "cache"),
        CUDA_LLM_DATA_DIR=str(tmp_path / "data"),
    )
    env.pop("CUDA_LLM_EVALUATOR", None)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", "cuda_llm_lsp.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_optimize_checks_the_kernel_name_before_the_gpu(tmp_path: Path) -> None:
    done = cli(tmp_path, "optimize", "examples/saxpy.cu", "--kernel", "nosuch")
    assert done.returncode == 2, done.stderr
    assert "no kernel 'nosuch' in examples/saxpy.cu (kernels: saxpy)" in done.stderr
    assert "GPU" not in done.stderr


def test_optimize_json_without_a_gpu_has_an_error_key_like_bench(tmp_path: Path) -> None:
    optimize = cli(
        tmp_path, "optimize", "examples/saxpy.cu", "--kernel", "saxpy", "--format", "json"
    )
    bench = cli(tmp_path, "bench", "examples/saxpy.cu", "--format", "json")
    assert optimize.returncode == bench.returncode == 3
    data, reference = json.loads(optimize.stdout), json.loads(bench.stdout)
    assert "no CUDA GPU" in data["error"] and "no CUDA GPU" in reference["error"]
    assert data["exit_code"] == reference["exit_code"] == 3
    assert data["accepted"] is False  # still the contract's object


def test_suite_kernel_flag_leaves_the_directory_positional(tmp_path: Path) -> None:
    done = cli(tmp_path, "suite", "--kernel", "no_such_kernel", str(SUITE))
    assert done.returncode == 2, done.stderr
    assert "no kernels named no_such_kernel" in done.stderr  # DIR was read as DIR
    both = cli(tmp_path, "suite", "--kernel", "nope_a,nope_b", str(SUITE))
    assert "no kernels named nope_a, nope_b" in both.stderr


@pytest.mark.parametrize("arch", ["sm_999", "bogus"])
def test_a_bad_arch_is_a_usage_error(tmp_path: Path, arch: str) -> None:
    done = cli(tmp_path, "check", "--arch", arch, "examples/saxpy.cu")
    assert done.returncode == 2, done.stdout
    assert f"argument --arch: '{arch}' is not an architecture NVRTC knows" in done.stderr
    assert done.stdout == ""
    assert cli(tmp_path, "check", "--arch", "90", "examples/saxpy.cu").returncode == 0


@pytest.mark.parametrize("command", [["check"], ["bench"], ["optimize", "--kernel", "k"]])
def test_a_missing_file_is_a_usage_error(tmp_path: Path, command: list[str]) -> None:
    done = cli(tmp_path, *command[:1], str(tmp_path / "missing.cu"), *command[1:])
    assert done.returncode == 2, done.stdout + done.stderr
    assert "cannot read" in done.stdout + done.stderr


@pytest.mark.parametrize("command", ["bench", "optimize", "tune"])
def test_a_fifo_is_refused_at_once_as_check_does(tmp_path: Path, command: str) -> None:
    """Every subcommand reads FILE as `check` does: a FIFO (or /dev/zero) is refused, exit 2,
    instead of a read that never ends (or runs out of memory)."""
    fifo = tmp_path / "kernel.cu"
    os.mkfifo(fifo)
    try:
        done = cli(tmp_path, command, str(fifo), "--kernel", "k", timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"cuda-llm {command} blocked reading a FIFO")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "not read: a FIFO, not a regular source file" in done.stderr
    assert "Traceback" not in done.stderr


def test_check_json_names_the_template_instantiation(tmp_path: Path) -> None:
    (tmp_path / "scale.cu").write_text(TEMPLATE)
    done = cli(tmp_path, "check", "--format", "json", str(tmp_path / "scale.cu"))
    assert done.returncode == 0, done.stdout
    (kernel,) = json.loads(done.stdout)["kernels"]
    assert (kernel["name"], kernel["instance"]) == ("scale_kernel", "scale_kernel<float>")
    assert kernel["registers"] is not None
    plain = json.loads(cli(tmp_path, "check", "--format", "json", "examples/saxpy.cu").stdout)
    assert plain["kernels"][0]["instance"] is None


def test_check_of_a_header_without_kernels_says_so(tmp_path: Path) -> None:
    header = tmp_path / "helpers.cuh"
    header.write_text("#pragma once\n__device__ inline float sq(float x) { return x * x; }\n")
    done = cli(tmp_path, "check", "--no-nvcc", str(header))
    assert done.returncode == 0
    assert done.stdout == f"{header}: no kernels; 0 errors, 0 warnings\n"
    header.write_text("#pragma once\n__device__ inline float sq(float x) { return x * y; }\n")
    done = cli(tmp_path, "check", str(header))
    assert done.returncode == 1
    assert done.stdout.splitlines()[-1] == f"{header}: no kernels; 1 error, 0 warnings"


def test_optimize_without_a_gpu_and_a_key_names_both_and_what_brings_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: only the GPU was named; the key came up on a machine with a GPU, after its baseline."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    done = cli(tmp_path, "optimize", "examples/saxpy.cu", "--kernel", "saxpy")
    assert done.returncode == 3, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "(1) a CUDA GPU: no CUDA GPU found" in line and "nvidia-smi" in line, line
    assert "(2) an API key for the model: `export OPENAI_API_KEY=" in line, line
    assert "--base-url" in line and "--kernel saxpy --demo" in line, line


def test_bench_without_a_driver_says_so_before_compiling(tmp_path: Path) -> None:
    """No driver library: refused at the GPU's lease, before the kernel compiles (was: ~8 s of
    compiling on a loaded machine, then "no GPU"). The cache directory shows no compile ran."""
    done = cli(tmp_path, "bench", "examples/saxpy.cu")
    assert done.returncode == 3 and "no CUDA GPU found" in done.stderr, done.stderr
    assert not list((tmp_path / "cache").rglob("*.json*")), "the kernel was compiled"
