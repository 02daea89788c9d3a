"""benchmarks/capture_acceptance.py on the CPU: which kernels are a program's own and how the
capture CLI is told to pick exactly one, the rate's denominator, and a program that cannot be
captured (no GPU here) ending as that kernel's outcome, never a crash."""

from __future__ import annotations

import importlib.util
import stat
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cuda_llm_lsp.source.kernels import find_kernels

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench() -> Any:
    name = "capture_acceptance"
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


SOURCE = """\
#include <cuda_runtime.h>
namespace demo {
__global__ void kernel(float* y, int n) { if (threadIdx.x < n) y[threadIdx.x] = 1.0f; }
}
template <typename T>
__global__ void fill(T* y, T v, int n) { if (threadIdx.x < n) y[threadIdx.x] = v; }
__global__ void kernel(float* y, int n) { if (threadIdx.x < n) y[threadIdx.x] = 2.0f; }
int main() { return 0; }
"""


def test_the_kernel_filter_names_exactly_the_programs_kernel(bench: Any) -> None:
    kernels = {k.qualified_name: k for k in find_kernels(SOURCE)}
    assert bench.mangled_prefix(kernels["kernel"]) == "_Z6kernel"
    assert bench.mangled_prefix(kernels["demo::kernel"]) == "_ZN4demo6kernel"
    assert bench.mangled_prefix(kernels["fill"]) == "_Z4fill"
    # nvcc's names: the program's own kernel, a template's instance, and CUTLASS's reference
    # GEMM (namespace `kernel`), which the short name `kernel` alone would also match
    assert "_Z6kernelPfi".startswith(bench.mangled_prefix(kernels["kernel"]))
    assert "_Z4fillIfEvPT_S0_i".startswith(bench.mangled_prefix(kernels["fill"]))
    library = "_ZN7cutlass9reference6device6kernel4GemmIfNS_6layout11ColumnMajorEEEvv"
    assert bench.mangled_prefix(kernels["kernel"]) not in library


def test_every_program_is_pinned_and_unique(bench: Any) -> None:
    names = [p.name for p in bench.PROGRAMS]
    assert len(names) == len(set(names)) >= 20
    sources = {s.name for s in bench.realworld_fetch.load_sources()[0]}
    assert set(bench.SOURCES) <= sources  # every archive carried is pinned by sha256
    for p in bench.PROGRAMS:
        assert p.source.split("/", 1)[0] in bench.SOURCES
        assert all(i.split("/", 1)[0] in bench.SOURCES for i in p.includes)


def test_the_rate_counts_own_kernels_the_program_launched(bench: Any) -> None:
    o = bench.Outcome
    outcomes = [
        o("a", "k1", True, "pass"),
        o("a", "k2", True, "reproduce_failed"),
        o("b", "k3", True, "not_launched"),  # defined, never launched: not counted
        o("c", "", False, "library"),  # Thrust's kernels: apart
        o("d", "k4", True, "capture_failed"),
        o("e", "k5", True, "program_failed"),  # aborted before any CUDA call: not launched
    ]
    summary = bench.summarize(outcomes, [], 1.0)
    assert (summary["own_kernels_launched"], summary["own_kernels_passed"]) == (3, 1)
    assert summary["rate"] == round(1 / 3, 3)
    assert summary["not_launched"] == ["b:k3"] and summary["program_failed"] == ["e:k5"]
    assert summary["library_programs"] == 1 and summary["library_programs_captured"] == 1
    assert "rate 33%" in bench.markdown(summary, outcomes)


def test_a_program_that_cannot_be_captured_is_that_kernels_outcome(
    bench: Any, tmp_path: Path
) -> None:
    """No GPU (or a program making no CUDA call): the capture's own message, per kernel."""
    program = bench.Program("demo", "x/demo.cu", ())
    home = tmp_path / "demo"
    home.mkdir()
    source = home / "demo.cu"
    source.write_text(SOURCE)
    binary = home / "demo"
    binary.write_text("#!/bin/sh\necho no cuda here\nexit 0\n")
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    kernel = next(k for k in bench.own_kernels(source) if k.name == "fill")
    limits = bench.Limits(capture_s=30, deadline=float("inf"))
    outcome = bench.run_kernel(program, source, kernel, limits)
    assert outcome.status == "capture_failed", outcome
    # the CLI's own one-line reason (here: the library never started; or, without CUPTI to
    # build it with, why not), after what the program printed
    assert "capture: " in outcome.message and not outcome.spec, outcome
    late = bench.run_kernel(program, source, kernel, bench.Limits(deadline=0.0))
    assert late.status == "skipped" and "deadline" in late.message


def test_a_timeout_ends_the_whole_process_group(bench: Any, tmp_path: Path) -> None:
    """nvcc's cicc outlived nvcc killed on timeout and slowed every other build."""
    mark = tmp_path / "child-ran-on"
    script = f"(sleep 3; touch {mark}) & sleep 30"
    rc, text, seconds = bench._run(["sh", "-c", script], timeout=0.5)
    assert rc is None and "timed out" in text and seconds < 10
    time.sleep(4)
    assert not mark.exists()


SAXPY_PROGRAM = """#include <cuda_runtime.h>
__global__ void saxpy(float* y, const float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
int main() {
    int n = 10000;
    float *x, *y;
    cudaMalloc(&x, n * sizeof(float));
    cudaMalloc(&y, n * sizeof(float));
    saxpy<<<(n + 255) / 256, 256>>>(y, x, 2.0f, n);
    return 0;
}
"""


def test_the_static_draft_is_checked_against_the_captured_launch(
    bench: Any, tmp_path: Path
) -> None:
    """The draft made from the file's own launch site, its sizes set to the captured integers,
    gives the captured grid and block; a launch site that disagrees is named."""
    import struct

    import numpy as np

    from tests.unit.test_spec_from_capture import _write_capture

    n = 10000
    y, x = np.ones(n, np.float32), np.arange(n, dtype=np.float32)
    _write_capture(
        tmp_path,
        {"n": n},
        [("y", y.tobytes(), (y + 2 * x).tobytes()), ("x", x.tobytes(), None)],
        grid=(40, 1, 1),
        block=(256, 1, 1),
        scalars_before=[struct.pack("<f", 2.0)],
        demangled="saxpy(float*, float const*, float, int)",
    )
    assert bench.draft_check(SAXPY_PROGRAM, "saxpy", tmp_path) == {
        "launch_site": True, "right": True, "problems": []
    }  # fmt: skip
    other = SAXPY_PROGRAM.replace("256>>>", "128>>>")
    found = bench.draft_check(other, "saxpy", tmp_path)
    assert found["problems"] == ["block (128, 1, 1), the program launched (256, 1, 1)"], found
    no_site = SAXPY_PROGRAM.split("int main")[0]
    assert bench.draft_check(no_site, "saxpy", tmp_path) == {"launch_site": False}


def test_a_draft_of_a_kernel_taking_a_struct_needs_a_capture(bench: Any, tmp_path: Path) -> None:
    source = """struct View { const float* x; int n; };
__global__ void k(View v, float* y) { y[threadIdx.x] = v.x[threadIdx.x]; }
void run(View v, float* y) { k<<<1, 32>>>(v, y); }
"""
    found = bench.draft_check(source, "k", tmp_path)
    assert found == {"launch_site": True, "expressible": False, "why": "by-value v"}, found


# A 2-D kernel with a row pitch the launcher passes: the width, or a helper's result the draft
# cannot evaluate (so it keeps its guess, 1).
PITCHED_PROGRAM = """#include <cuda_runtime.h>
#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))
__global__ void copy_rows(float* out, const float* in, int rows, int cols, int pitch) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < cols && y < rows) out[y * pitch + x] = in[y * pitch + x];
}
int row_pitch(int cols);
int main() {
    int rows = 32, cols = 128;
    float *out, *in;
    cudaMalloc(&out, rows * cols * sizeof(float));
    cudaMalloc(&in, rows * cols * sizeof(float));
    dim3 block(16, 16);
    dim3 grid(CEIL_DIV(cols, 16), CEIL_DIV(rows, 16));
    copy_rows<<<grid, block>>>(out, in, rows, cols, PITCH);
    return 0;
}
"""


def test_the_static_drafts_integer_scalars_are_checked_against_the_capture(
    bench: Any, tmp_path: Path
) -> None:
    """A draft's integer scalar that is not what the program passed is named as a problem."""
    import numpy as np

    from tests.unit.test_spec_from_capture import _write_capture

    rows, cols = 32, 128
    data = np.arange(rows * cols, dtype=np.float32)
    _write_capture(
        tmp_path,
        {"rows": rows, "cols": cols, "pitch": cols},
        [("out", np.zeros_like(data).tobytes(), data.tobytes()), ("in", data.tobytes(), None)],
        grid=(8, 2, 1),
        block=(16, 16, 1),
        demangled="copy_rows(float*, float const*, int, int, int)",
    )
    right = PITCHED_PROGRAM.replace("PITCH", "cols")
    assert bench.draft_check(right, "copy_rows", tmp_path) == {
        "launch_site": True, "right": True, "problems": []
    }  # fmt: skip
    guessed = PITCHED_PROGRAM.replace("PITCH", "row_pitch(cols)")
    found = bench.draft_check(guessed, "copy_rows", tmp_path)
    assert found["problems"] == ["args.pitch = 1, the program passed 128"], found
