"""`cuda-llm optimize --write` of a launch-changing winner ([launch]), end to end on the CPU:
replayed model, real NVRTC, recorded outcomes; the kernel, the spec and the launch site are
written together, and a winner whose text breaks the host build is refused with nvcc's words
(host code in a reply never gets that far: docs/design.md, "What an accepted winner may
write")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_llm_lsp.compile.nvcc import find_nvcc
from tests.support.fsr_fakes import make_recording
from tests.unit.test_cli_optimize import SAXPY, cli

FAST = """\
__device__ __forceinline__ float axpy(float a, float x, float y) { return fmaf(a, x, y); }

/* @cuda-llm launch
grid = "cdiv(n, 1024)"
block = 1024
*/
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  // variant: fast
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = axpy(a, x[i], y[i]);
}"""


def setup(workdir: Path, reply: str) -> None:
    (workdir / "saxpy.cu").write_text(SAXPY)
    make_recording(workdir / "rec", "saxpy", {(1, 1): reply})
    outcomes = {
        "baseline": {"ms": 1.0, "spread_pct": 0.4},
        "candidates": [{"contains": "variant: fast", "status": "ok", "ms": 0.4}],
    }
    (workdir / "outcomes.json").write_text(json.dumps(outcomes))


def args(workdir: Path, *extra: str) -> list[str]:
    return [
        str(workdir / "saxpy.cu"),
        "--kernel",
        "saxpy",
        "--replay",
        str(workdir / "rec"),
        "--rounds",
        "1",
        "--candidates",
        "1",
        *extra,
    ]


def test_write_applies_kernel_spec_and_launch_site_together(tmp_path: Path) -> None:
    setup(tmp_path, FAST)
    done = cli(tmp_path, *args(tmp_path, "--format", "json"))
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["launch"] == {"grid": ["cdiv(n, 1024)"], "block": ["1024"], "smem": "0"}
    done = cli(tmp_path, *args(tmp_path, "--write"))
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "saxpy.cu").read_text()
    assert 'grid = "cdiv(n, 1024)"\nblock = 1024\n' in text and "variant: fast" in text
    assert "saxpy<<<(0 + 1023) / 1024, 1024>>>(2.0f, nullptr, nullptr, 0);" in text, text
    assert text.index("__device__ __forceinline__ float axpy") < text.index("/* @cuda-llm")
    assert text.count("int main()") == 1 and "@cuda-llm launch" not in text


@pytest.mark.skipif(find_nvcc() is None, reason="no nvcc (the `nvcc` extra)")
def test_a_winner_that_breaks_the_host_build_is_not_written(tmp_path: Path) -> None:
    """A helper redeclares <cstdio>'s `getchar` with another type: NVRTC's device unit has no
    <cstdio> and builds it, nvcc does not. (A `#ifndef __CUDACC_RTC__` branch, which this test
    used, is now refused before it is judged.)"""
    helper = (
        "__device__ inline float getchar() { return 0.f; }\n"
        "__device__ inline float axpy(float a, float x, float y) {\n"
        "  return fmaf(a, x, y) + getchar();\n"
        "}"
    )
    setup(tmp_path, helper + FAST[FAST.index("\n\n/* @cuda-llm") :])
    done = cli(tmp_path, *args(tmp_path, "--write"))
    assert done.returncode == 1, done.stderr
    assert "not written" in done.stderr and "distinguished by return type" in done.stderr
    assert (tmp_path / "saxpy.cu").read_text() == SAXPY


def test_host_code_in_a_reply_never_reaches_the_file(tmp_path: Path) -> None:
    """Host code before the kernel (here a second `main`) is dropped when the candidate is
    cleaned: the kernel is judged and written, the host code never is."""
    setup(tmp_path, "int main() { return 1; }\n\n" + FAST)
    done = cli(tmp_path, *args(tmp_path, "--write"))
    assert done.returncode == 0, done.stderr
    written = (tmp_path / "saxpy.cu").read_text()
    assert written != SAXPY and "return 1;" not in written
    assert written.count("int main(") == SAXPY.count("int main(")
