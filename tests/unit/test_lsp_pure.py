"""Pure helpers of the language server: position encodings, result texts, suggestion files."""

from __future__ import annotations

import asyncio
import os
import stat
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import PositionCodec

from cuda_llm_lsp.cancel import CancelToken, relayed
from cuda_llm_lsp.compile.types import Resources
from cuda_llm_lsp.engine.job_view import GpuGate, JobEvaluator
from cuda_llm_lsp.evaluate.types import EvaluationCancelled
from cuda_llm_lsp.fsr.types import CandidateOutcome
from cuda_llm_lsp.lsp.kernel_facts import resources_line
from cuda_llm_lsp.lsp.positions import split_lines, to_point, to_position, to_range
from cuda_llm_lsp.lsp.results import Suggestion, failure_hint, optimize_summary
from cuda_llm_lsp.lsp.state import CudaLlmServer
from cuda_llm_lsp.lsp.suggestions import write_files
from cuda_llm_lsp.source.kernels import Kernel, find_kernels
from cuda_llm_lsp.source.text import Point, Span
from tests.support.load import slack

TEXT = 'x = "😋"; k<<<1, 1>>>();\nsecond line'


def test_positions_round_trip_in_every_encoding() -> None:
    lines = split_lines(TEXT)
    quote = TEXT.index('"', 5)  # the closing quote, after the emoji
    for encoding, expected in (("utf-8", 9), ("utf-16", 7), ("utf-32", 6)):
        codec = PositionCodec(encoding=types.PositionEncodingKind(encoding))
        position = to_position(lines, Point(0, quote), codec)
        assert position == types.Position(line=0, character=expected), encoding
        assert to_point(lines, position, codec) == Point(0, quote)


def test_positions_are_clamped_to_the_text() -> None:
    codec = PositionCodec()
    lines = split_lines(TEXT)
    assert to_point(lines, types.Position(line=9, character=0), codec) == Point(1, 11)
    assert to_point(lines, types.Position(line=1, character=99), codec) == Point(1, 11)
    span = Span.of(1, 0, 1, 6)
    assert to_range(lines, span, codec).end == types.Position(line=1, character=6)


def test_resources_line() -> None:
    assert resources_line("saxpy", Resources(24, 0, 0, 0, 0)) == (
        "saxpy · 24 regs · 0 B spill · 0 B smem"
    )
    assert "no resource figures" in resources_line("k", None)
    with_const = resources_line("k", Resources(8, 0, 0, 0, 0, constant_bytes=12))
    assert with_const.endswith(" · 12 B const")
    why = "template: no instantiation (add `instance` to its spec or launch it)"
    assert resources_line("k", None, why) == f"k · {why}"  # not "see compile diagnostics"


def _outcome(status: str, message: str = "") -> CandidateOutcome:
    return CandidateOutcome(1, 1, status, None, message, "")  # type: ignore[arg-type]


def test_failure_hint_names_the_main_reasons() -> None:
    hint = failure_hint(
        [
            _outcome("wrong_output", "case 2: y[17] expected 1, got 0"),
            _outcome("wrong_output", "case 1"),
            _outcome("compile_error", "line 3: error"),
            _outcome("ok"),
            _outcome("slower"),
        ]
    )
    assert hint is not None and hint.startswith("Candidates failed: 2 wrong output (case 2:")
    assert "1 compile error" in hint
    assert failure_hint([_outcome("ok"), _outcome("slower")]) is None


def test_failure_hint_after_a_win_reads_as_a_win() -> None:
    """The line under a 1.97x win said 'Candidates failed: ...' (issue 41)."""
    outcomes = [_outcome("ok"), _outcome("unwritten_output", "out[128]"), _outcome("ok")]
    hint = failure_hint(outcomes, won=True)
    assert hint == "Kept the fastest correct of 3; 1 other failed: 1 unwritten output (out[128])"
    assert "Candidates failed" not in hint


def test_optimize_summary() -> None:
    text = optimize_summary(
        "saxpy",
        baseline_ms=0.12,
        best_ms=0.06,
        speedup=2.0,
        cases_passed=4,
        cases_total=4,
        fraction_of_peak=0.71,
        state="done",
    )
    assert text == (
        "saxpy: baseline 0.120 ms → best 60.0 µs (2.00× faster) · 4/4 cases · "
        "71% of copy peak · done"
    )  # times as the evaluator's own reports write them
    unknown = optimize_summary(
        "saxpy",
        baseline_ms=None,
        best_ms=None,
        speedup=None,
        cases_passed=None,
        cases_total=None,
        fraction_of_peak=None,
        state="running",
    )
    assert unknown.startswith("saxpy: baseline ?")


def test_suggestion_preview_files_are_read_only(tmp_path: Path) -> None:
    suggestion = Suggestion(
        uri="file:///tmp/a.cu",
        kernel="saxpy",
        original="__global__ void saxpy() {\n}",
        suggested="__global__ void saxpy() {\n  // faster\n}",
        speedup=2.1,
        baseline_ms=1.0,
        best_ms=0.47,
        cases_passed=4,
        cases_total=4,
        message="2.10x faster",
    )
    assert suggestion.figures == "2.10× faster, 4/4 cases"
    source, diff = write_files(suggestion, tmp_path)
    again, _ = write_files(suggestion, tmp_path)  # rewriting a read-only preview works
    assert again == source
    assert "// faster" in source.read_text(encoding="utf-8")
    assert "+  // faster" in diff.read_text(encoding="utf-8")
    for path in (source, diff):
        assert not os.stat(path).st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)


class _SlowGpu:
    """Blocks each call until released or cancelled, like the worker pool."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.cancelled = threading.Event()
        self.started = threading.Event()

    def benchmark(
        self, name: str, spec: object, *, stop: CancelToken | None = None, **options: object
    ) -> str:
        self.cancelled.clear()  # as the worker forgets an earlier call's cancel, then relays
        with relayed(stop, self.cancel):  # this call's own token (the protocol's `stop`)
            self.started.set()
            while not self.release.wait(0.01):
                if self.cancelled.is_set():
                    raise EvaluationCancelled("killed")
        return name

    def cancel(self) -> None:
        self.cancelled.set()


def test_cancelling_one_job_leaves_the_other_jobs_gpu_run_alone() -> None:
    gpu = _SlowGpu()
    gate = GpuGate()
    running, waiting = JobEvaluator(gpu, gate), JobEvaluator(gpu, gate)  # type: ignore[arg-type]
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(running.benchmark, "b", None)
        assert gpu.started.wait(5)
        second = pool.submit(waiting.benchmark, "a", None)
        waiting.token.cancel()  # a job whose call waits for the GPU: only that call ends
        with pytest.raises(EvaluationCancelled):
            second.result(5)
        assert not first.done()
        gpu.release.set()
        assert first.result(5) == "b"
    gpu.release.clear()
    with ThreadPoolExecutor(1) as pool:
        gpu.started.clear()
        third = pool.submit(running.benchmark, "c", None)
        assert gpu.started.wait(5)
        running.token.cancel()  # the job whose call runs: the GPU run is killed at once
        with pytest.raises(EvaluationCancelled):
            third.result(5)
        with pytest.raises(EvaluationCancelled):  # and the job's later calls are refused
            pool.submit(running.benchmark, "d", None).result(5)


def test_the_loops_cancel_interrupts_one_call_and_later_calls_still_run() -> None:
    gpu = _SlowGpu()
    job = JobEvaluator(gpu, GpuGate())  # type: ignore[arg-type]
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(job.benchmark, "slow", None)
        assert gpu.started.wait(5)
        job.cancel()  # what the FSR loop does when a budget runs out mid-candidate
        with pytest.raises(EvaluationCancelled):
            first.result(5)
        gpu.started.clear()
        second = pool.submit(job.benchmark, "winner", None)  # re-validating the winner
        assert gpu.started.wait(5)
        time.sleep(0.1)  # the first call's cancel is spent: it must not hit this one
        assert not second.done()
        gpu.release.set()
        assert second.result(5) == "winner"


class _LateStartGpu(_SlowGpu):
    """A call that has left the job but not yet reached the worker: it pauses before the worker
    forgets an earlier call's cancel, as the real one does when a call begins."""

    def __init__(self) -> None:
        super().__init__()
        self.entered, self.go = threading.Event(), threading.Event()

    def benchmark(
        self, name: str, spec: object, *, stop: CancelToken | None = None, **options: object
    ) -> str:
        self.entered.set()
        assert self.go.wait(5)
        return super().benchmark(name, spec, stop=stop)


def test_a_cancel_landing_before_the_call_reaches_the_worker_still_stops_it() -> None:
    """The race the 50 ms re-send covered: the cancel comes after the job let the call go and
    before the worker began it (and cleared its cancel). The call's own token carries it."""
    gpu = _LateStartGpu()
    job = JobEvaluator(gpu, GpuGate())  # type: ignore[arg-type]
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(job.benchmark, "slow", None)
        assert gpu.entered.wait(5)
        job.cancel()  # the worker has not begun: a plain cancel would be cleared and lost
        gpu.go.set()
        with pytest.raises(EvaluationCancelled):
            first.result(2)  # well before `release`: nothing else would end it
        gpu.entered.clear()
        second = pool.submit(job.benchmark, "winner", None)
        assert gpu.entered.wait(5) and gpu.started.wait(5)
        time.sleep(0.2)  # the first call's cancel is spent: it never reaches this one
        assert not second.done()
        gpu.release.set()
        assert second.result(5) == "winner"


class _SlowToCancelGpu(_SlowGpu):
    """Its cancel takes a while: a worker process holding a CUDA context is slow to exit."""

    def cancel(self) -> None:
        time.sleep(1.5)
        super().cancel()


async def test_a_jobs_cancel_does_not_block_the_event_loop() -> None:
    """Cancel runs on the server's event loop (the progress's Cancel, `cudaLlm.cancel`): the GPU
    work is stopped from a thread, so hover and diagnostics go on meanwhile."""
    from cuda_llm_lsp.lsp.jobs import Job

    gpu = _SlowToCancelGpu()
    server = CudaLlmServer(evaluator_factory=lambda settings: gpu)  # type: ignore[arg-type,return-value]
    job = Job("file:///k.cu", "k", "benchmark", "token")
    lease = await asyncio.to_thread(server.gpus.lease, job.cancel_token)
    call = asyncio.ensure_future(asyncio.to_thread(lease.evaluator.benchmark, "b", None))
    assert await asyncio.to_thread(gpu.started.wait, 5)
    start = time.perf_counter()
    job.cancel()
    elapsed = time.perf_counter() - start
    assert elapsed < 0.5 * slack(), f"the cancel held the event loop for {elapsed:.1f} s"
    with pytest.raises(EvaluationCancelled):  # and the GPU call still stops
        await asyncio.wait_for(call, 10)


async def test_a_budget_running_out_mid_candidate_keeps_the_winner() -> None:
    from tests.support.fsr_fakes import FakeLlm, saxpy_candidate
    from tests.unit.test_loop import evaluator, run

    llm = FakeLlm({(1, 1): saxpy_candidate("fast"), (1, 2): saxpy_candidate("hang")})
    inner = evaluator(
        {"contains": "variant: fast", "status": "ok", "ms": 0.5},
        {"contains": "variant: hang", "status": "ok", "ms": 0.9, "delay_s": 30},
    )
    job = JobEvaluator(inner, GpuGate())
    result = await run(llm, job, rounds=1, candidates=2, time_budget_s=1.0)  # type: ignore[arg-type]
    assert not result.cancelled, result.message
    assert result.accepted, result.message


SAXPY = "__global__ void saxpy(float a, float* x) { x[0] *= a; }\n"


def _server_with(uri: str, text: str, monkeypatch: pytest.MonkeyPatch) -> CudaLlmServer:
    server = CudaLlmServer()
    server.state(uri)
    monkeypatch.setattr(server, "document", lambda u: TextDocument(u, text, version=3))
    return server


async def test_concurrent_kernel_requests_share_one_parse_off_the_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from cuda_llm_lsp.lsp import state as server_module

    calls: list[str] = []
    loop_thread = threading.get_ident()

    def counting(text: str) -> list[Kernel]:
        assert threading.get_ident() != loop_thread  # never on the event loop
        calls.append(text)
        time.sleep(0.05)
        return find_kernels(text)

    monkeypatch.setattr(server_module, "find_kernels", counting)
    server = _server_with("file:///a.cu", SAXPY, monkeypatch)
    first, second = await asyncio.gather(
        server.kernels("file:///a.cu"), server.kernels("file:///a.cu")
    )
    assert [k.name for k in first[1]] == [k.name for k in second[1]] == ["saxpy"]
    assert len(calls) == 1


async def test_a_document_closed_during_its_parse_leaves_nothing_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from cuda_llm_lsp.lsp import state as server_module

    go = threading.Event()

    def slow(text: str) -> list[Kernel]:
        go.wait(5)
        return find_kernels(text)

    monkeypatch.setattr(server_module, "find_kernels", slow)
    server = _server_with("file:///a.cu", SAXPY, monkeypatch)
    request = asyncio.ensure_future(server.kernels("file:///a.cu"))
    await asyncio.sleep(0.05)
    server.forget("file:///a.cu")
    go.set()
    await request
    assert "file:///a.cu" not in server._kernels


class _NoProgress:
    def report(self, message: str, percentage: int | None = None) -> None:
        pass


async def test_late_events_of_a_cancelled_optimize_leave_its_report_alone() -> None:
    from cuda_llm_lsp.fsr.types import RoundStarted
    from cuda_llm_lsp.lsp.jobs import Job
    from cuda_llm_lsp.lsp.render import JobRenderer
    from cuda_llm_lsp.lsp.results import KernelReport

    server = CudaLlmServer()
    uri = "file:///a.cu"
    job = Job(uri, "saxpy", "optimize", token="t")
    tracker = JobRenderer(server, job, _NoProgress(), "original", 4)  # type: ignore[arg-type]
    tracker(RoundStarted(1, 2))
    assert "round 1/2" in server.reports[(uri, "saxpy")].info  # a live run reports
    job.cancel()
    cancelled = KernelReport("saxpy", "original", "saxpy: baseline 1.000 ms · cancelled", None)
    server.reports[(uri, "saxpy")] = cancelled
    tracker(RoundStarted(2, 2))  # the engine's thread, still winding down
    assert server.reports[(uri, "saxpy")] is cancelled


async def test_an_analysis_outdated_by_a_settings_change_is_not_published(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from types import SimpleNamespace

    uri = "file:///a.cu"
    published: list[Any] = []

    def analyzer(text: str, path: Any, settings: Any) -> Any:
        state.generation += 1  # the settings changed while NVRTC compiled
        return SimpleNamespace(text=text, kernels=[], diagnostics=[])

    server = _server_with(uri, SAXPY, monkeypatch)
    server.analyzer = analyzer
    monkeypatch.setattr(server, "text_document_publish_diagnostics", published.append)
    state = server.state(uri)
    state.generation = 1
    await server._analyze_later(uri, 1, 0.0)
    assert state.analysis is None and published == []


SPECCED = """\
/* @cuda-llm
sizes.n = [1000]
grid = "cdiv(n, 256)"
block = 256
args.x = "float32[n]"
args.n = "n"
*/
__global__ void scale(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] *= 2.0f; }
"""


async def test_a_benchmark_is_built_for_the_judging_gpus_architecture(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As every other path (FSR, tune, suite, `cuda-llm bench`): the kernel is compiled for the
    GPU that times it (`DeviceFacts.arch`), not for the configured or this machine's one."""
    from types import SimpleNamespace

    from cuda_llm_lsp.evaluate.candidate import CandidateRejected
    from cuda_llm_lsp.lsp import benchmark_job
    from cuda_llm_lsp.lsp.jobs import Job, JobError

    archs: list[str | None] = []

    def build(*args: Any, arch: str | None = None, **kwargs: Any) -> CandidateRejected:
        archs.append(arch)
        return CandidateRejected("compile_error", "not built in this test")

    class Gpu:
        def device_facts(self) -> Any:
            return SimpleNamespace(arch="sm_86")

        def cancel(self) -> None:
            pass

        def close(self) -> None:
            pass

    from cuda_llm_lsp.engine import actions

    monkeypatch.setattr(actions, "build_binary", build)
    server = _server_with("file:///a.cu", SPECCED, monkeypatch)
    server.evaluator_factory = lambda settings: Gpu()  # type: ignore[assignment,return-value]
    job = Job("file:///a.cu", "scale", "benchmark", "token")
    progress = SimpleNamespace(report=lambda *args: None)
    with pytest.raises(JobError, match="does not build"):
        await benchmark_job.run(server, job, progress)  # type: ignore[arg-type]
    assert archs[-1] == "sm_86"  # built (again, after a first guess) for the judging GPU


async def test_a_settings_change_never_closes_the_evaluator_a_job_is_taking() -> None:
    """A didChangeConfiguration while a job holds the evaluator retires it: the next job gets
    a new one, and the old one is closed when the job's lease returns, not before."""

    class Gpu:
        def __init__(self) -> None:
            self.closed = threading.Event()

        def cancel(self) -> None:
            pass

        def close(self) -> None:
            self.closed.set()

    made: list[Gpu] = []

    def factory(settings: object) -> Gpu:
        made.append(Gpu())
        return made[-1]

    server = CudaLlmServer(evaluator_factory=factory)  # type: ignore[arg-type]
    lease = await asyncio.to_thread(server.gpus.lease)
    server.retire_evaluator()
    later = await asyncio.to_thread(server.gpus.lease)
    assert len(made) == 2, "the next job got the retired evaluator"
    assert not await asyncio.to_thread(made[0].closed.wait, 0.3), "closed under the job"
    lease.release()  # the job ends: the retired evaluator is closed now
    assert await asyncio.to_thread(made[0].closed.wait, 5)
    later.release()
    assert not made[1].closed.is_set()  # the current one stays for the next job


async def test_the_optimize_winner_is_placed_in_the_file_off_the_event_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`winner_text` parses the whole file and reads its names: a big file held the loop."""
    from types import SimpleNamespace

    from cuda_llm_lsp.config import Settings
    from cuda_llm_lsp.engine import GpuService, actions, optimize_in_file
    from cuda_llm_lsp.fsr.apply import NotApplicable
    from cuda_llm_lsp.fsr.types import OptimizeResult, config_from_settings

    result = OptimizeResult(
        kernel="saxpy",
        baseline_ms=1.0,
        best_ms=0.5,
        speedup=2.0,
        accepted=True,
        candidates=(),
        best_source=SAXPY,
        message="2x",
    )
    threads: list[int] = []

    async def engine(*args: Any, **kwargs: Any) -> OptimizeResult:
        return result

    def winner(*args: Any) -> Any:
        threads.append(threading.get_ident())
        raise NotApplicable("not in this test")

    class Gpu:
        def device_facts(self) -> Any:
            return SimpleNamespace(arch="sm_90")

        def cancel(self) -> None:
            pass

        def close(self) -> None:
            pass

    monkeypatch.setattr(actions, "run_fsr", engine)
    monkeypatch.setattr(actions, "winner_text", winner)
    gpus = GpuService(Gpu)  # type: ignore[arg-type]
    settings = Settings()
    from tests.support.fsr_fakes import SAXPY_FILE  # a kernel with a spec: the gate passes it

    outcome = await optimize_in_file(
        SAXPY_FILE, None, "saxpy", settings, config_from_settings(settings), gpus
    )
    assert outcome.not_applicable == "not in this test"  # type: ignore[union-attr]
    assert threads and threads[0] != threading.get_ident()
