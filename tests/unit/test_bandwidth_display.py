"""A bandwidth above the measured copy peak is never shown without the reason.

L2 is flushed before every timed launch, but writes can still sit in L2 when the kernel ends and
a buffer may be only partly read, so the bytes counted from the roles can exceed DRAM traffic.
Every place that shows the fraction (CLI summary, bench JSON, the editor's optimize summary, the
prompt) says why; below the peak nothing is added. And `bench` on a saxpy whose `x` is only
read counts `x` once (tests/unit/test_roles.py has the inference itself).
"""

from __future__ import annotations

import json
from pathlib import Path

from cuda_llm_lsp.evaluate.format import ABOVE_PEAK_REASON, peak_note, summary_line
from cuda_llm_lsp.evaluate.types import CaseOutcome, EvalResult, Timing
from cuda_llm_lsp.lsp.results import optimize_summary
from tests.unit.test_bench_cli import bench

# `accumulate` is y += 2x on the driver double, like a saxpy with a = 2 (x not const, only read).
SAXPY = """
/* @cuda-llm
sizes.n = [1000, 1048576]
grid = "cdiv(n, 256)"
block = 256
args.x = "float32[n]"
args.y = "float32[n]"
args.n = "n"
*/
extern "C" __global__ void accumulate(float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i] + y[i];
}
"""


def result(fraction: float) -> EvalResult:
    timing = Timing(0.01, 1.0, 0.009, 0.011, 50)
    case = CaseOutcome(0, {"n": 1}, "ok", "")
    return EvalResult(
        "ok", "", 1, (case,), timing, None, None, 1, 2900.0 * fraction, 2900.0, fraction
    )


def test_above_the_copy_peak_the_summary_says_why() -> None:
    line = summary_line("saxpy", result(1.19))
    assert f"(119% of copy peak, {ABOVE_PEAK_REASON})" in line
    assert "above it: not all counted bytes reached DRAM" in line
    assert "(70% of copy peak)" in summary_line("saxpy", result(0.7))
    assert peak_note(1.0) == "100% of copy peak"


def test_the_editor_summary_says_why_too() -> None:
    text = optimize_summary(
        "saxpy",
        baseline_ms=0.1,
        best_ms=None,
        speedup=None,
        cases_passed=3,
        cases_total=3,
        fraction_of_peak=1.19,
        state="done",
    )
    assert f"119% of copy peak, {ABOVE_PEAK_REASON}" in text


def test_bench_counts_a_read_only_non_const_pointer_once(tmp_path: Path) -> None:
    f = tmp_path / "saxpy.cu"
    f.write_text(SAXPY)
    done = bench(str(f), "--format", "json", driver="tests.unit.fake_cuda_driver", home=tmp_path)
    assert done.returncode == 0, done.stderr
    (kernel,) = json.loads(done.stdout)["kernels"]
    assert kernel["bytes_moved"] == 3 * 4 * 1048576  # x read; y read and written
    fraction = kernel["fraction_of_peak"]
    assert kernel["bandwidth_note"] == (ABOVE_PEAK_REASON if fraction > 1 else None)
