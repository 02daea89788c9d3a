"""On the GPU: every suite baseline passes its own cases (run twice, unwritten outputs, guard
bands, inputs unchanged) and gets a timing; the suite command writes its report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.evaluate.candidate import build_binary
from cuda_llm_lsp.evaluate.types import KernelBinary, NoGpuError
from cuda_llm_lsp.suite.runner import discover

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "benchmarks" / "suite"
ITEMS = discover(SUITE)


@pytest.fixture(scope="module")
def evaluator():  # type: ignore[no-untyped-def]
    from cuda_llm_lsp.evaluate import timing
    from cuda_llm_lsp.evaluate.pool import GpuEvaluator

    ev = GpuEvaluator(plan=timing.Plan(budget_s=0.3))
    try:
        facts = ev.device_facts()
    except NoGpuError as exc:
        ev.close()
        pytest.skip(f"no CUDA GPU: {exc}")
    yield ev, facts
    ev.close()


@pytest.mark.parametrize("item", ITEMS, ids=[i.kernel.name for i in ITEMS])
def test_baseline_passes_its_own_cases(evaluator, item) -> None:  # type: ignore[no-untyped-def]
    ev, facts = evaluator
    assert item.spec is not None, item.errors
    binary = build_binary(item.text, item.path, item.kernel.name, Settings(),
                          instance=item.spec.instance, arch=facts.arch)  # fmt: skip
    assert isinstance(binary, KernelBinary), getattr(binary, "message", "")
    result = ev.benchmark(binary, item.spec, spec_dir=item.path.parent)
    assert result.status == "ok", result.message
    assert result.cases_passed == item.spec.case_count
    assert result.baseline is not None and result.baseline.median_ms > 0
    assert result.baseline.median_ms < 200.0  # every timed baseline stays cheap to measure


def test_suite_command_writes_the_report(tmp_path: Path, evaluator) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "report"
    proc = subprocess.run(
        [sys.executable, "-m", "cuda_llm_lsp.cli", "suite", str(SUITE), "--kernel", "transpose_f32",
         "--kernel", "matmul_f32", "--optimize", "--replay",
         str(ROOT / "benchmarks" / "recordings" / "hand-written"), "--out", str(out),
         "--time-budget", "0.3", "--format", "json"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads((out / "report.json").read_text())
    rows = {r["kernel"]: r for r in data["kernels"]}
    assert set(rows) == {"transpose_f32", "matmul_f32"}
    transpose = rows["transpose_f32"]
    assert transpose["optimized"] and transpose["candidates"] == 2
    assert transpose["accepted"] and transpose["speedup"] > 1.0
    bad = {s for s in transpose["candidate_statuses"] if s not in ("ok", "slower")}
    assert bad, "the deliberately wrong candidate was not rejected"
    assert (out / "chart.png").stat().st_size > 1000 and (out / "report.md").exists()
