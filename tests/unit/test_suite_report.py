"""The suite's pure parts: floor math, fast_p, the Markdown table, JSON and the chart."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from cuda_llm_lsp.evaluate import roofline
from cuda_llm_lsp.evaluate.launch import bytes_moved
from cuda_llm_lsp.source.kernels import find_kernels
from cuda_llm_lsp.source.spec import parse_spec
from cuda_llm_lsp.suite.report import (
    KernelRow,
    SuiteReport,
    fast_p,
    markdown,
    markdown_table,
    to_json,
    write_report,
)
from cuda_llm_lsp.suite.runner import replay_dir_for, scenario_of

SUITE = Path(__file__).resolve().parents[2] / "benchmarks" / "suite"
RECORDING = Path(__file__).resolve().parents[2] / "benchmarks" / "recordings" / "hand-written"


def row(name: str, speedup: float | None, *, ok: bool = True, **kw: object) -> KernelRow:
    fields: dict[str, object] = dict(
        file="k.cu",
        kernel=name,
        scenario="Basic algebra",
        dtype="float32",
        status="ok" if ok else "wrong_output",
        cases_passed=4 if ok else 2,
        cases_total=4,
        baseline_ms=2.0,
        best_ms=2.0 / speedup if speedup else None,
        speedup=speedup,
    )
    fields.update(kw)
    return KernelRow(**fields)  # type: ignore[arg-type]


def test_fast_p_counts_only_correct_kernels_strictly_faster_than_p() -> None:
    rows = [row("a", 1.0), row("b", 1.5), row("c", 3.0), row("d", 9.0), row("e", 20.0, ok=False)]
    assert fast_p(rows, 1) == pytest.approx(3 / 5)  # 1.0 is not faster; e is wrong
    assert fast_p(rows, 2) == pytest.approx(2 / 5)
    assert fast_p(rows, 4) == pytest.approx(1 / 5)
    assert fast_p(rows, 8) == pytest.approx(1 / 5)
    assert fast_p([], 1) == 0.0
    assert fast_p([row("x", None)], 1) == 0.0


def test_floor_is_the_larger_of_memory_and_compute_time() -> None:
    # 1 GB at 1000 GB/s = 1 ms; 2 TFLOP at 1000 TFLOP/s = 2 ms -> compute-bound, 2 ms
    f = roofline.compute_floor(10**9, 2e12, 1000.0, 1e6)
    assert f.memory_ms == pytest.approx(1.0)
    assert f.compute_ms == pytest.approx(2.0)
    assert f.ms == pytest.approx(2.0) and f.bound == "compute"
    g = roofline.compute_floor(10**9, None, 1000.0, 1e6)
    assert g.ms == pytest.approx(1.0) and g.bound == "memory"
    assert roofline.compute_floor(10**9, 1e9, None, None).ms is None
    assert roofline.percent_of_floor(1.0, 4.0) == pytest.approx(25.0)
    assert roofline.percent_of_floor(None, 4.0) is None


def _spec(file: str, name: str):  # type: ignore[no-untyped-def]
    text = (SUITE / file).read_text()
    kernel = next(k for k in find_kernels(text) if k.name == name)
    spec, errors = parse_spec(kernel, text)
    assert spec is not None and not errors
    return spec


def test_spec_bytes_and_flops_of_suite_kernels() -> None:
    spec = _spec("matmul.cu", "matmul_f32")
    case = spec.cases()[-1]
    n = 2048
    assert bytes_moved(spec, case) == 3 * n * n * 4
    assert case.flops == 2 * n**3
    assert roofline.precision(spec) == "fp32"
    rope = _spec("rope.cu", "rope_bf16")
    c = rope.cases()[-1]
    q = c.sizes["tokens"] * c.sizes["heads"] * c.sizes["dim"]
    table = c.sizes["tokens"] * c.sizes["dim"] // 2
    assert bytes_moved(rope, c) == 2 * q * 2 + 2 * table * 2  # inout read + written
    assert roofline.precision(rope) == "bf16" and roofline.dtype_label(rope) == "bfloat16"
    f = roofline.kernel_floor(spec, case, 3000.0, 50_000.0, 700_000.0)
    assert f.bound == "compute"  # 17 GFLOP at 50 TFLOP/s beats 50 MB at 3 TB/s
    assert f.ms == pytest.approx(2 * n**3 / 50e12 * 1e3)
    # the case's own FLOPs (the parser evaluates them with template constants) are the ones used
    other = roofline.kernel_floor(spec, dataclasses.replace(case, flops=1e9), None, 1e3, None)
    assert other.flops == 1e9


def test_markdown_table_has_a_row_per_kernel_with_vendor_ratio_and_failures() -> None:
    rows = [
        row(
            "matmul_f32",
            3.0,
            accepted=True,
            optimized=True,
            vendor="cuBLAS (torch)",
            vendor_ms=0.5,
            pct_of_floor_baseline=5.0,
            pct_of_floor_best=15.0,
            bound="compute",
        ),
        row("softmax_f32", None, ok=False, message="case 1: wrong | value"),
    ]
    table = markdown_table(rows)
    lines = table.strip().splitlines()
    assert len(lines) == 4
    assert "`matmul_f32`" in lines[2] and "3.00×" in lines[2] and "0.75" in lines[2]
    assert "5% → 15%" in lines[2] and "✓ 4/4" in lines[2]
    assert "✗ wrong_output" in lines[3]
    report = SuiteReport(rows=tuple(rows), device="H100", optimize=True)
    md = markdown(report)
    assert "fast_1" in md and "| 0.50 | 0.50 | 0.00 | 0.00 |" in md
    assert "wrong \\| value" in md  # pipes in messages cannot break the table


def test_json_and_files_are_written(tmp_path: Path) -> None:
    rows = (row("a", 2.5, accepted=True), row("b", float("inf")), row("c", None, ok=False))
    report = SuiteReport(rows=rows, device="dev", command="cuda-llm suite x", optimize=True)
    data = to_json(report)
    assert data["fast_p"]["fast_2"] == pytest.approx(2 / 3)
    assert [k["kernel"] for k in data["kernels"]] == ["a", "b", "c"]
    assert data["kernels"][2]["correct"] is False
    paths = write_report(report, tmp_path / "out")
    assert set(paths) == {"chart", "markdown", "json"}
    png = paths["chart"].read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 1000
    loaded = json.loads(paths["json"].read_text())
    assert loaded["kernels"][1]["speedup"] is None  # infinity is not JSON
    assert "![speedup" in paths["markdown"].read_text()


def test_scenario_and_recording_lookup() -> None:
    assert scenario_of("// Sparse: y = A x\n") == "Sparse"
    assert scenario_of("// something else\n") == "other"
    found = replay_dir_for(RECORDING, "transpose_f32")
    assert found is not None and found[0].name == "transpose_f32" and found[1:] == (1, 3)
    assert replay_dir_for(RECORDING, "vector_add_f32") is None


def test_gemm_peak_is_timed_through_the_vendor_backend() -> None:
    from cuda_llm_lsp.evaluate.peaks import gemm_gflops

    class Clocked:  # vendor.Backend's timing contract: median ms of fn()
        def __init__(self) -> None:
            self.calls = 0

        def time(self, fn: Any) -> float:
            fn()
            self.calls += 1
            return 4.0

    class Matrix:
        def __matmul__(self, other: object) -> str:
            return "product"

    backend = Clocked()
    assert gemm_gflops(backend, Matrix(), Matrix(), 1000) == pytest.approx(2e9 / 4e-3 / 1e9)
    assert backend.calls == 1
