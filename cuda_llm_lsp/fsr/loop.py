"""The FSR loop: rounds of LLM-proposed candidates, judged by the evaluator, fed back.

`prepare` (module `baseline`) measures the original once; then, per round, N requests go out at
once; each candidate is built and evaluated as soon as its reply arrives (so the GPU works while
the model writes), evaluator calls one at a time per GPU (module `gpu`: with several GPUs the
candidates of a round are judged in parallel, each on one GPU against the baseline there). The best
correct candidates and the failures' feedback shape the next round. The run stops after
`rounds`, after `patience` rounds without gain, on a time or token budget, on a fatal endpoint
error, or on cancel (which stops requests and GPU work at once). The winner is re-validated on
new seeds (and by the sanitizer where available) and accepted only if it beats the baseline
beyond measurement noise (module `winner`).

The loop knows nothing of the editor or the terminal: it takes plain data, reports progress
events through a callback and returns an `OptimizeResult`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import time
from collections.abc import Callable
from typing import Any, Literal, Protocol

from cuda_llm_lsp.cancel import CancelToken
from cuda_llm_lsp.compile.types import Resources
from cuda_llm_lsp.evaluate.types import (
    STATUSES,
    BaselineFailed,
    EvalResult,
    EvaluationCancelled,
    Evaluator,
    KernelBinary,
    NoGpuError,
    Status,
    no_gpu_message,
)
from cuda_llm_lsp.fsr import prompts, tuning
from cuda_llm_lsp.fsr.baseline import Baseline, Unprepared, prepare
from cuda_llm_lsp.fsr.client import LlmClient, LlmReply, Prompt
from cuda_llm_lsp.fsr.gpu import GpuLane, Seeds
from cuda_llm_lsp.fsr.launch import (
    LaunchRule,
    candidate_launch,
    launch_blocks,
    launch_rule,
    placed_launch_block,
)
from cuda_llm_lsp.fsr.toolchain import (
    DefaultToolchain,
    Toolchain,
    build_candidate,
    clean_candidate,
)
from cuda_llm_lsp.fsr.types import (
    CandidateEvaluated,
    CandidateOutcome,
    CandidateStage,
    OptimizeConfig,
    OptimizeRequest,
    OptimizeResult,
    ProgressEvent,
    RoundStarted,
    RunFinished,
    RunStarted,
    reply_hash,
)
from cuda_llm_lsp.fsr.winner import Slot, Winner, choose_winner, timing_ms, top_correct
from cuda_llm_lsp.source.device_only import DeviceOnly, device_only, hidden_refusal
from cuda_llm_lsp.source.spec.launch import LaunchConfig
from cuda_llm_lsp.source.untrusted import neutralize
from cuda_llm_lsp.tune.candidate import with_launch_block
from cuda_llm_lsp.tune.search import TuneRequest

log = logging.getLogger(__name__)

ROUND_GAIN = 0.01  # a round "gains" when the best speedup grows by more than this
# what the debugger may repair (an endpoint's failure or a slower kernel is not)
REPAIRABLE: frozenset[str] = frozenset(STATUSES) - {"ok", "slower", "llm_error", "sanitizer"}
NO_PLAN = prompts.Plan("(no plan)")
Role = Literal["coder", "planner", "debugger"]


class History(Protocol):
    """Where runs are recorded (`fsr.history.RunHistory`); called from a thread."""

    def start_run(self, *, file: str, kernel: str, model: str, seed: int) -> int: ...

    def add_candidate(self, run_id: int, outcome: CandidateOutcome) -> None: ...

    def finish_run(self, run_id: int, result: OptimizeResult) -> None: ...


class _OptimizeRun:
    """One call of `optimize`: its inputs, its GPU lane, and what its rounds found so far.

    What is measured once is in the frozen `Baseline` that `prepare` returns; the round methods
    take it as an argument, so no attribute here waits to be filled in."""

    def __init__(
        self,
        request: OptimizeRequest,
        config: OptimizeConfig,
        evaluator: Evaluator,
        llm: LlmClient,
        toolchain: Toolchain,
        history: History | None,
        on_event: Callable[[ProgressEvent], None] | None,
        cancel: CancelToken | None,
    ) -> None:
        self.request = request
        self.config = config
        self.llm = llm
        self.toolchain = toolchain
        self.history = history
        self.on_event = on_event
        self.seeds = Seeds(request.seed)
        self.lane = GpuLane(evaluator)  # evaluator calls: one at a time per GPU
        self.started = time.monotonic()
        self.run_id: int | None = None
        self.benchmark: EvalResult | None = None  # the original's, once measured
        self.builder: str | None = None  # which compiler built the original (and candidates)
        self.outcomes: list[CandidateOutcome] = []
        self.binaries: dict[Slot, KernelBinary] = {}  # correct candidates, for re-validation
        self.resources: dict[Slot, Resources | None] = {}  # every built one's, for prompts
        self.tokens = 0
        self.stop_reason: str | None = None
        self.fatal = False  # the stop reason is an endpoint error that ends the run
        self.pending: set[asyncio.Task[Any]] = set()  # this round's candidates in flight
        self.profile_text: str | None = None
        # the top profiled lines ([profile]): "original" (round 1's prompt), "best" (later ones)
        self.profile_lines: dict[str, Any] = {}
        self.plans: dict[int, list[prompts.Plan]] = {}  # plan strategy: the round's plans
        self.tried: list[prompts.TriedPlan] = []  # plan strategy: plans and their outcomes
        # the run's own stop of its GPU extras (a candidate's tuning, an ncu profile): cancelled
        # with the caller's token, or alone when the run drops its pending candidates
        self.cancel = cancel.child() if cancel is not None else CancelToken()
        self.launch_rule: LaunchRule | None = None  # the run's, once the baseline is prepared

    # -- plumbing ---------------------------------------------------------------------------

    def emit(self, event: ProgressEvent) -> None:
        if self.on_event is None:
            return
        try:
            self.on_event(event)
        except Exception:
            log.exception("progress callback failed")

    async def recorded(self, method: str, *args: Any, **kwargs: Any) -> Any:
        if self.history is None:
            return None
        try:
            return await asyncio.to_thread(getattr(self.history, method), *args, **kwargs)
        except Exception:
            log.exception("history: %s failed", method)
            return None

    def best(self) -> CandidateOutcome | None:
        ranked = top_correct(self.outcomes, 1)
        return ranked[0] if ranked else None

    def over_budget(self) -> str | None:
        budget = self.config.time_budget_s
        if budget is not None and time.monotonic() - self.started >= budget:
            return f"time budget of {budget:g} s reached"
        if self.config.token_budget is not None and self.tokens >= self.config.token_budget:
            return f"token budget of {self.config.token_budget} reached ({self.tokens} used)"
        return None

    def result(self, **fields: Any) -> OptimizeResult:
        base: dict[str, Any] = {
            "kernel": self.request.kernel,
            "baseline_ms": timing_ms(self.benchmark) if self.benchmark else None,
            "best_ms": None,
            "speedup": None,
            "accepted": False,
            "candidates": tuple(sorted(self.outcomes, key=lambda o: (o.round, o.index))),
            "best_source": None,
            "message": "",
            "run_id": self.run_id,
            "launch_fixed": self.launch_rule.fixed_reason if self.launch_rule else None,
            "seed": self.seeds.seed,
            "tokens": self.tokens,
            "baseline_result": self.benchmark,
            "profile_lines": dict(self.profile_lines) or None,
            "builder": self.builder,
        }
        base.update(fields)
        return OptimizeResult(**base)

    def error(self, message: str) -> OptimizeResult:
        return self.result(message=message, error=message)

    # -- one candidate ----------------------------------------------------------------------

    def prompt(self, baseline: Baseline, round_: int, index: int) -> Prompt:
        best = [
            prompts.Attempt(o, self.resources.get((o.round, o.index)))
            for o in top_correct(self.outcomes, self.config.top_k)
        ]
        failures = [
            prompts.Attempt(o, self.resources.get((o.round, o.index)))
            for o in self.outcomes
            if o.status != "ok"
        ]
        messages = prompts.build_messages(
            baseline.task,
            round_=round_,
            index=index,
            candidates=self.config.candidates,
            best=best,
            failures=failures,
            profile=self.profile_text,
            plan=self.plan_for(slot=(round_, index)),
        )
        return Prompt(kernel=self.request.kernel, round=round_, index=index, messages=messages)

    def plan_for(self, slot: Slot) -> prompts.Plan | None:
        plans = self.plans.get(slot[0], [])
        return plans[slot[1] - 1] if 0 < slot[1] <= len(plans) else None

    async def candidate(self, baseline: Baseline, slot: Slot) -> CandidateOutcome:
        """Request, build and evaluate one candidate; a failing one goes to the debugger up to
        `repairs` times (each repair a fresh request with its own code and the judge's finding)
        before it counts as failed. Both strategies repair this way: FSR's repair step is the
        plan strategy's debugger without a plan."""
        outcome = await self.attempt(baseline, slot, self.prompt(baseline, *slot))
        tokens = outcome.tokens
        for attempt in range(1, max(0, self.config.repairs) + 1):
            if outcome.status not in REPAIRABLE or self.stop_reason or self.over_budget():
                break
            messages = prompts.repair_messages(
                baseline.task,
                outcome,
                attempt=attempt,
                attempts=self.config.repairs,
                plan=self.plan_for(slot),
            )
            repair = Prompt(
                self.request.kernel, slot[0], slot[1], messages, role="debugger", attempt=attempt
            )
            fixed = await self.attempt(baseline, slot, repair, role="debugger")
            tokens += fixed.tokens
            if fixed.status == "llm_error":
                break  # the debugger had nothing to offer: the last judged failure stands
            outcome = dataclasses.replace(
                fixed, message=f"after {attempt} repair(s): {fixed.message}"
            )
        if self.config.strategy == "plan":
            self.tried.append(prompts.TriedPlan(slot[0], self.plan_for(slot) or NO_PLAN, outcome))
        return dataclasses.replace(outcome, tokens=tokens)

    async def attempt(
        self, baseline: Baseline, slot: Slot, prompt: Prompt, role: Role = "coder"
    ) -> CandidateOutcome:
        """One request for `slot`, its kernel built and evaluated; the outcome names the reply
        it judged by the hash of the reply's code (`reply_hash`).

        Long because it is one candidate's life in the order it happens (request, reply,
        repairs, build, evaluation, tuning); its early returns are the candidate's statuses."""
        round_, index = slot
        stage = functools.partial(CandidateStage, round_, index, role=role, attempt=prompt.attempt)
        self.emit(stage("requested"))
        reply = await self.llm.complete(prompt)
        self.tokens += reply.tokens
        if reply.error is not None or reply.code is None:
            message = reply.error or "no kernel in the reply"
            if reply.fatal:
                self.stop_reason = message
                self.fatal = True
            return self.outcome(slot, "llm_error", message, source="", tokens=reply.tokens)
        self.emit(stage("generated"))
        outcome = await self.judge_reply(baseline, slot, reply, stage)
        return dataclasses.replace(outcome, reply_hash=reply_hash(reply.code))

    async def judge_reply(
        self,
        baseline: Baseline,
        slot: Slot,
        reply: LlmReply,
        stage: Callable[..., CandidateStage],
    ) -> CandidateOutcome:
        """A reply's kernel (`reply.code`) built and evaluated.

        Long because it is one reply's path in the order it happens (extract, clean, build,
        evaluate, tune); its early returns are the candidate's statuses."""
        assert reply.code is not None
        cleaned = clean_candidate(reply.code, self.request.file_text)
        # device code only, nothing hidden: host items the kernel does not need dropped,
        # `__host__` removed; tricks and hidden text refused, and the model hears why
        prepared = device_only(cleaned, " of the candidate")
        hidden = hidden_refusal(reply.code)  # also in what cleaning removed
        refused = hidden or (prepared if isinstance(prepared, str) else None)
        if refused is not None:
            return self.outcome(
                slot, "compile_error", refused, source=neutralize(cleaned), tokens=reply.tokens
            )
        assert isinstance(prepared, DeviceOnly)
        outcome = await self.judge_source(baseline, slot, reply, prepared.text, stage)
        return dataclasses.replace(outcome, changed=neutralize(prepared.note()))

    async def judge_source(
        self,
        baseline: Baseline,
        slot: Slot,
        reply: LlmReply,
        source: str,
        stage: Callable[..., CandidateStage],
    ) -> CandidateOutcome:
        """A device-only candidate (`source`, from `reply`) built, evaluated and tuned.

        Long because it is one candidate's judgement in order (its launch block, the build,
        the evaluation, tuning when it won), each stage ending in the outcome it reached."""
        assert reply.code is not None
        round_, index = slot
        launch = None  # its own launch block, read from the reply before it was cleaned
        tune: TuneRequest | None = None  # its block declares tunables: tuned once correct
        code, misplaced = placed_launch_block(reply.code, self.request.kernel)
        if misplaced is not None:
            return self.outcome(slot, "bad_launch", misplaced, source=source, tokens=reply.tokens)
        if not baseline.task.launch_free and self.launch_rule is not None and launch_blocks(code):
            # never judged under a launch it was not written for
            message = self.launch_rule.fixed_launch_message()
            return self.outcome(slot, "bad_launch", message, source=source, tokens=reply.tokens)
        if baseline.task.launch_free:
            # the block put back on the cleaned text: where tuning writes its `#define`s
            text = with_launch_block(code, source, self.request.kernel)
            parsed = candidate_launch(text, self.request.kernel, baseline.spec) if text else None
            if isinstance(parsed, str):
                return self.outcome(slot, "bad_launch", parsed, source=source, tokens=reply.tokens)
            launch = parsed
            if launch is not None and text is not None:
                tune = tuning.own_tuning(launch, text, self.request, baseline)
        try:  # with tunables: built, as judged, with its default configuration's -D
            if tune is None:
                binary = await build_candidate(
                    self.toolchain,
                    self.request,
                    source,
                    spec=baseline.spec,
                    arch=baseline.arch,
                )
            else:
                binary = await tuning.build_default(self.toolchain, tune, baseline.arch)
        except Exception as exc:
            log.exception("building candidate %d.%d failed", round_, index)
            message = f"the build failed: {exc}"
            return self.outcome(slot, "compile_error", message, source=source, tokens=reply.tokens)
        if not isinstance(binary, KernelBinary):
            return self.outcome(
                slot, binary.status, binary.message, source=source, tokens=reply.tokens
            )
        self.resources[slot] = binary.resources
        self.emit(stage("evaluating"))

        def on_gpu(gpu: str) -> None:  # several GPUs: which one judges this candidate
            self.emit(stage("evaluating", gpu=gpu))

        result = await self.lane.evaluate(
            baseline.binary,
            binary,
            baseline.spec,
            spec_dir=baseline.spec_dir,
            seed=self.seeds.next(),
            on_gpu=on_gpu,
            candidate_spec=launch.applied_to(baseline.spec) if launch else None,
        )
        status: Status = result.status
        ms = result.candidate.median_ms if result.candidate else None
        speedup, message = result.speedup, result.message
        tuned: tuning.TunedCandidate | None = None
        if status == "ok" and tune is not None and launch is not None:
            tuned = await self.tune(baseline, tune, launch, source, stage)
            if tuned.status != "ok" or tuned.binary is None:
                return self.outcome(
                    slot,
                    tuned.status,
                    tuned.message,
                    source=source,
                    tokens=reply.tokens,
                    gpu=result.gpu,
                    launch=launch,
                    tuning=tuned.tuning,
                )
            source, launch, binary = tuned.source, tuned.launch, tuned.binary
            self.resources[slot] = binary.resources
            if tuned.ms is not None:  # tuned: it ranks with its best configuration's figures
                ms, speedup, message = tuned.ms, tuned.speedup, tuned.message
        if status == "ok":
            self.binaries[slot] = binary
            if speedup is not None and speedup < 1.0:
                status = "slower"
        if status in ("ok", "slower") and not message:
            message = f"{speedup:.2f}x" if speedup is not None else "correct"
        return self.outcome(
            slot,
            status,
            message,
            source=source,
            tokens=reply.tokens,
            ms=ms,
            speedup=speedup,
            registers=binary.resources.registers if binary.resources else None,
            gpu=result.gpu,
            launch=launch,
            tuning=tuned.tuning if tuned else None,
        )

    async def tune(
        self,
        baseline: Baseline,
        tune: TuneRequest,
        launch: LaunchConfig,
        source: str,
        stage: Callable[..., CandidateStage],
    ) -> tuning.TunedCandidate:
        """Tune a correct candidate's tunables (module `tuning`), reporting each configuration
        as a "tuning" stage; with `tune_points` 0, or too little of the run's time left
        (`tuning.MIN_TUNE_S`), only its default is written in."""
        options = None
        if self.config.tune_points > 0:
            budget = self.config.time_budget_s
            left = None if budget is None else budget - (time.monotonic() - self.started)
            options = tuning.options_for(self.config, self.seeds.next(), left)

        def heard(done: int, planned: int) -> None:
            self.emit(stage("tuning", configurations=planned, done=done))

        on_planned, on_progress = tuning.progress_events(heard, asyncio.get_running_loop())
        return await tuning.tune_candidate(
            self.lane,
            self.toolchain,
            self.request,
            baseline,
            tune,
            launch,
            options,
            source=source,
            cancel=self.cancel,
            on_progress=on_progress,
            on_planned=on_planned,
        )

    def outcome(self, slot: Slot, status: Status, message: str, **fields: Any) -> CandidateOutcome:
        """A candidate's outcome; its message (compile logs quote the candidate, worker output
        its `printf`s) neutralized once, here, for every place that shows it."""
        return CandidateOutcome(
            round=slot[0],
            index=slot[1],
            status=status,
            ms=fields.pop("ms", None),
            message=neutralize(message),
            **fields,
        )

    # -- rounds -----------------------------------------------------------------------------

    async def make_plans(self, baseline: Baseline, round_: int) -> None:
        """The planner's K plans for this round (from the profile, the GPU and what earlier
        rounds' plans gave); plans from the FSR hints fill in what it did not give."""
        count = self.config.candidates
        best = [
            prompts.Attempt(o, self.resources.get((o.round, o.index)))
            for o in top_correct(self.outcomes, 1)
        ]
        messages = prompts.planner_messages(
            baseline.task,
            round_=round_,
            plans=count,
            tried=self.tried,
            best=best,
            profile=self.profile_text,
        )
        prompt = Prompt(self.request.kernel, round_, 0, messages, role="planner")
        self.emit(CandidateStage(round_, 0, "requested", "planner"))
        reply = await self.llm.complete(prompt)
        self.tokens += reply.tokens
        if reply.fatal:
            self.stop_reason = reply.error or "the planner's request failed"
            self.fatal = True
            return
        plans = prompts.parse_plans(reply.text, count)
        if len(plans) < count:
            log.info("planner gave %d of %d plans: %s", len(plans), count, reply.error or "")
        self.plans[round_] = plans + prompts.fallback_plans(count, len(plans))
        self.emit(CandidateStage(round_, 0, "generated", "planner"))

    async def one_round(self, baseline: Baseline, round_: int) -> None:
        if self.config.strategy == "plan":
            await self.make_plans(baseline, round_)
            self.stop_reason = self.stop_reason or self.over_budget()
            if self.stop_reason:
                return
        slots = [(round_, i) for i in range(1, self.config.candidates + 1)]
        tasks = {asyncio.ensure_future(self.candidate(baseline, slot)): slot for slot in slots}
        self.pending = set(tasks)
        try:
            while self.pending:
                timeout = None
                if self.config.time_budget_s is not None:
                    timeout = max(
                        0.0, self.config.time_budget_s - (time.monotonic() - self.started)
                    )
                done, self.pending = await asyncio.wait(
                    self.pending, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
                )
                for task in done:
                    slot = tasks[task]
                    try:
                        outcome = task.result()
                    except EvaluationCancelled:
                        continue
                    except (BaselineFailed, NoGpuError):
                        raise
                    except Exception as exc:  # a bug or an unexpected evaluator failure
                        log.exception("candidate %d.%d failed", *slot)
                        outcome = self.outcome(
                            slot, "launch_error", f"evaluation failed: {exc}", source=""
                        )
                    self.outcomes.append(outcome)
                    await self.recorded("add_candidate", self.run_id, outcome)
                    self.emit(CandidateEvaluated(outcome, self.best()))
                if self.stop_reason is None:
                    self.stop_reason = self.over_budget()
                if self.stop_reason is not None and self.pending:
                    await self.abort_pending()
        finally:
            if self.pending:
                await self.abort_pending()

    async def abort_pending(self) -> None:
        self.cancel.cancel()
        self.lane.stop()
        for task in self.pending:
            task.cancel()
        await asyncio.gather(*self.pending, return_exceptions=True)
        self.pending = set()

    async def rounds(self, baseline: Baseline) -> None:
        best_speedup = 1.0
        idle_rounds = 0
        for round_ in range(1, self.config.rounds + 1):
            self.stop_reason = self.stop_reason or self.over_budget()
            if self.stop_reason:
                return
            self.emit(RoundStarted(round_, self.config.rounds))
            before = self.best()
            await self.one_round(baseline, round_)
            if self.stop_reason:
                return
            best = self.best()
            if best is not None and (best.speedup or 0.0) > best_speedup * (1 + ROUND_GAIN):
                best_speedup = best.speedup or best_speedup
                idle_rounds = 0
            else:
                idle_rounds += 1
                if idle_rounds >= self.config.patience and round_ < self.config.rounds:
                    self.stop_reason = f"no gain in {idle_rounds} rounds"
                    return
            if best is not None and best is not before and round_ < self.config.rounds:
                await self.profile_best(baseline, best)

    async def profile_best(self, baseline: Baseline, best: CandidateOutcome) -> None:
        if not self.config.profile:
            return
        binary = self.binaries.get((best.round, best.index))
        if binary is None:
            return
        try:
            spec = best.launch.applied_to(baseline.spec) if best.launch else baseline.spec
            self.profile_text = await self.lane.call(
                self.toolchain.profile, binary, spec, baseline.spec_dir, self.cancel
            )
        except Exception as exc:  # the profile is an extra: never let it end the run
            log.info("profiling skipped: %s", exc)
            return
        self.keep_lines("best", self.profile_text, round_=best.round, index=best.index)

    def keep_lines(self, which: str, profile: str | None, **where: int) -> None:
        """The top lines a profile text carries (`fsr.profile.ProfileText`), for JSON/history."""
        lines = getattr(profile, "lines", None)
        if lines:
            self.profile_lines[which] = {**where, "lines": [dict(line) for line in lines]}

    # -- the end ----------------------------------------------------------------------------

    def accepted(self, baseline: Baseline, winner: Winner) -> OptimizeResult:
        outcome, check = winner.outcome, winner.check
        baseline_ms = check.baseline.median_ms if check.baseline else timing_ms(baseline.result)
        best_ms = check.candidate.median_ms if check.candidate else outcome.ms
        total = len(check.cases)
        cases = f", {check.cases_passed}/{total} cases" if total else ""
        extra = ", sanitizer clean" if winner.sanitized else ""
        message = (
            f"{check.speedup:.2f}x faster ({baseline_ms:.4f} ms -> {best_ms:.4f} ms){cases}, "
            f"re-validated on new inputs{extra} (round {outcome.round} candidate {outcome.index})"
        )
        return self.result(
            baseline_ms=baseline_ms,
            best_ms=best_ms,
            speedup=check.speedup,
            accepted=True,
            best_source=outcome.source,
            best_launch=outcome.launch,
            message=message,
            cases_passed=check.cases_passed,
            cases_total=total,
            best_result=check,
        )

    def no_improvement(self, reason: str) -> OptimizeResult:
        best = self.best()
        message = f"no improvement: {reason}" if reason else "no improvement"
        if self.stop_reason:
            message += f" (stopped early: {self.stop_reason})"
        return self.result(
            best_ms=best.ms if best else None,
            speedup=best.speedup if best else None,
            message=message,
        )

    async def execute(self) -> OptimizeResult:
        self.run_id = await self.recorded(
            "start_run",
            file=str(self.request.path or ""),
            kernel=self.request.kernel,
            model=self.config.model,
            seed=self.seeds.seed,
        )
        baseline = await prepare(
            self.request,
            self.toolchain,
            self.lane,
            self.seeds,
            profile=self.config.profile,
            cancel=self.cancel,
        )
        self.benchmark = baseline.result  # an unprepared run may still have measured it
        if isinstance(baseline, Unprepared):
            return self.error(baseline.message)
        self.builder = baseline.binary.builder
        self.keep_lines("original", baseline.task.baseline_profile)
        rule = launch_rule(self.config.launch, self.request.file_text, baseline.spec)
        self.launch_rule = rule
        task = dataclasses.replace(
            baseline.task, launch=rule.prompt_text(), launch_free=rule.allowed
        )
        baseline = dataclasses.replace(baseline, task=task)
        self.emit(
            RunStarted(
                self.request.kernel,
                baseline.result,
                self.config.rounds,
                self.config.candidates,
                launch=rule.notice(),
                launch_fixed=rule.fixed_reason,
            )
        )
        await self.rounds(baseline)
        if self.fatal and not top_correct(self.outcomes, 1):
            return self.error(f"LLM endpoint error: {self.stop_reason}")
        choice = await choose_winner(
            self.outcomes,
            self.binaries,
            baseline,
            top_k=self.config.top_k,
            sanitize=self.config.sanitize_winner,
            lane=self.lane,
            seeds=self.seeds,
            toolchain=self.toolchain,
        )
        if choice.winner is None:
            return self.no_improvement(choice.reason)
        return self.accepted(baseline, choice.winner)


async def optimize(
    request: OptimizeRequest,
    config: OptimizeConfig,
    evaluator: Evaluator,
    llm: LlmClient,
    *,
    on_event: Callable[[ProgressEvent], None] | None = None,
    cancel: CancelToken | None = None,
    history: History | None = None,
    toolchain: Toolchain | None = None,
) -> OptimizeResult:
    """Run the FSR loop on `request.kernel`; never raises for bad input, endpoint or GPU trouble.

    Cancelling `cancel` (or cancelling the task running this) stops LLM requests and the GPU work
    in flight at once; with `cancel` the result comes back with `cancelled=True`.
    """
    run = _OptimizeRun(
        request, config, evaluator, llm, toolchain or DefaultToolchain(), history, on_event, cancel
    )
    work = asyncio.ensure_future(run.execute())
    waiter = asyncio.ensure_future(cancel.wait()) if cancel is not None else None
    try:
        waiting: set[asyncio.Future[Any]] = {work} | ({waiter} if waiter else set())
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if work.done():
            try:
                result = work.result()
            except NoGpuError as exc:
                result = run.error(no_gpu_message(exc))
            except BaselineFailed as exc:
                result = run.error(f"the original {request.kernel} cannot be judged: {exc}")
            except EvaluationCancelled:
                result = run.result(message="cancelled", cancelled=True)
            except Exception as exc:
                log.exception("optimize failed")
                result = run.error(f"internal error: {type(exc).__name__}: {exc}")
        else:
            await _stop(run, work)
            done = len(run.outcomes)
            result = run.result(
                message=f"cancelled after {done} candidate(s); nothing was applied",
                cancelled=True,
                best_ms=None,
            )
    except asyncio.CancelledError:  # the caller cancelled us (Ctrl-C, a shutting-down server)
        await asyncio.shield(_stop(run, work))
        if run.run_id is not None:
            stopped = run.result(message="interrupted; nothing was applied", cancelled=True)
            await asyncio.shield(run.recorded("finish_run", run.run_id, stopped))
        raise
    finally:
        if waiter is not None:
            waiter.cancel()
        run.lane.close()
    await run.recorded("finish_run", run.run_id, result)
    run.emit(RunFinished(result))
    return result


async def _stop(run: _OptimizeRun, work: asyncio.Future[Any]) -> None:
    """Cancel GPU work in flight and the run's LLM requests, and wait until they have let go."""
    run.cancel.cancel()
    run.lane.stop()
    work.cancel()
    for task in list(run.pending):
        task.cancel()
    await asyncio.gather(work, *run.pending, return_exceptions=True)
