"""A candidate's own launch in the evaluator ([launch]): checked on every case before anything
runs (`bad_launch`, naming the case and the value), run with it on every case otherwise.

The worker runs for real over the CPU driver double (tests/unit/fake_cuda_driver.py); the GPU
side is tests/gpu/test_launch_gpu.py.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from cuda_llm_lsp.compile.types import Resources
from cuda_llm_lsp.evaluate import timing
from cuda_llm_lsp.evaluate.gpu import GpuEvaluator
from cuda_llm_lsp.evaluate.launch import bad_launch
from cuda_llm_lsp.evaluate.recorded import DEFAULT_DEVICE
from cuda_llm_lsp.evaluate.types import STATUSES, KernelBinary
from cuda_llm_lsp.evaluate.worker import DRIVER_ENV
from cuda_llm_lsp.source.kernels import find_kernels
from cuda_llm_lsp.source.spec import TestSpec, parse_spec
from tests.unit.fake_cuda_driver import cubin

SOURCE = """
/* @cuda-llm
sizes.n = [1, 100, 1000, 5000]
grid = "cdiv(n, 256)"
block = 256
args.x = "float32[n]"
args.y = "out float32[n]"
args.n = "n"
*/
extern "C" __global__ void twice(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
"""


@pytest.fixture(scope="module")
def spec() -> TestSpec:
    kernel = find_kernels(SOURCE)[0]
    parsed, problems = parse_spec(kernel, SOURCE)
    assert parsed is not None, problems
    return parsed


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory: pytest.TempPathFactory) -> GpuEvaluator:
    mp = pytest.MonkeyPatch()
    mp.setenv(DRIVER_ENV, "tests.unit.fake_cuda_driver")
    root = str(Path(__file__).resolve().parents[2])  # the worker imports the double from here
    mp.setenv("PYTHONPATH", os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    plan = timing.Plan(budget_s=0.3, batch=5)
    ev = GpuEvaluator(launch_timeout_s=0.5, plan=plan, cache_dir=tmp_path_factory.mktemp("c"))
    yield ev
    ev.close()
    mp.undo()


def binary(name: str, static_smem: int = 0) -> KernelBinary:
    resources = Resources(16, 0, 0, static_smem, 0) if static_smem else None
    return KernelBinary("twice", name, cubin(name), "sm_90", resources)


BASE = binary("twice")


def test_bad_launch_is_a_status_of_the_contract() -> None:
    assert "bad_launch" in STATUSES


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"block": ("2048",)}, "2048"),
        ({"block": ("32", "32", "2")}, "2048 threads"),
        ({"block": ("1", "1", "128")}, "is 128 in case 0"),
        ({"grid": ("n / 256",)}, "case 0 (n=1)"),
        ({"grid": ("cdiv(n, 256)", "70000")}, "70000 in case 0 (n=1); the limit for axis y"),
        ({"smem": "300000"}, "300000 bytes"),
        # fits every listed case (n = 5000: 230000 bytes), not the hidden n = 5001 (234142)
        ({"smem": "n * 46 + n / 5001 * 4096"}, "hidden size case (n = 5001"),
    ],
)
def test_a_launch_the_device_cannot_run_is_bad_launch_before_anything_runs(
    evaluator: GpuEvaluator, spec: TestSpec, change: dict[str, object], says: str
) -> None:
    own = replace(spec, **change)  # type: ignore[arg-type]
    r = evaluator.evaluate(BASE, binary("twice"), spec, seed=5, candidate_spec=own)
    assert r.status == "bad_launch", r.message
    assert says in r.message and r.cases == () and r.candidate is None


def test_smem_counts_the_kernels_static_shared_memory(spec: TestSpec) -> None:
    own = replace(spec, smem="200000")
    assert bad_launch(own, DEFAULT_DEVICE, 1) is None
    problem = bad_launch(own, DEFAULT_DEVICE, 1, static_smem=40000)
    assert problem is not None and "200000 bytes + 40000 static" in problem
    assert str(DEFAULT_DEVICE.shared_per_block_optin) in problem


def test_smem_above_48k_within_the_opt_in_maximum_runs(
    evaluator: GpuEvaluator, spec: TestSpec
) -> None:
    """The worker sets the attribute above 48 KiB: such a launch is not refused."""
    own = replace(spec, smem="100000")
    r = evaluator.evaluate(BASE, binary("twice"), spec, seed=5, candidate_spec=own)
    assert r.status == "ok", r.message


def test_a_grid_too_small_to_cover_the_output_is_unwritten_output(
    evaluator: GpuEvaluator, spec: TestSpec
) -> None:
    """`covers_launch` needs two threads per element: a grid of one thread per element leaves
    half of y unwritten (the poison check, as for any candidate)."""
    own = replace(spec, grid=("cdiv(n, 512)",), block=("512",))
    r = evaluator.evaluate(BASE, binary("covers_launch"), spec, seed=5, candidate_spec=own)
    assert r.status == "unwritten_output", r.message


def test_the_candidate_runs_with_its_own_launch_on_every_case(
    evaluator: GpuEvaluator, spec: TestSpec
) -> None:
    own = replace(spec, grid=("cdiv(n, 128)",))
    r = evaluator.evaluate(BASE, binary("covers_launch"), spec, seed=7, candidate_spec=own)
    assert r.status == "ok", r.message
    assert r.cases_passed == len(spec.cases())
