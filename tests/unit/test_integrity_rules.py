"""Issue 11's GPU-side holes, each with a planted candidate on the CPU double of the driver
(tests/unit/fake_cuda_driver.py): replay across launches, reading the original's results,
`inout` buffers, a fixed poison, guard bands of large buffers, hidden generalisation cases,
inputs changed during the timing, and module state across evaluations.

The worker process runs for real; only `cuda.bindings.driver` is the double.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from cuda_llm_lsp.evaluate import timing
from cuda_llm_lsp.evaluate.compare import GUARD_BYTES, guard_bytes, random_poison
from cuda_llm_lsp.evaluate.counter import KIND_CODES, Generated
from cuda_llm_lsp.evaluate.gpu import GpuEvaluator
from cuda_llm_lsp.evaluate.process import Worker
from cuda_llm_lsp.evaluate.protocol import (
    Buffer,
    BufferArg,
    Checks,
    Launch,
    LoadReply,
    LoadRequest,
    Pong,
    RunReply,
    RunRequest,
    ScalarArg,
    UnloadRequest,
)
from cuda_llm_lsp.evaluate.sanitizer import SHAPE_MODULUS, shape_class_case
from cuda_llm_lsp.evaluate.types import KernelBinary
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


def _spec(source: str) -> TestSpec:
    parsed, problems = parse_spec(find_kernels(source)[0], source)
    assert parsed is not None, problems
    return parsed


@pytest.fixture(scope="module")
def driver_env() -> object:
    mp = pytest.MonkeyPatch()
    mp.setenv(DRIVER_ENV, "tests.unit.fake_cuda_driver")
    root = str(Path(__file__).resolve().parents[2])  # the worker imports the double from here
    mp.setenv("PYTHONPATH", os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    yield
    mp.undo()


@pytest.fixture(scope="module")
def evaluator(driver_env: object, tmp_path_factory: pytest.TempPathFactory) -> GpuEvaluator:
    plan = timing.Plan(budget_s=0.3, batch=5)
    ev = GpuEvaluator(launch_timeout_s=0.5, plan=plan, cache_dir=tmp_path_factory.mktemp("c"))
    yield ev
    ev.close()


def binary(name: str) -> KernelBinary:
    return KernelBinary(source_name="twice", entry=name, cubin=cubin(name), arch="sm_90")


BASE = binary("twice")


def test_a_replay_of_earlier_results_is_timed_honestly(
    evaluator: GpuEvaluator,
) -> None:
    """Class 1: every timed launch has inputs no launch had, so a result saved per input
    fingerprint never hits (it looked 8x faster when the timed launches reused the inputs)."""
    r = evaluator.evaluate(BASE, binary("fingerprint_replay"), _spec(SOURCE), seed=3)
    assert r.status == "ok", r.message
    assert r.speedup == pytest.approx(1.0, abs=0.05)


def test_the_originals_results_are_out_of_reach(evaluator: GpuEvaluator) -> None:
    """Class 2: a candidate that looks through device memory for the original's output on the
    same inputs finds none (kept runs live in the worker's host memory, freed allocations are
    scrubbed, the original is timed on other inputs) and is timed as the honest kernel it is."""
    r = evaluator.evaluate(BASE, binary("oracle_reader"), _spec(SOURCE), seed=5)
    assert r.status == "ok", r.message
    assert r.speedup == pytest.approx(1.0, abs=0.05)


def test_inout_is_restored_before_every_timed_launch(evaluator: GpuEvaluator) -> None:
    """Class 3: a kernel that skips its work when its inout buffer already holds its last result
    looked faster; restored before every launch, it never sees its result."""
    spec = _spec(SOURCE.replace('"out float32[n]"', '"inout float32[n]"'))
    base = KernelBinary("twice", "accumulate", cubin("accumulate"), "sm_90")
    r = evaluator.evaluate(base, binary("inout_skip"), spec)
    assert r.status == "ok", r.message
    assert r.speedup == pytest.approx(1.0, abs=0.05)


def test_a_kernel_that_writes_only_where_it_sees_the_documented_poison(
    evaluator: GpuEvaluator,
) -> None:
    """Class 4: the poison is drawn per run, so the documented pattern is never there."""
    r = evaluator.evaluate(BASE, binary("fixed_poison"), _spec(SOURCE))
    assert r.status == "unwritten_output", r.message
    assert "y[0] was never written" in r.message


def test_a_kernel_that_writes_only_over_nans_fails_the_prefilled_run(
    evaluator: GpuEvaluator,
) -> None:
    """Class 4: outputs pre-filled with zeros (and random values in hidden cases) must still
    come out right."""
    r = evaluator.evaluate(BASE, binary("poison_only"), _spec(SOURCE))
    assert r.status == "wrong_output", r.message
    assert "pre-filled with zeros" in r.message


def test_random_poison_is_a_nan_that_differs_per_draw() -> None:
    seen = set()
    for bits in (1, 2, 0xFFFF_FFFF_FFFF_FFFF, 12345678901234567):
        for dtype in ("float32", "float64", "float16", "bfloat16"):
            raw = random_poison(dtype, bits)
            if dtype == "bfloat16":
                value = (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
            else:
                value = np.frombuffer(raw, dtype)
            assert np.isnan(value[0]), (dtype, bits, raw)
        seen.add(random_poison("float32", bits))
    assert len(seen) == 4
    assert random_poison("int32", 0) != b"\0\0\0\0"


def test_guard_bands_scale_with_the_buffer() -> None:
    """Class 5: 8 KiB past a 128 MiB buffer lands inside its guard band."""
    assert guard_bytes(4096) == GUARD_BYTES
    assert guard_bytes(128 << 20) >= 8192 + 4
    assert guard_bytes(128 << 20) == 4 << 20
    assert guard_bytes(1 << 40) == 64 << 20


@pytest.mark.parametrize(
    ("kernel", "status", "needles"),
    [
        ("tail_upto_5000", "wrong_output", ("hidden size case", "n = ")),
        ("range_shift", "wrong_output", ("hidden range case", "beyond the spec's init range")),
        ("aligned_only", "fault", ("hidden offset case", "not 16-byte aligned", "misaligned")),
    ],
)
def test_hidden_generalisation_cases(
    evaluator: GpuEvaluator, kernel: str, status: str, needles: tuple[str, ...]
) -> None:
    """Class 6: right on the listed sizes, inputs and aligned buffers only: a hidden case fails,
    named with its kind and sizes."""
    r = evaluator.evaluate(BASE, binary(kernel), _spec(SOURCE), seed=11)
    assert r.status == status, r.message
    for needle in needles:
        assert needle in r.message, r.message
    assert r.cases and r.cases[-1].status == status and r.cases[-1].sizes


def test_align_16_and_generalize_false_opt_out(evaluator: GpuEvaluator) -> None:
    spec = _spec(SOURCE.replace('args.n = "n"', 'args.n = "n"\nalign = 16\ngeneralize = false'))
    for kernel in ("aligned_only", "tail_upto_5000"):
        r = evaluator.evaluate(BASE, binary(kernel), spec, seed=11)
        assert r.status == "ok", (kernel, r.message)


def test_inputs_are_checked_after_sampled_timed_launches(evaluator: GpuEvaluator) -> None:
    """Class 7: a kernel that changes its input only while timed is caught on a sampled launch."""
    r = evaluator.evaluate(BASE, binary("modifies_input_late"), _spec(SOURCE))
    assert r.status == "input_modified", r.message
    assert "timed launches" in r.message and "modified its input x" in r.message


def test_memcheck_covers_the_timed_cases_shape_class() -> None:
    """Class 5: a timed case too large for memcheck's time budget has a stand-in of the same
    shape class (every size with the same residue modulo 128)."""
    spec = _spec(SOURCE.replace("[1, 100, 1000, 5000]", "[1, 100, 50_000_003]"))
    timed = spec.cases()[-1]
    similar = shape_class_case(spec, timed)
    assert similar is not None
    assert similar.sizes["n"] % SHAPE_MODULUS == timed.sizes["n"] % SHAPE_MODULUS
    assert SHAPE_MODULUS <= similar.sizes["n"] < 2 * SHAPE_MODULUS
    assert similar.grid[0] == -(-similar.sizes["n"] // 256)


def test_module_state_does_not_survive_an_unload(driver_env: object) -> None:
    """Class 1: a candidate's `__device__` state goes with its module; the next evaluation
    loads it afresh (here y = 2x + launches of the module so far, against the original's
    y = 2x, kept after the unload: an unload drops every kept run)."""
    worker = Worker(0)
    try:
        n = 64
        x = Generated(KIND_CODES["uniform"], -1.0, 1.0, key=9)
        launch = Launch(
            None,
            (1, 1, 1),
            (64, 1, 1),
            0,
            (BufferArg("x"), BufferArg("y"), ScalarArg("int32", n)),
            (
                Buffer("x", 4 * n, "float32", generated=x, is_input=True),
                Buffer("y", 4 * n, "float32", poison=b"\xa5\xa5\xa5\x7f"),
            ),
        )

        def run(name: str, keep: str | None, against: tuple[str, ...]) -> RunReply:
            loaded = worker.call(LoadRequest(cubin(name), name), LoadReply, 30)
            assert isinstance(loaded, LoadReply)
            checks = Checks(("y",), keep=keep, against=against)
            request = RunRequest(replace(launch, key=loaded.key), checks=checks)
            reply = worker.call(request, RunReply, 30)
            assert isinstance(reply, RunReply), reply
            if name == "persist":
                assert isinstance(worker.call(UnloadRequest(loaded.key), Pong, 30), Pong)
            return reply

        run("persist", None, ())
        run("twice", "oracle", ())
        again = run("persist", None, ("oracle",))
        assert again.compared["oracle"]["y"].bad == 0
        with pytest.raises(RuntimeError, match="no run kept as 'oracle'"):
            run("twice", None, ("oracle",))  # gone with the unload
    finally:
        worker.close()
