"""`cudaLlm.optimize`: starts the Optimize job, the FSR loop on one kernel of an open document,
in the background.

Runs `fsr.loop.optimize` on the document's text as it is when the job starts, reports each
candidate through work-done progress and the kernel's result diagnostics, and on success keeps
the best kernel as a suggestion (never applied without the user's Accept).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Coroutine
from functools import partial
from typing import Any, TypeVar

from lsprotocol import types

from cuda_llm_lsp.engine import (
    LlmFactory,
    demo_config,
    demo_for,
    history_for_run,
    make_llm,
    run_fsr,
)
from cuda_llm_lsp.fsr.apply import (
    AppliedWinner,
    NotApplicable,
    Region,
    changed_region,
    winner_text,
)
from cuda_llm_lsp.fsr.types import (
    CandidateEvaluated,
    CandidateStage,
    OptimizeRequest,
    OptimizeResult,
    ProgressEvent,
    RoundStarted,
    RunStarted,
    config_from_settings,
)
from cuda_llm_lsp.fsr.winner import timing_ms
from cuda_llm_lsp.lsp import commands, results
from cuda_llm_lsp.lsp.jobs import Job, JobProgress
from cuda_llm_lsp.lsp.results import Suggestion
from cuda_llm_lsp.lsp.state import CudaLlmServer
from cuda_llm_lsp.source.spec.launch import LaunchConfig
from cuda_llm_lsp.source.text import offset_of

log = logging.getLogger(__name__)
T = TypeVar("T")


def register(server: CudaLlmServer) -> None:
    commands.job_command(server, commands.OPTIMIZE, start)


def start(server: CudaLlmServer, uri: str, kernel: str) -> Job | None:
    return server.jobs.start(uri, kernel, "optimize", f"Optimizing {kernel}", partial(run, server))


def _cases(result: Any) -> tuple[int, int]:
    return (result.cases_passed, len(result.cases)) if result is not None else (0, 0)


def _role_step(event: CandidateStage, strategy: str) -> str | None:
    """The step a request starts, by its role: "round 2: planning", "coding plan 3",
    "repairing 1.3 (attempt 2)"; None for an FSR coder (the round's report says it)."""
    if event.role == "planner":
        return f"round {event.round}: planning"
    if event.role == "debugger":
        return f"repairing {event.round}.{event.index} (attempt {event.attempt})"
    return f"coding plan {event.index}" if strategy == "plan" else None


class _Tracker:
    """Turns the loop's progress events into progress reports and the kernel's diagnostics."""

    def __init__(
        self,
        server: CudaLlmServer,
        job: Job,
        progress: JobProgress,
        original: str,
        total: int,
        strategy: str = "fsr",
    ) -> None:
        self.server, self.job, self.progress, self.original = server, job, progress, original
        self.total = max(total, 1)
        self.strategy = strategy
        self.outcomes: list[Any] = []
        self.baseline: Any = None
        self.best: Any = None
        self.round = 0
        self.rounds = 0

    def __call__(self, event: ProgressEvent) -> None:
        if self.job.cancelled:
            # The engine's thread winds down on its own: its late events must not overwrite
            # the "cancelled" report, nor the report of a newer run on the same kernel.
            return
        try:
            if isinstance(event, RunStarted):
                self.baseline = event.baseline
                self.rounds = event.rounds
                self.total = max(event.rounds * event.candidates, 1)
                ms = self._baseline_ms()
                launch = f"; {event.launch}" if event.launch_fixed else ""
                self.progress.report(f"baseline {results.format_ms(ms)}{launch}", 0)
                self._publish("running")
            elif isinstance(event, RoundStarted):
                self.round, self.rounds = event.round, event.rounds
                self.progress.report(f"round {event.round}/{event.rounds}")
                self._publish(f"round {event.round}/{event.rounds}")
            elif isinstance(event, CandidateStage) and event.stage == "tuning":
                if event.done == 0:
                    self.progress.report(f"tuning candidate {event.round}.{event.index} "
                                         f"({event.configurations} configurations)")  # fmt: skip
                else:
                    self.progress.report(f"tuning candidate {event.round}.{event.index}: "
                                         f"{event.done}/{event.configurations}")  # fmt: skip
            elif isinstance(event, CandidateStage) and event.stage == "requested":
                said = _role_step(event, self.strategy)
                if said:
                    self.progress.report(said)
            elif isinstance(event, CandidateEvaluated):
                self.outcomes.append(event.outcome)
                self.best = event.best
                o = event.outcome
                said = f"candidate {o.round}.{o.index}: {results.status_text(o.status)}"
                if o.ms is not None:
                    said += f" {results.format_ms(o.ms)}"
                if o.gpu:  # several GPUs: which one judged it
                    said += f" on {o.gpu.split(' ')[0]}"
                if self.best is not None and self.best.speedup:
                    said += f" · best {self.best.speedup:.2f}×"
                self.progress.report(said, len(self.outcomes) * 100 // self.total)
                self._publish(f"round {o.round}/{self.rounds or '?'}")
        except Exception:
            log.exception("progress event handling failed")

    def _baseline_ms(self) -> float | None:
        return timing_ms(self.baseline) if self.baseline is not None else None

    def _publish(self, state: str) -> None:
        passed, total = _cases(self.baseline)
        best = self.best
        info = results.optimize_summary(
            self.job.kernel,
            baseline_ms=self._baseline_ms(),
            best_ms=best.ms if best else None,
            speedup=best.speedup if best else None,
            cases_passed=total if best else passed,
            cases_total=total,
            fraction_of_peak=getattr(self.baseline, "fraction_of_peak", None),
            state=state,
        )
        report = results.KernelReport(
            self.job.kernel,
            self.original,
            info,
            results.failure_hint(self.outcomes),
            label=self.job.label,
        )
        self.server.set_report(self.job.uri, report)

    def cancelled(self) -> None:
        if self.baseline is not None:
            self._publish("cancelled")

    def finish(self, result: OptimizeResult) -> None:
        if result.error and result.baseline_ms is None:
            return
        best = result.best_result
        baseline_passed = _cases(self.baseline)[0]
        fraction = getattr(best, "fraction_of_peak", None) if best is not None else None
        if fraction is None and self.baseline is not None:
            fraction = self.baseline.fraction_of_peak
        state = (
            "cancelled" if result.cancelled else ("done" if result.accepted else "done, no gain")
        )
        info = results.optimize_summary(
            self.job.kernel,
            baseline_ms=result.baseline_ms,
            best_ms=result.best_ms,
            speedup=result.speedup,
            # No better kernel: the figures are the baseline's, so are its cases.
            cases_passed=result.cases_passed if result.best_ms is not None else baseline_passed,
            cases_total=result.cases_total or _cases(self.baseline)[1],
            fraction_of_peak=fraction,
            state=state,
        )
        hint = results.failure_hint(result.candidates or tuple(self.outcomes))
        self.server.set_report(
            self.job.uri,
            results.KernelReport(self.job.kernel, self.original, info, hint, label=self.job.label),
        )


async def run_in_own_loop(
    engine: Callable[[asyncio.Event], Coroutine[Any, Any, T]], job: Job, name: str
) -> T:
    """Run `engine` on its own event loop in a thread, so nothing it does (imports, SDK setup,
    a slow callback) can stall the language server; the job's cancel sets its `cancel` event."""
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[T] = loop.create_future()
    box: dict[str, Any] = {}

    def deliver(ok: bool, value: Any) -> None:
        if answer.done():
            return
        if ok:
            answer.set_result(value)
        else:
            answer.set_exception(value)

    async def main() -> T:
        box["loop"], box["cancel"] = asyncio.get_running_loop(), asyncio.Event()
        if job.cancelled:
            box["cancel"].set()
        return await engine(box["cancel"])

    def thread() -> None:
        try:
            value = asyncio.run(main())
        except BaseException as exc:
            loop.call_soon_threadsafe(deliver, False, exc)
        else:
            loop.call_soon_threadsafe(deliver, True, value)

    def cancel() -> None:  # before the engine's loop exists, `main` sees `job.cancelled`
        engine_loop = box.get("loop")
        if engine_loop is not None and not engine_loop.is_closed():
            engine_loop.call_soon_threadsafe(box["cancel"].set)

    job.cancel_hooks.append(cancel)
    threading.Thread(target=thread, name=name, daemon=True).start()
    return await answer


async def run(server: CudaLlmServer, job: Job, progress: JobProgress) -> str:
    text, kernel = await server.job_kernel(job)
    original = kernel.span.slice(text)
    evaluator = await server.job_evaluator(job, "optimize")  # cancel stops the GPU work at once
    settings = server.settings
    llm_factory: LlmFactory
    if job.demo:  # the shipped recording answers for the model: no endpoint, no key, no history
        config = demo_config(demo_for(job.kernel), settings)
        llm_factory, history = make_llm, None
    else:
        config = config_from_settings(settings)
        llm_factory = server.llm_factory
        history = await history_for_run(lambda exc: log.warning("history unavailable: %s", exc))
    tracker = _Tracker(
        server, job, progress, original, config.rounds * config.candidates, config.strategy
    )
    request = OptimizeRequest(
        file_text=text, kernel=job.kernel, path=server.path_of(job.uri), settings=settings
    )
    loop = asyncio.get_running_loop()

    def on_event(event: ProgressEvent) -> None:  # called on the engine's loop
        if not job.cancelled:  # the tracker checks again when the event reaches it
            loop.call_soon_threadsafe(tracker, event)

    async def engine(cancel: asyncio.Event) -> OptimizeResult:
        return await run_fsr(
            request,
            config,
            evaluator,
            llm_factory=llm_factory,
            on_event=on_event,
            cancel=cancel,
            history=history,
        )

    try:
        result = await run_in_own_loop(engine, job, f"cuda-llm-optimize-{job.kernel}")
    except asyncio.CancelledError:
        tracker.cancelled()
        raise
    tracker.finish(result)
    if result.cancelled:
        return result.message or "cancelled"
    if result.accepted and result.best_source:
        # one edit from the spec (helpers go above it) to the last launch site it rewrites
        start, end = offset_of(text, kernel.span.start), offset_of(text, kernel.span.end)
        try:  # parses and compares the whole file: off the event loop
            applied, region = await asyncio.to_thread(
                _applied, text, job.kernel, result.best_source, result.best_launch, (start, end)
            )
        except NotApplicable as exc:
            server.message(job.say(f"cuda-llm: {job.kernel}: {result.message}; the winner "
                                   f"cannot be applied: {exc}"),
                           types.MessageType.Warning)  # fmt: skip
            return f"not applicable: {exc}"
        suggestion = Suggestion(
            uri=job.uri,
            kernel=job.kernel,
            original=text[region.start : region.end],
            suggested=region.text,
            lead=start - region.start,
            trail=region.end - end,
            notes=applied.notes,
            launch=result.best_launch.describe() if result.best_launch else None,
            speedup=result.speedup,
            baseline_ms=result.baseline_ms,
            best_ms=result.best_ms,
            cases_passed=result.cases_passed,
            cases_total=result.cases_total,
            message=result.message + _launch_note(result, applied.notes),
            run_id=result.run_id,
            label=job.label,
        )
        server.suggestions[(job.uri, job.kernel)] = suggestion
        if server.wants_suggestion_notification():
            # The client shows its diff with Accept / Reject: sent before the progress ends.
            await server.notify_suggestion(suggestion)
        else:
            server.message(
                job.say(
                    f"cuda-llm: {job.kernel}: {suggestion.figures}. Use the code action "
                    f"'Accept optimized {job.kernel}' to apply it, 'Show suggested "
                    f"{job.kernel}' to review it, or 'Reject suggestion for {job.kernel}'."
                )
            )
        return f"{suggestion.figures}: suggestion ready"
    kind = types.MessageType.Warning if result.error else types.MessageType.Info
    server.message(job.say(f"cuda-llm: {job.kernel}: {result.message}"), kind)
    return result.message


def _applied(
    text: str, kernel: str, source: str, launch: LaunchConfig | None, keep: tuple[int, int]
) -> tuple[AppliedWinner, Region]:
    """The winner in the file (`winner_text`, raises `NotApplicable`) and the one edit from
    `text` to it that covers the kernel's range `keep`."""
    applied = winner_text(text, kernel, source, launch)
    return applied, changed_region(text, applied.text, keep)


def _launch_note(result: OptimizeResult, notes: tuple[str, ...]) -> str:
    """What the suggestion says of the winner's own launch: its configuration, the spec and
    launch sites changed with it, and the sites to change by hand."""
    if result.best_launch is None:
        return ""
    note = f"; its own launch {result.best_launch.describe()} (spec and launch sites updated)"
    if notes:
        note += "; change by hand: " + "; ".join(notes)
    return note
