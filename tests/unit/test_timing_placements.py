"""Timed launches rotate over copies of a kernel's buffers (`Plan.placements`, issue 41): where
buffers land in memory moved a small kernel's median by ~1 % between placements, so one per run
made two runs disagree by as much. The worker's backend runs here in-process on the CPU driver
double (tests/unit/fake_cuda_driver.py)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from cuda_llm_lsp.evaluate import timing
from cuda_llm_lsp.evaluate.compare import poison_pattern
from cuda_llm_lsp.evaluate.counter import KIND_CODES, Generated
from cuda_llm_lsp.evaluate.protocol import (
    Buffer,
    BufferArg,
    Checks,
    Launch,
    LoadReply,
    LoadRequest,
    ScalarArg,
    TimedKernel,
    TimeReply,
    TimeRequest,
)
from cuda_llm_lsp.evaluate.worker import (
    DRIVER_ENV,
    PLACEMENT_BYTES,
    CudaBackend,
    placements_for,
)
from tests.unit import fake_cuda_driver as fake
from tests.unit.fake_cuda_driver import cubin

N = 4096


@pytest.fixture
def backend(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[CudaBackend]:
    monkeypatch.setenv(DRIVER_ENV, "tests.unit.fake_cuda_driver")
    monkeypatch.setenv("CUDA_LLM_CACHE_DIR", str(tmp_path))  # the check kernels' cubin cache
    fake.S.device_globals.pop("records_outputs", None)
    yield CudaBackend(0)


def buffers(n: int = N) -> tuple[Buffer, Buffer]:
    x = Buffer("x", 4 * n, "float32", generated=Generated(KIND_CODES["uniform"], -1.0, 1.0, key=7))
    y = Buffer("y", 4 * n, "float32", poison=poison_pattern("float32"))
    return x, y


def time_it(backend: CudaBackend, plan: timing.Plan) -> TimeReply:
    loaded = backend.handle(LoadRequest(cubin("records_outputs"), "records_outputs"))
    assert isinstance(loaded, LoadReply)
    launch = Launch(
        loaded.key,
        (N // 256, 1, 1),
        (256, 1, 1),
        0,
        (BufferArg("x"), BufferArg("y"), ScalarArg("int32", N)),
        buffers(),
    )
    reply = backend.handle(TimeRequest((TimedKernel(launch, checks=Checks(("y",))),), plan))
    assert isinstance(reply, TimeReply), reply
    return reply


PLAN = timing.Plan(min_samples=16, max_samples=16, warmup=4, warmup_s=0, batch=8)


def test_timed_launches_rotate_evenly_over_the_plans_placements(backend: CudaBackend) -> None:
    reply = time_it(backend, PLAN)
    assert len(reply.samples[0]) == 16
    seen = Counter(fake.S.device_globals["records_outputs"])
    assert len(seen) == timing.PLACEMENTS == 4  # four copies of y, each its own address
    assert set(seen.values()) == {(4 + 16) // 4}  # warm-up included, in turn
    checks = reply.checks[0]
    assert checks is not None and set(checks.guards.guards) == {"x", "y"}
    assert not checks.last.unwritten["y"].unwritten  # the last launch's own copy was read


def test_one_placement_times_on_one_copy(backend: CudaBackend) -> None:
    time_it(backend, timing.Plan(**{**PLAN.__dict__, "placements": 1}))
    assert len(set(fake.S.device_globals["records_outputs"])) == 1


def test_large_buffers_get_fewer_copies() -> None:
    """Copies of buffers that span many pages already would only cost memory."""
    assert placements_for(buffers(), 4) == 4
    third = PLACEMENT_BYTES // 3 // 4  # elements: three copies of x and y pass the budget
    assert placements_for(buffers(third), 4) == 1
    assert placements_for(buffers(third // 2), 4) == 2
    assert placements_for(buffers(PLACEMENT_BYTES), 4) == 1  # one, however large
