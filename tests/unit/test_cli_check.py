"""`cuda-llm check` exactly as the CLI contract says (docs/design.md): text, JSON keys, exit
codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_llm_lsp.cli import main
from cuda_llm_lsp.compile.nvcc import nvcc_missing

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
DIAGNOSTIC_KEYS = {"file", "line", "column", "end_line", "end_column", "severity", "message"}
KERNEL_KEYS = {
    "file", "name", "instance", "line", "registers", "spill_stores", "spill_loads", "shared_bytes",
    "stack_bytes",
}  # fmt: skip


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_LLM_CACHE_DIR", str(tmp_path / "cache"))


def check(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", "cuda_llm_lsp.cli", "check", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_acceptance_broken_file_reports_exactly_line_9_and_exits_1() -> None:
    done = check("examples/errors/broken.cu")
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    problems = [line for line in lines if ": error: " in line or ": warning: " in line]
    assert problems == ['examples/errors/broken.cu:9:25: error: identifier "facter" is undefined']
    assert done.stderr == ""


def test_json_has_exactly_the_contract_keys() -> None:
    done = check("--format", "json", "examples/errors/broken.cu", "examples/saxpy.cu")
    assert done.returncode == 1
    data = json.loads(done.stdout)
    assert set(data) == {"diagnostics", "kernels"}
    assert all(set(d) == DIAGNOSTIC_KEYS for d in data["diagnostics"])
    assert all(set(k) == KERNEL_KEYS for k in data["kernels"])
    (error,) = data["diagnostics"]
    assert (error["file"], error["line"], error["severity"]) == (
        "examples/errors/broken.cu",
        9,
        "error",
    )
    saxpy = next(k for k in data["kernels"] if k["name"] == "saxpy")
    assert saxpy["file"] == "examples/saxpy.cu" and saxpy["line"] == 15
    assert saxpy["registers"] > 0 and saxpy["spill_stores"] == 0


def test_all_examples_clean_exit_0_one_resource_line_per_kernel(
    capsys: pytest.CaptureFixture[str],
) -> None:
    files = sorted(str(p) for p in EXAMPLES.glob("*.cu") if p.name != "broken.cu")
    assert main(["check", "--no-nvcc", *files]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(files)  # one kernel per example, no diagnostics
    assert all(" registers, " in line and ": kernel " in line for line in out)


@pytest.mark.skipif(nvcc_missing() is not None, reason="needs nvcc and a host compiler")
def test_nvcc_is_the_arbiter_by_default_and_no_nvcc_runs_the_fast_check_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 38: where nvcc is found, `check` shows nvcc's verdict (here: no error where the
    fast tier alone reports one); `--no-nvcc` is the fast tier alone; `--nvcc` still accepted."""
    source = tmp_path / "refuted.cu"
    source.write_text(
        "#ifdef __CUDACC_RTC__\n"
        'static_assert(sizeof(int) == 0, "only NVRTC defines __CUDACC_RTC__");\n'
        "#endif\n"
        "__global__ void k(float* x) { x[0] = 1; }\n"
    )
    assert main(["check", str(source)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{source}: nvcc: compiles ("), out
    assert not any(": error: " in line for line in out), out
    assert main(["check", "--nvcc", str(source)]) == 0
    capsys.readouterr()
    assert main(["check", "--no-nvcc", str(source)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{source}:2:1: error: static assertion failed"), out
    assert not any(": nvcc: " in line for line in out), out


def test_warning_keeps_exit_0_and_shows_its_number(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "w.cu"
    source.write_text("__global__ void w(float* x) {\n  int unused;\n  x[0] = 1;\n}\n")
    assert main(["check", str(source)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (
        f'{source}:2:7: warning: variable "unused" was declared but never referenced [#177-D]'
    )


def test_include_path_define_and_arch_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "scale.cuh").write_text(
        "__device__ float scale(float x) { return x * K; }\n"
    )
    source = tmp_path / "src.cu"
    source.write_text('#include "scale.cuh"\n__global__ void k(float* x) { x[0] = scale(x[0]); }\n')
    assert main(["check", str(source)]) == 1
    capsys.readouterr()
    args = ["check", "-I", str(tmp_path / "lib"), "--define", "K=3.0f", "--arch", "sm_80"]
    assert main([*args, "--format", "json", str(source)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["diagnostics"] == [] and data["kernels"][0]["registers"] > 0


def test_missing_and_binary_files_are_errors_not_tracebacks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    binary = tmp_path / "blob.cu"
    binary.write_bytes(bytes(range(256)) * 4)
    assert main(["check", str(tmp_path / "missing.cu"), str(binary)]) == 2  # missing: usage
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{tmp_path / 'missing.cu'}:1:1: error: cannot read file")
    assert out[1].startswith(f"{binary}:1:1: error: ") and "NUL" in out[1]


def test_file_over_the_old_device_code_limit_is_compiled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Past 256 kB of device code a file used to be refused ("not compiled"): CUTLASS, CuTe
    and CUB units are megabytes. Now only the time limit bounds a compile."""
    (tmp_path / "big.cuh").write_text("// a long header comment line of some kind\n" * 8000)
    source = tmp_path / "big.cu"
    source.write_text('#include "big.cuh"\n__global__ void k(float* x) { x[0] = 1; }\n')
    assert main(["check", "--no-nvcc", str(source)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert not any("not compiled" in line for line in out), out
    assert out[-1].startswith(f"{source}:2: kernel k: ") and "registers" in out[-1], out
