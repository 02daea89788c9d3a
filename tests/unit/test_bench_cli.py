"""`cuda-llm bench`: exit codes and messages without a GPU, and a full run on the driver double."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.gpu.kernels import TWICE

ROOT = Path(__file__).resolve().parents[2]

NO_SPEC = """
extern "C" __global__ void scale(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
"""

FAST_TWICE = TWICE.replace(
    "for (int k = 0; k < 512; ++k) acc = fmaf(acc, 0.5f, v);  // converges to 2v", "acc = 2.0f * v;"
)


def bench(*args: str, driver: str | None = "no_such_driver_module", home: Path | None = None):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    if driver:
        env["CUDA_LLM_LSP_DRIVER"] = driver
    if home:
        env["XDG_CACHE_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "cuda_llm_lsp.cli", "bench", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=env,
    )


def test_no_gpu_is_exit_code_3_with_a_clear_message(tmp_path: Path) -> None:
    f = tmp_path / "twice.cu"
    f.write_text(TWICE)
    out = bench(str(f))
    assert out.returncode == 3
    # one sentence: what is missing, what works anyway, where to look; no library's wording
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("cuda-llm bench: no CUDA GPU found on this machine"), line
    assert "--demo" in line and "cudaLlm.demo" in line and "nvidia-smi" in line, line
    assert "system search" not in line, line
    assert "Traceback" not in out.stderr + out.stdout
    js = bench(str(f), "--format", "json")
    assert js.returncode == 3
    assert json.loads(js.stdout)["exit_code"] == 3


def test_kernel_without_spec_points_to_a_draft(tmp_path: Path) -> None:
    f = tmp_path / "scale.cu"
    f.write_text(NO_SPEC)
    out = bench(str(f))
    assert out.returncode == 2
    assert "kernel scale has no test spec" in out.stderr
    assert "/* @cuda-llm" in out.stderr


@pytest.mark.parametrize(
    ("text", "args", "needle"),
    [
        (None, (), "cannot read"),
        (TWICE, ("--kernel", "nope"), "no kernel 'nope'"),
        (TWICE.replace('"float32[n]"', '"float33[n]"'), (), "has errors"),
        ("int main() { return 0; }\n", (), "no __global__ kernel"),
    ],
)
def test_usage_problems_are_exit_code_2(tmp_path: Path, text, args, needle) -> None:
    f = tmp_path / "k.cu"
    if text is not None:
        f.write_text(text)
    out = bench(str(f), *args)
    assert out.returncode == 2, out.stderr
    assert needle in out.stderr
    assert "Traceback" not in out.stderr


def test_full_run_on_the_driver_double_prints_every_case_and_the_summary(tmp_path: Path) -> None:
    f = tmp_path / "twice.cu"
    f.write_text(FAST_TWICE)
    out = bench(str(f), driver="tests.unit.fake_cuda_driver", home=tmp_path)
    assert out.returncode == 0, out.stderr
    assert len(re.findall(r"  case \d \(n=\d+\): ok", out.stdout)) == 4
    assert re.search(
        r"twice: 4\d\.\d µs ±\d\.\d% · \d+ GB/s \(\d+% of copy peak\) · 4/4 cases pass", out.stdout
    ), out.stdout
    js = bench(
        str(f),
        "--format",
        "json",
        "--seed",
        "5",
        driver="tests.unit.fake_cuda_driver",
        home=tmp_path,
    )
    report = json.loads(js.stdout)
    k = report["kernels"][0]
    assert k["status"] == "ok" and k["seed"] == 5 and k["median_ms"] == pytest.approx(0.04, 0.01)
    assert k["bytes_moved"] == 2 * 4 * 4194304


FAULTING = """
/* @cuda-llm
sizes.n = [100, 1000]
grid = "cdiv(n, 256)"
block = 256
args.x = "float32[n]"
args.y = "out float32[n]"
args.n = "n"
*/
extern "C" __global__ void illegal(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i + (1 << 30)];
}
"""


def test_a_faulting_kernel_is_status_fault_exit_code_1_without_a_traceback(
    tmp_path: Path,
) -> None:
    """(On the driver double, the kernel named `illegal` faults.)"""
    f = tmp_path / "illegal.cu"
    f.write_text(FAULTING)
    out = bench(str(f), driver="tests.unit.fake_cuda_driver", home=tmp_path)
    assert out.returncode == 1, out.stderr
    assert "Traceback" not in out.stderr + out.stdout
    assert re.search(r"  case 0 \(n=100\): fault: .*illegal memory access", out.stdout), out.stdout
    assert "case 1" not in out.stdout  # stopped at the fault
    js = bench(str(f), "--format", "json", driver="tests.unit.fake_cuda_driver", home=tmp_path)
    assert js.returncode == 1
    assert json.loads(js.stdout)["kernels"][0]["status"] == "fault"


def test_bench_starts_without_importing_the_optimize_loop() -> None:
    """`bench` cold is a target (<= 2 s on the H200): the FSR loop and what it brings (~80 ms of
    imports on a loaded 2-core machine) are imported by the runs that use them, not by bench."""
    code = (
        "import sys, cuda_llm_lsp.cli.bench as b\n"
        "from cuda_llm_lsp.engine import benchmark_in_file, gpu_evaluator\n"
        "print(sorted(m for m in sys.modules if m.startswith('cuda_llm_lsp.fsr.loop')))\n"
    )
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout
