"""The FSR loop on the CPU: recorded evaluator outcomes, an in-process model, a fake build."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

from cuda_llm_lsp.cancel import CancelToken
from cuda_llm_lsp.evaluate.recorded import RecordedEvaluator
from cuda_llm_lsp.evaluate.types import STATUSES, EvalResult, KernelBinary
from cuda_llm_lsp.fsr.client import LlmReply
from cuda_llm_lsp.fsr.history import RunHistory
from cuda_llm_lsp.fsr.loop import optimize
from cuda_llm_lsp.fsr.types import (
    CandidateEvaluated,
    OptimizeConfig,
    OptimizeRequest,
    OptimizeResult,
    ProgressEvent,
    RoundStarted,
    RunFinished,
    RunStarted,
)
from cuda_llm_lsp.source.spec import SpecError
from cuda_llm_lsp.source.text import Span
from tests.support.fsr_fakes import (
    NO_SPEC_FILE,
    SAXPY_FILE,
    FakeLlm,
    FakeToolchain,
    saxpy_candidate,
)
from tests.support.load import slack

BASELINE = {"ms": 1.0, "spread_pct": 0.5}


def evaluator(*entries: dict[str, Any], **extra: Any) -> RecordedEvaluator:
    return RecordedEvaluator({"baseline": BASELINE, "candidates": list(entries), **extra})


async def run(
    llm: FakeLlm,
    ev: RecordedEvaluator,
    *,
    toolchain: FakeToolchain | None = None,
    text: str = SAXPY_FILE,
    events: list[ProgressEvent] | None = None,
    **config: Any,
) -> OptimizeResult:
    # repairs: 0 unless a test is about them (each would be one more request and evaluation)
    settings = {"rounds": 1, "candidates": 4, "profile": False, "repairs": 0} | config
    history = config.pop("history", None)
    settings.pop("history", None)
    cancel = settings.pop("cancel", None)
    return await optimize(
        OptimizeRequest(file_text=text, kernel=settings.pop("kernel", "saxpy"), seed=7),
        OptimizeConfig(**settings),
        ev,
        llm,
        on_event=events.append if events is not None else None,
        toolchain=toolchain or FakeToolchain(),
        history=history,
        cancel=cancel,
    )


def statuses(result: OptimizeResult) -> dict[int, str]:
    return {c.index: c.status for c in result.candidates}


async def test_fastest_correct_candidate_wins_and_failures_keep_their_status() -> None:
    ev = evaluator(
        {"contains": "variant: fast", "status": "ok", "ms": 0.5},
        {"contains": "variant: slow", "status": "ok", "ms": 2.0},
        {
            "contains": "variant: wrong",
            "status": "wrong_output",
            "message": "case 2 (n=1048576): y[17] expected 3.5, got 0",
        },
    )
    llm = FakeLlm(
        {
            (1, 1): saxpy_candidate("slow"),
            (1, 2): saxpy_candidate("fast"),
            (1, 3): saxpy_candidate("wrong"),
            (1, 4): saxpy_candidate("COMPILE_ERROR"),
        }
    )
    result = await run(llm, ev)
    assert result.accepted and result.error is None and not result.cancelled
    assert statuses(result) == {1: "slower", 2: "ok", 3: "wrong_output", 4: "compile_error"}
    assert result.best_source is not None and "variant: fast" in result.best_source
    assert result.speedup == 2.0 and result.best_ms == 0.5 and result.baseline_ms == 1.0
    assert result.message.startswith("2.00x faster")
    assert result.cases_passed == result.cases_total == 3
    assert result.seed == 7 and result.tokens == 400
    assert all(c.status in STATUSES for c in result.candidates)
    wrong = next(c for c in result.candidates if c.index == 3)
    assert "y[17] expected 3.5" in wrong.message
    data = result.to_json()
    assert set(data) == {
        "kernel",
        "baseline_ms",
        "best_ms",
        "speedup",
        "accepted",
        "candidates",
        "best_source",
        "launch",
        "launch_fixed",
        "profile_lines",  # ncu's top lines where ncu ran ([profile])
        "builder",  # which compiler built the kernels ([arbiter])
    }
    assert set(data["candidates"][0]) == {
        "round",
        "index",
        "status",
        "ms",
        "message",
        "launch",
        "tuning",
        "reply_hash",
    }
    assert data["launch"] is None  # no launch block: the original launch
    # the winner was re-validated: a second evaluate call with its source
    fast_calls = [c for c in ev.calls if c[0] == "evaluate" and "variant: fast" in c[1]]
    assert len(fast_calls) == 2


async def test_ties_go_to_fewer_registers_then_the_earlier_candidate() -> None:
    ev = evaluator(
        {"contains": "variant: a", "status": "ok", "ms": 0.5},
        {"contains": "variant: b", "status": "ok", "ms": 0.5},
        {"contains": "variant: c", "status": "ok", "ms": 0.5},
    )
    toolchain = FakeToolchain(registers={"a": 40, "b": 20, "c": 20})
    llm = FakeLlm(
        {(1, 1): saxpy_candidate("a"), (1, 2): saxpy_candidate("c"), (1, 3): saxpy_candidate("b")}
    )
    result = await run(llm, ev, toolchain=toolchain, candidates=3)
    assert result.accepted and result.best_source is not None
    assert "variant: c" in result.best_source  # 20 registers, earlier than b


async def test_gain_within_noise_is_no_improvement() -> None:
    ev = evaluator({"contains": "variant: tiny", "status": "ok", "ms": 0.99, "spread_pct": 0.5})
    result = await run(FakeLlm(default=saxpy_candidate("tiny")), ev, candidates=1)
    assert not result.accepted and result.best_source is None
    assert result.message.startswith("no improvement")
    assert "within measurement noise" in result.message
    assert statuses(result) == {1: "ok"}


async def test_noise_threshold_follows_the_measured_spread() -> None:
    # 1.05x clears the 2% floor but not a 3% + 3% spread
    ev = RecordedEvaluator(
        {
            "baseline": {"ms": 1.0, "spread_pct": 3.0},
            "candidates": [
                {"contains": "variant: noisy", "status": "ok", "ms": 1 / 1.05, "spread_pct": 3.0}
            ],
        }
    )
    result = await run(FakeLlm(default=saxpy_candidate("noisy")), ev, candidates=1)
    assert not result.accepted and "needs > 1.060x" in result.message
    ev = RecordedEvaluator(
        {
            "baseline": {"ms": 1.0, "spread_pct": 1.0},
            "candidates": [
                {"contains": "variant: quiet", "status": "ok", "ms": 1 / 1.05, "spread_pct": 1.0}
            ],
        }
    )
    result = await run(FakeLlm(default=saxpy_candidate("quiet")), ev, candidates=1)
    assert result.accepted


async def test_only_slower_candidates_say_so() -> None:
    ev = evaluator({"contains": "variant: slow", "status": "ok", "ms": 1.5})
    result = await run(FakeLlm(default=saxpy_candidate("slow")), ev, candidates=2)
    assert not result.accepted and set(statuses(result).values()) == {"slower"}
    assert "all slower than the original" in result.message


async def test_winner_failing_revalidation_gives_way_to_the_next() -> None:
    ev = evaluator(
        {
            "contains": "variant: flaky",
            "status": "ok",
            "ms": 0.3,
            "later": {"status": "nondeterministic", "message": "two runs differ at y[5]"},
        },
        {"contains": "variant: solid", "status": "ok", "ms": 0.6},
    )
    llm = FakeLlm({(1, 1): saxpy_candidate("flaky"), (1, 2): saxpy_candidate("solid")})
    result = await run(llm, ev, candidates=2)
    assert result.accepted and result.best_source is not None
    assert "variant: solid" in result.best_source
    flaky = next(c for c in result.candidates if c.index == 1)
    assert flaky.status == "nondeterministic" and "re-validation" in flaky.message


async def test_sanitizer_failure_rejects_the_winner() -> None:
    report = EvalResult(
        status="sanitizer",
        message="racecheck: 4 hazards",
        seed=1,
        sanitizer_report="RACECHECK SUMMARY: 4 hazards displayed",
    )
    toolchain = FakeToolchain(sanitizer={"racy": report})
    ev = evaluator({"contains": "variant: racy", "status": "ok", "ms": 0.4})
    result = await run(
        FakeLlm(default=saxpy_candidate("racy")), ev, toolchain=toolchain, candidates=1
    )
    assert not result.accepted and statuses(result) == {1: "sanitizer"}
    assert "RACECHECK" in result.candidates[0].message
    assert "compute-sanitizer" in result.message


async def test_clean_sanitizer_run_is_mentioned() -> None:
    clean = EvalResult(status="ok", message="", seed=1)
    ev = evaluator({"contains": "variant: fine", "status": "ok", "ms": 0.4})
    result = await run(
        FakeLlm(default=saxpy_candidate("fine")),
        ev,
        toolchain=FakeToolchain(sanitizer={"fine": clean}),
        candidates=1,
    )
    assert result.accepted and "sanitizer clean" in result.message


async def test_kernel_without_spec_stops_with_a_draft() -> None:
    llm = FakeLlm(default=saxpy_candidate("x"))
    result = await run(llm, evaluator(), text=NO_SPEC_FILE, kernel="scale")
    assert result.error is not None and "no test spec" in result.error
    assert "/* @cuda-llm" in result.message and not result.accepted
    assert llm.prompts == [] and result.candidates == ()


async def test_spec_errors_stop_the_run() -> None:
    problem = SpecError(Span.of(9, 0, 9, 5), "unknown element type 'float33'")
    toolchain = FakeToolchain(spec_errors=[problem])
    result = await run(FakeLlm(), evaluator(), toolchain=toolchain)
    assert result.error is not None and "line 10: unknown element type 'float33'" in result.error


async def test_unknown_kernel_is_a_clear_error() -> None:
    result = await run(FakeLlm(), evaluator(), kernel="nope")
    assert result.error == "no kernel named 'nope' in the file"


async def test_baseline_failing_its_spec_stops() -> None:
    ev = RecordedEvaluator({"baseline": {"status": "out_of_bounds", "message": "y[1000] written"}})
    llm = FakeLlm()
    result = await run(llm, ev)
    assert result.error is not None and "fails its own test spec (out_of_bounds)" in result.error
    assert llm.prompts == []


async def test_feedback_reaches_the_next_round() -> None:
    ev = evaluator(
        {"contains": "variant: good", "status": "ok", "ms": 0.8},
        {
            "contains": "variant: bad",
            "status": "unwritten_output",
            "message": "case 1 (n=1000): y[999] never written",
        },
    )
    llm = FakeLlm(
        {
            (1, 1): saxpy_candidate("good"),
            (1, 2): saxpy_candidate("bad"),
            (1, 3): saxpy_candidate("COMPILE_ERROR"),
        },
        default=saxpy_candidate("good"),
    )
    await run(llm, ev, rounds=2, candidates=3, patience=5)
    round2 = [p for p in llm.prompts if p.round == 2]
    assert len(round2) == 3
    text = round2[0].messages[1]["content"]
    assert "variant: good" in text and "0.8000 ms" in text  # top-k carried with its figures
    assert "y[999] never written" in text  # failing case, sizes, index
    assert 'identifier "COMPILE_ERROR" is undefined' in text  # compile log
    first = next(p for p in llm.prompts if p.round == 1).messages[1]["content"]
    assert "best correct kernels" not in first


async def test_patience_stops_after_rounds_without_gain() -> None:
    ev = evaluator()  # every candidate: wrong_output
    llm = FakeLlm(default=saxpy_candidate("meh"))
    events: list[ProgressEvent] = []
    result = await run(llm, ev, rounds=5, candidates=2, patience=2, events=events)
    assert len(llm.prompts) == 4
    assert sum(isinstance(e, RoundStarted) for e in events) == 2
    assert "no gain in 2 rounds" in result.message


async def test_token_budget_stops_the_run() -> None:
    llm = FakeLlm(default=saxpy_candidate("meh"), tokens=100)
    result = await run(llm, evaluator(), rounds=4, candidates=2, patience=9, token_budget=250)
    assert result.tokens >= 250 and len(llm.prompts) <= 4
    assert "token budget of 250 reached" in result.message


async def test_time_budget_cancels_slow_requests() -> None:
    llm = FakeLlm(default=(saxpy_candidate("late"), 5.0))
    started = time.monotonic()
    result = await run(llm, evaluator(), rounds=3, candidates=2, time_budget_s=0.3)
    assert time.monotonic() - started < 2.0 * slack()
    assert "time budget of 0.3 s reached" in result.message
    assert llm.cancelled == 2 and result.candidates == ()


async def test_cancel_mid_round_stops_requests_at_once() -> None:
    llm = FakeLlm({(1, 1): saxpy_candidate("quick")}, default=(saxpy_candidate("slow"), 30.0))
    ev = evaluator({"contains": "variant: quick", "status": "ok", "ms": 0.5})
    cancel = CancelToken()
    events: list[ProgressEvent] = []

    async def press_cancel() -> None:
        while not any(isinstance(e, CandidateEvaluated) for e in events):
            await asyncio.sleep(0.01)
        cancel.cancel()

    started = time.monotonic()
    presser = asyncio.ensure_future(press_cancel())
    result = await run(llm, ev, rounds=3, candidates=4, cancel=cancel, events=events)
    await presser
    assert time.monotonic() - started < 2.0 * slack()
    assert result.cancelled and not result.accepted and result.best_source is None
    assert "cancelled" in result.message
    assert llm.cancelled == 3 and len(llm.prompts) == 4  # no further requests
    assert isinstance(events[-1], RunFinished) and events[-1].result is result


async def test_cancel_stops_gpu_work_in_flight() -> None:
    ev = evaluator({"contains": "variant: hang", "status": "ok", "ms": 0.5, "delay_s": 30})
    llm = FakeLlm(default=saxpy_candidate("hang"))
    cancel = CancelToken()
    asyncio.get_running_loop().call_later(0.3, cancel.cancel)
    started = time.monotonic()
    result = await run(llm, ev, candidates=1, cancel=cancel)
    assert time.monotonic() - started < 2.0 * slack()
    assert result.cancelled


async def test_fatal_endpoint_error_ends_the_run() -> None:
    fatal = LlmReply(
        text="", code=None, error="the endpoint rejected the API key (401)", fatal=True
    )
    llm = FakeLlm(default=fatal)
    result = await run(llm, evaluator(), rounds=3, candidates=2)
    assert result.error is not None and "rejected the API key (401)" in result.error
    assert len(llm.prompts) == 2 and {c.status for c in result.candidates} == {"llm_error"}


async def test_candidates_are_evaluated_as_they_arrive() -> None:
    ev = evaluator(
        {"contains": "variant: early", "status": "ok", "ms": 0.9, "delay_s": 0.2},
        {"contains": "variant: late", "status": "ok", "ms": 0.8},
    )
    llm = FakeLlm({(1, 1): (saxpy_candidate("late"), 0.6), (1, 2): saxpy_candidate("early")})
    events: list[ProgressEvent] = []
    started = time.monotonic()
    result = await run(llm, ev, candidates=2, events=events)
    evaluated = [e.outcome.index for e in events if isinstance(e, CandidateEvaluated)]
    assert evaluated == [2, 1]
    # the GPU's 0.2 s on candidate 2 overlapped the model writing candidate 1
    assert time.monotonic() - started < (0.6 + 0.2 + 0.5) * slack()
    assert result.accepted and "variant: late" in (result.best_source or "")


async def test_progress_events_tell_the_whole_story() -> None:
    ev = evaluator({"contains": "variant: fast", "status": "ok", "ms": 0.5})
    events: list[ProgressEvent] = []
    await run(FakeLlm(default=saxpy_candidate("fast")), ev, candidates=2, events=events)
    assert isinstance(events[0], RunStarted) and events[0].baseline.status == "ok"
    assert isinstance(events[1], RoundStarted) and events[1].round == 1
    evaluated = [e for e in events if isinstance(e, CandidateEvaluated)]
    assert len(evaluated) == 2 and evaluated[-1].best is not None
    assert isinstance(events[-1], RunFinished)


async def test_history_records_the_run(tmp_path: Any) -> None:
    history = RunHistory(tmp_path / "h.sqlite3")
    ev = evaluator({"contains": "variant: fast", "status": "ok", "ms": 0.5})
    llm = FakeLlm({(1, 1): saxpy_candidate("fast"), (1, 2): saxpy_candidate("COMPILE_ERROR")})
    result = await run(llm, ev, candidates=2, history=history)
    [record] = history.runs()
    assert record.id == result.run_id and record.accepted and record.speedup == 2.0
    assert record.kernel == "saxpy" and record.seed == 7 and record.candidates == 2
    rows = history.candidates(record.id)
    assert [r.status for r in rows] == ["ok", "compile_error"]
    assert "variant: fast" in rows[0].source and rows[0].tokens == 100


async def test_history_records_failed_runs_too(tmp_path: Any) -> None:
    history = RunHistory(tmp_path / "h.sqlite3")
    await run(FakeLlm(), evaluator(), text=NO_SPEC_FILE, kernel="scale", history=history)
    [record] = history.runs()
    assert record.error is not None and "no test spec" in record.error


async def test_cancelling_the_task_stops_everything_and_is_recorded(tmp_path: Any) -> None:
    history = RunHistory(tmp_path / "h.sqlite3")
    llm = FakeLlm(default=(saxpy_candidate("slow"), 30.0))
    task = asyncio.ensure_future(run(llm, evaluator(), candidates=2, history=history))
    while len(llm.prompts) < 2:
        await asyncio.sleep(0.01)
    task.cancel()
    started = time.monotonic()
    try:
        await task
    except asyncio.CancelledError:
        pass
    else:
        raise AssertionError("optimize swallowed the cancellation")
    assert time.monotonic() - started < 1.0 * slack() and llm.cancelled == 2
    [record] = history.runs()
    assert record.cancelled and record.outcome == "interrupted; nothing was applied"


class _CrashingBuild(FakeToolchain):
    def __init__(self, crash_original: bool) -> None:
        super().__init__()
        self.crash_original = crash_original

    def build(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("kernel_source") is None and not self.crash_original:
            return super().build(*args, **kwargs)
        raise RuntimeError("libnvrtc.so: cannot open shared object file")


async def test_a_build_that_raises_is_a_clear_error() -> None:
    result = await run(FakeLlm(), evaluator(), toolchain=_CrashingBuild(crash_original=True))
    assert result.error is not None and "cannot build the original saxpy: libnvrtc" in result.error
    result = await run(
        FakeLlm(default=saxpy_candidate("x")),
        evaluator(),
        candidates=1,
        toolchain=_CrashingBuild(crash_original=False),
    )
    assert statuses(result) == {1: "compile_error"}
    assert "the build failed: libnvrtc" in result.candidates[0].message


async def test_no_revalidation_is_spent_on_a_gain_within_noise() -> None:
    ev = evaluator({"contains": "variant: tiny", "status": "ok", "ms": 0.985})
    result = await run(FakeLlm(default=saxpy_candidate("tiny")), ev, candidates=1)
    assert not result.accepted and "needs > 1.020x" in result.message
    assert [c[0] for c in ev.calls] == ["benchmark", "evaluate"]


async def test_baseline_and_candidates_are_built_for_the_evaluating_gpu() -> None:
    """A configured arch (sm_80 here) must not decide the build: the judging GPU's does."""
    from cuda_llm_lsp.config import Settings

    ev = RecordedEvaluator(
        {
            "baseline": BASELINE,
            "device": {"arch": "sm_90", "compute_capability": [9, 0]},
            "candidates": [{"contains": "variant: fast", "status": "ok", "ms": 0.5}],
        }
    )
    toolchain = FakeToolchain()
    result = await optimize(
        OptimizeRequest(
            file_text=SAXPY_FILE, kernel="saxpy", seed=7, settings=Settings(arch="sm_80")
        ),
        OptimizeConfig(rounds=1, candidates=1, profile=False),
        ev,
        FakeLlm(default=saxpy_candidate("fast")),
        toolchain=toolchain,
    )
    assert result.error is None and result.accepted
    assert toolchain.archs == ["sm_90", "sm_90"]


async def test_round_one_carries_the_originals_profile_where_ncu_runs() -> None:
    """With a profiler, round 1 already states the original's bottleneck class and metrics;
    without one (profile off or no ncu), the roofline's class stands in."""
    profiled = FakeToolchain()
    profiled.profile_text = "Bottleneck: memory-bandwidth-bound.\n- DRAM bandwidth: 91.5%"
    llm = FakeLlm(default=saxpy_candidate("p"))
    await run(llm, evaluator(), toolchain=profiled, candidates=1, profile=True)
    first = llm.prompts[0].messages[1]["content"]
    assert "Nsight Compute on the original:\nBottleneck: memory-bandwidth-bound." in first
    assert "bottleneck (from the roofline)" not in first
    plain = FakeLlm(default=saxpy_candidate("p"))
    await run(plain, evaluator(), toolchain=profiled, candidates=1, profile=False)
    first = plain.prompts[0].messages[1]["content"]
    assert "Nsight Compute" not in first and "bottleneck (from the roofline)" in first


async def test_the_result_says_which_compiler_built_the_kernels() -> None:
    """Where NVRTC cannot build the file the toolchain builds with nvcc ([arbiter]): the
    optimize JSON says so."""

    class NvccToolchain(FakeToolchain):
        def build(self, *args: Any, **kwargs: Any) -> Any:
            built = super().build(*args, **kwargs)
            if isinstance(built, KernelBinary):
                return dataclasses.replace(built, builder="nvcc")
            return built

    ev = evaluator({"contains": "variant: fast", "status": "ok", "ms": 0.5})
    llm = FakeLlm({(1, 1): saxpy_candidate("fast")})
    result = await run(llm, ev, toolchain=NvccToolchain(), candidates=1)
    assert result.accepted
    assert result.builder == "nvcc" and result.to_json()["builder"] == "nvcc"
    plain = await run(FakeLlm({(1, 1): saxpy_candidate("fast")}), ev, candidates=1)
    assert plain.to_json()["builder"] == "nvrtc"
