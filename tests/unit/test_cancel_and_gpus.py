"""The engine's one cancel (`CancelToken`) and one way to the GPUs (`GpuService`), issue 26."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from cuda_llm_lsp.cancel import CancelToken
from cuda_llm_lsp.engine import GpuService, Refusal, benchmark_in_file
from cuda_llm_lsp.engine.job_view import GpuGate
from cuda_llm_lsp.evaluate.types import EvaluationCancelled


async def test_a_token_cancelled_from_another_thread_wakes_its_waiter_at_once() -> None:
    token = CancelToken()
    waiting = asyncio.ensure_future(token.wait())
    await asyncio.sleep(0.01)
    threading.Timer(0.05, token.cancel).start()
    await asyncio.wait_for(waiting, 5)
    assert token.cancelled
    await asyncio.wait_for(token.wait(), 1)  # already cancelled: returns at once


def test_callbacks_run_once_and_a_late_one_runs_at_once() -> None:
    token, heard = CancelToken(), []
    forget = token.on_cancel(lambda: heard.append("forgotten"))
    forget()
    token.on_cancel(lambda: heard.append("first"))
    token.on_cancel(lambda: 1 / 0)  # a failing callback is logged; the others still run
    token.on_cancel(lambda: heard.append("second"))
    token.cancel()
    token.cancel()
    token.on_cancel(lambda: heard.append("late"))
    assert heard == ["first", "second", "late"]


def test_a_child_is_cancelled_with_its_parent_and_can_be_cancelled_alone() -> None:
    parent = CancelToken()
    alone, with_parent = parent.child(), parent.child()
    alone.cancel()
    assert alone.cancelled and not parent.cancelled and not with_parent.cancelled
    parent.cancel()
    assert with_parent.cancelled


def test_a_waiter_for_the_gpu_leaves_when_its_token_is_cancelled() -> None:
    gate, holder, waiter = GpuGate(), CancelToken(), CancelToken()
    assert gate.enter(holder)
    entered: list[bool] = []
    thread = threading.Thread(target=lambda: entered.append(gate.enter(waiter)))
    thread.start()
    time.sleep(0.05)
    waiter.cancel()
    gate.wake()
    thread.join(5)
    assert entered == [False]  # left without the GPU, which the holder still has
    gate.leave()


class _Gpu:
    def __init__(self) -> None:
        self.closed = False

    def device_facts(self) -> Any:
        raise AssertionError("not in this test")

    def benchmark(self, *args: Any, **kwargs: Any) -> Any:
        raise EvaluationCancelled("cancelled")

    def cancel(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def test_the_service_closes_a_retired_evaluator_when_its_last_lease_returns() -> None:
    made: list[_Gpu] = []
    service = GpuService(lambda: made.append(_Gpu()) or made[-1])  # type: ignore[func-returns-value]
    first, second = service.lease(), service.lease()
    assert len(made) == 1  # one evaluator for the current settings, shared by leases
    service.retire()
    first.release()
    assert not made[0].closed
    with service.lease():
        assert len(made) == 2  # the next lease gets a new one
    second.release()
    deadline = time.monotonic() + 5
    while not made[0].closed:  # closed off the releasing thread
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert not made[1].closed
    service.close()
    assert made[1].closed


async def test_an_action_refuses_a_kernel_that_is_not_there() -> None:
    from cuda_llm_lsp.config import Settings

    service = GpuService(_Gpu)  # type: ignore[arg-type]
    outcome = await benchmark_in_file("int x;\n", None, "nothing", Settings(), service)
    assert isinstance(outcome, Refusal) and outcome.kind == "no_kernel"
    assert "macro" not in outcome.message


async def test_an_action_says_why_a_kernel_declared_through_a_macro_is_not_run() -> None:
    """The editor finds it (figures, no job lens); a job invoked by hand says what to change."""
    from cuda_llm_lsp.config import Settings

    service = GpuService(_Gpu)  # type: ignore[arg-type]
    text = '#define KERNEL extern "C" __global__\nKERNEL void scale(float* x) { x[0] = 1.0f; }\n'
    outcome = await benchmark_in_file(text, None, "scale", Settings(), service)
    assert isinstance(outcome, Refusal) and outcome.kind == "no_kernel"
    assert (
        "through a macro" in outcome.message and "__global__ in front of scale" in outcome.message
    )


@pytest.mark.parametrize("action", ["benchmark", "tune", "optimize", "profile"])
@pytest.mark.parametrize("kind", ["no_spec", "spec_errors"])
async def test_every_action_refuses_a_kernel_without_a_usable_spec(kind: str, action: str) -> None:
    """One gate for the four actions (docs/design.md "The engine"): the same typed refusal."""
    from cuda_llm_lsp.config import Settings
    from cuda_llm_lsp.engine import optimize_in_file, profile_in_file, tune_in_file
    from cuda_llm_lsp.evaluate.line_profile import RecordedProfiler
    from cuda_llm_lsp.fsr.types import config_from_settings

    spec = "/* @cuda-llm\nsizes.n = [oops]\n*/\n" if kind == "spec_errors" else ""
    text = spec + "__global__ void k(float* x) { x[0] = 1.0f; }\n"
    settings, gpus = Settings(), GpuService(_Gpu)  # type: ignore[arg-type]
    if action == "benchmark":
        outcome: Any = await benchmark_in_file(text, None, "k", settings, gpus)
    elif action == "tune":
        outcome = await tune_in_file(text, None, "k", settings, gpus)
    elif action == "optimize":
        config = config_from_settings(settings)
        outcome = await optimize_in_file(text, None, "k", settings, config, gpus)
    else:
        outcome = await profile_in_file(text, None, "k", settings, RecordedProfiler({}), gpus)
    assert isinstance(outcome, Refusal) and outcome.kind == kind
    assert (outcome.draft is not None) == (kind == "no_spec")  # a draft to start from
