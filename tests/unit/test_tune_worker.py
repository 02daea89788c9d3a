"""The tuner driving the real evaluator worker on the CPU double of the CUDA driver: each
configuration runs with its own launch (`candidate_spec`) through the worker's checks and
interleaved timing, against an oracle that keeps the spec's launch."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.evaluate import timing
from cuda_llm_lsp.evaluate.gpu import GpuEvaluator
from cuda_llm_lsp.evaluate.types import KernelBinary
from cuda_llm_lsp.evaluate.worker import DRIVER_ENV
from cuda_llm_lsp.source.kernels import find_kernels
from cuda_llm_lsp.source.spec import parse_spec
from cuda_llm_lsp.tune.search import TuneOptions, TuneRequest, tune_kernel
from tests.unit.fake_cuda_driver import cubin

SOURCE = """
/* @cuda-llm
sizes.n = [1, 100, 1000, 5000]
tune.SPLIT = [1, 2, 4]
grid = "cdiv(n * SPLIT, 256)"
block = 256
args.x = "float32[n]"
args.y = "out float32[n]"
args.n = "n"
*/
extern "C" __global__ void twice(const float* x, float* y, int n) { }
"""


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GpuEvaluator]:
    mp = pytest.MonkeyPatch()
    mp.setenv(DRIVER_ENV, "tests.unit.fake_cuda_driver")
    root = str(Path(__file__).resolve().parents[2])  # the worker imports the double from here
    mp.setenv("PYTHONPATH", os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    plan = timing.Plan(budget_s=0.3, batch=5)
    ev = GpuEvaluator(launch_timeout_s=0.5, plan=plan, cache_dir=tmp_path_factory.mktemp("c"))
    yield ev
    ev.close()
    mp.undo()


def binary(name: str, defines: tuple[str, ...] = ()) -> KernelBinary:
    return KernelBinary("twice", name, cubin(name), "sm_90", defines=defines)


def test_each_configuration_is_judged_with_its_own_launch_by_the_worker(
    evaluator: GpuEvaluator,
) -> None:
    (kernel,) = find_kernels(SOURCE)
    spec, errors = parse_spec(kernel, SOURCE)
    assert spec is not None, errors
    # the fake kernel covers_launch needs two threads per element: SPLIT >= 2 launches enough
    request = TuneRequest(SOURCE, "twice", spec, Settings(), baseline=binary("twice"))
    result = tune_kernel(
        request, evaluator, TuneOptions(finalists=2), build=lambda config: binary("covers_launch")
    )
    by_split = {m.config["SPLIT"]: m for m in result.measured}
    assert by_split[1].status == "unwritten_output", by_split[1].message
    assert by_split[2].status == "ok" and by_split[4].status == "ok"
    assert by_split[2].finalist and by_split[4].finalist
    assert result.best is not None and result.best.config["SPLIT"] in (2, 4)
    assert result.best.speedup == pytest.approx(4.0, rel=0.05)  # 0.040 ms against 0.010 ms
