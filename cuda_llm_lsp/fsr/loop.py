"""The FSR loop: rounds of LLM-proposed candidates, judged by the evaluator, fed back.

Per round, N requests go out at once; each candidate is built and evaluated as soon as its reply
arrives (so the GPU works while the model writes), evaluator calls one at a time on one thread
(one GPU). The best correct candidates and the failures' feedback shape the next round. The run
stops after `rounds`, after `patience` rounds without gain, on a time or token budget, on a fatal
endpoint error, or on cancel (which stops requests and GPU work at once). The winner is
re-validated on new seeds (and by the sanitizer where available) and accepted only if it beats
the baseline beyond measurement noise.

The loop knows nothing of the editor or the terminal: it takes plain data, reports progress
events through a callback and returns an `OptimizeResult`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import functools
import logging
import random
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.evaluate import candidate
from cuda_llm_lsp.evaluate.candidate import CandidateRejected
from cuda_llm_lsp.evaluate.types import (
    BaselineFailed,
    EvalResult,
    EvaluationCancelled,
    Evaluator,
    KernelBinary,
    NoGpuError,
    Status,
)
from cuda_llm_lsp.fsr import prompts
from cuda_llm_lsp.fsr.llm import LlmClient, Prompt
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
)
from cuda_llm_lsp.source.kernels import Kernel
from cuda_llm_lsp.source.spec import SpecError, TestSpec

log = logging.getLogger(__name__)
T = TypeVar("T")

MIN_GAIN = 0.02  # a winner must be at least this much faster, or beyond the measured spread
ROUND_GAIN = 0.01  # a round "gains" when the best speedup grows by more than this


# ---------------------------------------------------------------------------------------------
# What the loop needs from its neighbours (faked in tests)


class Toolchain(Protocol):
    """Source model, spec, build, sanitizer and profiler: the loop's view of the other layers."""

    def find_kernel(self, text: str, name: str) -> Kernel | None: ...

    def parse_spec(self, kernel: Kernel, text: str) -> tuple[TestSpec | None, list[SpecError]]: ...

    def draft_spec(self, kernel: Kernel, text: str) -> str: ...

    def build(
        self,
        file_text: str,
        path: Path | None,
        kernel_name: str,
        settings: Settings,
        *,
        kernel_source: str | None = None,
        instance: str | None = None,
        arch: str | None = None,
    ) -> KernelBinary | CandidateRejected: ...  # arch: the evaluating device's

    def sanitize(
        self, binary: KernelBinary, spec: TestSpec, spec_dir: Path | None
    ) -> EvalResult | None: ...  # None: no sanitizer here

    def profile(
        self, binary: KernelBinary, spec: TestSpec, spec_dir: Path | None
    ) -> str | None: ...  # None: no profiler here


class DefaultToolchain:
    """The real layers: tree-sitter source model, spec parser, NVRTC build, sanitizer, ncu."""

    find_kernel = staticmethod(candidate.find_kernel)
    build = staticmethod(candidate.build_binary)

    def parse_spec(self, kernel: Kernel, text: str) -> tuple[TestSpec | None, list[SpecError]]:
        from cuda_llm_lsp.source.spec import parse_spec

        return parse_spec(kernel, text)

    def draft_spec(self, kernel: Kernel, text: str) -> str:
        from cuda_llm_lsp.source.draft import draft_spec

        return draft_spec(kernel, text)

    def sanitize(
        self, binary: KernelBinary, spec: TestSpec, spec_dir: Path | None
    ) -> EvalResult | None:
        try:
            from cuda_llm_lsp.evaluate.sanitizer import run_sanitizer, sanitizer_path
        except ImportError:
            return None
        if sanitizer_path() is None:
            return None
        return run_sanitizer(binary, spec, spec_dir)

    def profile(self, binary: KernelBinary, spec: TestSpec, spec_dir: Path | None) -> str | None:
        from cuda_llm_lsp.fsr.profile import profile_summary

        return profile_summary(binary, spec, spec_dir)


class History(Protocol):
    """Where runs are recorded (`fsr.history.RunHistory`); called from a thread."""

    def start_run(self, *, file: str, kernel: str, model: str, seed: int) -> int: ...

    def add_candidate(self, run_id: int, outcome: CandidateOutcome) -> None: ...

    def finish_run(self, run_id: int, result: OptimizeResult) -> None: ...


# ---------------------------------------------------------------------------------------------
# Pure helpers (tested on their own)


def timing_ms(result: EvalResult) -> float | None:
    """The measured median of a single-kernel benchmark."""
    return result.timing.median_ms if result.timing else None


def required_speedup(result: EvalResult) -> float:
    """The speedup a candidate must exceed to count as faster: 1 + max(2%, combined spread)."""
    spreads = [t.spread_pct for t in (result.baseline, result.candidate) if t is not None]
    return 1.0 + max(MIN_GAIN, sum(spreads) / 100.0)


def rank_key(outcome: CandidateOutcome) -> tuple[float, int, int, int]:
    """Fastest first; ties to fewer registers, then to the earlier candidate."""
    return (
        -(outcome.speedup or 0.0),
        outcome.registers if outcome.registers is not None else 1 << 30,
        outcome.round,
        outcome.index,
    )


def top_correct(outcomes: list[CandidateOutcome], k: int) -> list[CandidateOutcome]:
    """The k best candidates with status `ok`, distinct sources only."""
    seen: set[str] = set()
    best: list[CandidateOutcome] = []
    for outcome in sorted((o for o in outcomes if o.status == "ok"), key=rank_key):
        key = re.sub(r"\s+", " ", outcome.source).strip()
        if key in seen:
            continue
        seen.add(key)
        best.append(outcome)
        if len(best) >= k:
            break
    return best


def _squashed(text: str) -> str:
    return re.sub(r"\s+", "", text)


def clean_candidate(code: str, file_text: str) -> str:
    """The candidate as it replaces the kernel: no spec block, and none of the includes or
    `__device__` helpers the file already has (models often repeat them: a redefinition)."""
    code = re.sub(r"\A\s*/\*\s*@cuda-llm.*?\*/\s*", "", code, flags=re.DOTALL)
    known = {_squashed(file_text[s:e]) for s, e in prompts.helper_spans(file_text)}
    for start, end in reversed(prompts.helper_spans(code)):
        if _squashed(code[start:end]) in known:
            code = code[:start] + code[end:]
    file_includes = {
        re.sub(r"\s+", "", line)
        for line in file_text.splitlines()
        if re.match(r"\s*#\s*include\b", line)
    }
    lines = [line for line in code.splitlines() if re.sub(r"\s+", "", line) not in file_includes]
    return "\n".join(lines).strip("\n") + "\n"


# ---------------------------------------------------------------------------------------------
# The run


@dataclasses.dataclass
class _Slot:
    """One candidate's progress in the current round."""

    round: int
    index: int


class _Run:
    def __init__(
        self,
        request: OptimizeRequest,
        config: OptimizeConfig,
        evaluator: Evaluator,
        llm: LlmClient,
        toolchain: Toolchain,
        history: History | None,
        on_event: Callable[[ProgressEvent], None] | None,
    ) -> None:
        self.request = request
        self.config = config
        self.evaluator = evaluator
        self.llm = llm
        self.toolchain = toolchain
        self.history = history
        self.on_event = on_event
        self.seed = request.seed if request.seed is not None else random.randrange(1, 2**31)
        self._seeds = 0
        self.started = time.monotonic()
        self.spec_dir = request.path.parent if request.path else None
        self.outcomes: list[CandidateOutcome] = []
        self.binaries: dict[tuple[int, int], KernelBinary] = {}
        self.resources: dict[tuple[int, int], Any] = {}
        self.tokens = 0
        self.run_id: int | None = None
        self.baseline: EvalResult | None = None
        self.baseline_binary: KernelBinary | None = None
        self.spec: TestSpec | None = None
        self.kernel: Kernel | None = None
        self.arch: str | None = None  # the evaluating device's, once known
        self.stop_reason: str | None = None
        self.fatal = False  # the stop reason is an endpoint error that ends the run
        self._gpu_calls = 0  # evaluator calls running or queued on the GPU thread
        self.pending: set[asyncio.Task[Any]] = set()
        # one thread for every evaluator call: calls never overlap, even after a cancel
        self.gpu = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="fsr-gpu"
        )
        self.task_context: prompts.TaskContext | None = None
        self.profile_text: str | None = None

    # -- plumbing ---------------------------------------------------------------------------

    def emit(self, event: ProgressEvent) -> None:
        if self.on_event is None:
            return
        try:
            self.on_event(event)
        except Exception:
            log.exception("progress callback failed")

    def next_seed(self) -> int:
        self._seeds += 1
        return (self.seed * 7919 + self._seeds) % (2**31 - 1) or 1

    async def on_gpu(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        self._gpu_calls += 1
        try:
            return await loop.run_in_executor(self.gpu, lambda: fn(*args, **kwargs))
        finally:
            self._gpu_calls -= 1

    @property
    def evaluating(self) -> bool:
        return self._gpu_calls > 0

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
            "baseline_ms": timing_ms(self.baseline) if self.baseline else None,
            "best_ms": None,
            "speedup": None,
            "accepted": False,
            "candidates": tuple(sorted(self.outcomes, key=lambda o: (o.round, o.index))),
            "best_source": None,
            "message": "",
            "run_id": self.run_id,
            "seed": self.seed,
            "tokens": self.tokens,
            "baseline_result": self.baseline,
        }
        base.update(fields)
        return OptimizeResult(**base)

    def error(self, message: str) -> OptimizeResult:
        return self.result(message=message, error=message)

    # -- steps ------------------------------------------------------------------------------

    async def prepare(self) -> OptimizeResult | None:
        """Kernel, spec, baseline binary and benchmark; an error result if any is missing."""
        request = self.request
        where = str(request.path) if request.path else "the file"
        kernel = await asyncio.to_thread(
            self.toolchain.find_kernel, request.file_text, request.kernel
        )
        if kernel is None:
            return self.error(f"no kernel named {request.kernel!r} in {where}")
        self.kernel = kernel
        spec, problems = await asyncio.to_thread(
            self.toolchain.parse_spec, kernel, request.file_text
        )
        if spec is None:
            if problems:
                listed = "; ".join(
                    f"line {p.span.start.line + 1}: {p.message}" for p in problems[:5]
                )
                return self.error(f"the test spec of {request.kernel} has errors: {listed}")
            draft = await asyncio.to_thread(self.toolchain.draft_spec, kernel, request.file_text)
            return self.error(
                f"no test spec for {request.kernel}: add a /* @cuda-llm */ block above the kernel "
                f"so candidates can be checked. A draft to review:\n{draft.rstrip()}"
            )
        self.spec = spec
        try:  # candidates are built for the GPU that judges them, whatever is configured
            facts = await self.on_gpu(self.evaluator.device_facts)
        except NoGpuError as exc:
            return self.error(f"no GPU: {exc}")
        except (EvaluationCancelled, asyncio.CancelledError):
            raise
        except Exception as exc:
            return self.error(f"cannot read the GPU's properties: {exc}")
        self.arch = facts.arch
        try:
            built = await asyncio.to_thread(
                functools.partial(
                    self.toolchain.build,
                    request.file_text,
                    request.path,
                    request.kernel,
                    request.settings,
                    instance=spec.instance,
                    arch=facts.arch,
                )
            )
        except Exception as exc:  # NVRTC missing, a broken toolkit...
            return self.error(f"cannot build the original {request.kernel}: {exc}")
        if not isinstance(built, KernelBinary):
            return self.error(f"the original {request.kernel} does not build: {built.message}")
        self.baseline_binary = dataclasses.replace(
            built, kernel_source=kernel.span.slice(request.file_text)
        )
        try:
            baseline = await self.on_gpu(
                self.evaluator.benchmark,
                self.baseline_binary,
                spec,
                spec_dir=self.spec_dir,
                seed=self.next_seed(),
            )
        except NoGpuError as exc:
            return self.error(f"no GPU: {exc}")
        except (EvaluationCancelled, asyncio.CancelledError):
            raise
        except Exception as exc:  # BaselineFailed, a broken inputs hook...
            return self.error(f"cannot benchmark the original {request.kernel}: {exc}")
        self.baseline = baseline
        if baseline.status != "ok":
            return self.error(
                f"the original {request.kernel} fails its own test spec ({baseline.status}): "
                f"{baseline.message}"
            )
        timing = baseline.timing
        self.task_context = prompts.TaskContext(
            kernel_name=request.kernel,
            kernel_source=kernel.span.slice(request.file_text),
            file=prompts.file_context(request.file_text, kernel),
            spec_text=kernel.spec.toml if kernel.spec else "",
            sizes=dict(spec.sizes),
            device=facts,
            baseline_resources=built.resources,
            baseline_ms=timing_ms(baseline),
            baseline_spread_pct=timing.spread_pct if timing else None,
            baseline_bandwidth_gbs=baseline.bandwidth_gbs,
            baseline_fraction_of_peak=baseline.fraction_of_peak,
        )
        return None

    def prompt(self, round_: int, index: int) -> Prompt:
        assert self.task_context is not None
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
            self.task_context,
            round_=round_,
            index=index,
            candidates=self.config.candidates,
            best=best,
            failures=failures,
            profile=self.profile_text,
        )
        return Prompt(kernel=self.request.kernel, round=round_, index=index, messages=messages)

    async def candidate(self, slot: _Slot) -> CandidateOutcome:
        """Request, build and evaluate one candidate."""
        prompt = self.prompt(slot.round, slot.index)
        self.emit(CandidateStage(slot.round, slot.index, "requested"))
        reply = await self.llm.complete(prompt)
        self.tokens += reply.tokens
        if reply.error is not None or reply.code is None:
            message = reply.error or "no kernel in the reply"
            if reply.fatal:
                self.stop_reason = message
                self.fatal = True
            return self.outcome(slot, "llm_error", message, source="", tokens=reply.tokens)
        self.emit(CandidateStage(slot.round, slot.index, "generated"))
        source = clean_candidate(reply.code, self.request.file_text)
        try:
            built = await asyncio.to_thread(
                self.toolchain.build,
                self.request.file_text,
                self.request.path,
                self.request.kernel,
                self.request.settings,
                kernel_source=source,
                instance=self.spec.instance if self.spec else None,
                arch=self.arch,
            )
        except Exception as exc:
            log.exception("building candidate %d.%d failed", slot.round, slot.index)
            message = f"the build failed: {exc}"
            return self.outcome(slot, "compile_error", message, source=source, tokens=reply.tokens)
        if not isinstance(built, KernelBinary):
            return self.outcome(
                slot, built.status, built.message, source=source, tokens=reply.tokens
            )
        binary = dataclasses.replace(built, kernel_source=source)
        self.resources[(slot.round, slot.index)] = binary.resources
        self.emit(CandidateStage(slot.round, slot.index, "evaluating"))
        assert self.baseline_binary is not None and self.spec is not None
        result = await self.on_gpu(
            self.evaluator.evaluate,
            self.baseline_binary,
            binary,
            self.spec,
            spec_dir=self.spec_dir,
            seed=self.next_seed(),
        )
        status: Status = result.status
        if status == "ok":
            self.binaries[(slot.round, slot.index)] = binary
            if result.speedup is not None and result.speedup < 1.0:
                status = "slower"
        ms = result.candidate.median_ms if result.candidate else None
        message = result.message
        if status in ("ok", "slower") and not message:
            message = f"{result.speedup:.2f}x" if result.speedup is not None else "correct"
        return self.outcome(
            slot,
            status,
            message,
            source=source,
            tokens=reply.tokens,
            ms=ms,
            speedup=result.speedup,
            registers=binary.resources.registers if binary.resources else None,
        )

    def outcome(self, slot: _Slot, status: Status, message: str, **fields: Any) -> CandidateOutcome:
        return CandidateOutcome(
            round=slot.round,
            index=slot.index,
            status=status,
            ms=fields.pop("ms", None),
            message=message,
            **fields,
        )

    async def one_round(self, round_: int) -> None:
        slots = [_Slot(round_, i) for i in range(1, self.config.candidates + 1)]
        tasks = {asyncio.ensure_future(self.candidate(slot)): slot for slot in slots}
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
                        log.exception("candidate %d.%d failed", slot.round, slot.index)
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
        if self.evaluating:
            with contextlib.suppress(Exception):
                self.evaluator.cancel()
        for task in self.pending:
            task.cancel()
        await asyncio.gather(*self.pending, return_exceptions=True)
        self.pending = set()

    async def rounds(self) -> None:
        best_speedup = 1.0
        idle_rounds = 0
        for round_ in range(1, self.config.rounds + 1):
            self.stop_reason = self.stop_reason or self.over_budget()
            if self.stop_reason:
                return
            self.emit(RoundStarted(round_, self.config.rounds))
            before = self.best()
            await self.one_round(round_)
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
                await self.profile_best(best)

    async def profile_best(self, best: CandidateOutcome) -> None:
        if not self.config.profile:
            return
        binary = self.binaries.get((best.round, best.index))
        if binary is None or self.spec is None:
            return
        try:
            self.profile_text = await self.on_gpu(
                self.toolchain.profile, binary, self.spec, self.spec_dir
            )
        except Exception as exc:  # the profile is an extra: never let it end the run
            log.info("profiling skipped: %s", exc)

    async def choose_winner(self) -> OptimizeResult:
        """Re-validate the best candidates in turn; the first that holds up wins."""
        assert self.baseline_binary is not None and self.spec is not None
        ranked = top_correct(self.outcomes, max(1, self.config.top_k))
        if not ranked:
            reason = "no candidate was correct"
            slower = [o for o in self.outcomes if o.status == "slower"]
            if slower:
                reason = f"{len(slower)} correct candidate(s), all slower than the original"
            return self.no_improvement(reason)
        notes: list[str] = []
        for outcome in ranked:
            key = (outcome.round, outcome.index)
            binary = self.binaries[key]
            label = f"round {outcome.round} candidate {outcome.index}"
            if outcome.speedup is not None and outcome.speedup <= 1.0 + MIN_GAIN:
                notes.append(
                    f"{label} is {outcome.speedup:.3f}x, within measurement noise "
                    f"(needs > {1.0 + MIN_GAIN:.3f}x)"
                )
                continue  # both measurements must clear the bar: no need for a second one
            check = await self.on_gpu(
                self.evaluator.evaluate,
                self.baseline_binary,
                binary,
                self.spec,
                spec_dir=self.spec_dir,
                seed=self.next_seed(),
            )
            if check.status != "ok":
                self.replace_outcome(
                    outcome, check.status, f"on re-validation with new inputs: {check.message}"
                )
                notes.append(f"{label} failed re-validation ({check.status})")
                continue
            needed = required_speedup(check)
            if check.speedup is None or check.speedup <= needed:
                shown = f"{check.speedup:.3f}x" if check.speedup is not None else "no timing"
                notes.append(
                    f"{label} is {shown}, within measurement noise (needs > {needed:.3f}x)"
                )
                continue
            sanitized = False
            if self.config.sanitize_winner:
                report = await self.on_gpu(
                    self.toolchain.sanitize, binary, self.spec, self.spec_dir
                )
                if report is not None and report.status != "ok":
                    self.replace_outcome(
                        outcome, "sanitizer", report.sanitizer_report or report.message
                    )
                    notes.append(f"{label} failed compute-sanitizer")
                    continue
                sanitized = report is not None
            return self.accepted(outcome, check, sanitized)
        return self.no_improvement("; ".join(notes))

    def replace_outcome(self, outcome: CandidateOutcome, status: Status, message: str) -> None:
        self.outcomes = [
            dataclasses.replace(o, status=status, message=message) if o is outcome else o
            for o in self.outcomes
        ]

    def accepted(
        self, outcome: CandidateOutcome, check: EvalResult, sanitized: bool
    ) -> OptimizeResult:
        baseline_ms = check.baseline.median_ms if check.baseline else timing_ms(self.baseline)  # type: ignore[arg-type]
        best_ms = check.candidate.median_ms if check.candidate else outcome.ms
        total = len(check.cases)
        cases = f", {check.cases_passed}/{total} cases" if total else ""
        extra = ", sanitizer clean" if sanitized else ""
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
            seed=self.seed,
        )
        failed = await self.prepare()
        if failed is not None:
            return failed
        assert self.baseline is not None
        self.emit(
            RunStarted(
                self.request.kernel, self.baseline, self.config.rounds, self.config.candidates
            )
        )
        await self.rounds()
        if self.fatal and not top_correct(self.outcomes, 1):
            return self.error(f"LLM endpoint error: {self.stop_reason}")
        return await self.choose_winner()


async def optimize(
    request: OptimizeRequest,
    config: OptimizeConfig,
    evaluator: Evaluator,
    llm: LlmClient,
    *,
    on_event: Callable[[ProgressEvent], None] | None = None,
    cancel: asyncio.Event | None = None,
    history: History | None = None,
    toolchain: Toolchain | None = None,
) -> OptimizeResult:
    """Run the FSR loop on `request.kernel`; never raises for bad input, endpoint or GPU trouble.

    Setting `cancel` (or cancelling the task running this) stops LLM requests and the GPU work
    in flight at once; with `cancel` the result comes back with `cancelled=True`.
    """
    run = _Run(request, config, evaluator, llm, toolchain or DefaultToolchain(), history, on_event)
    work = asyncio.ensure_future(run.execute())
    waiter = asyncio.ensure_future(cancel.wait()) if cancel is not None else None
    try:
        waiting: set[asyncio.Future[Any]] = {work} | ({waiter} if waiter else set())
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if work.done():
            try:
                result = work.result()
            except NoGpuError as exc:
                result = run.error(f"no GPU: {exc}")
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
        run.gpu.shutdown(wait=False)
    await run.recorded("finish_run", run.run_id, result)
    run.emit(RunFinished(result))
    return result


async def _stop(run: _Run, work: asyncio.Future[Any]) -> None:
    """Cancel GPU work in flight and the run's LLM requests, and wait until they have let go."""
    if run.evaluating:
        with contextlib.suppress(Exception):
            run.evaluator.cancel()
    work.cancel()
    for task in list(run.pending):
        task.cancel()
    await asyncio.gather(work, *run.pending, return_exceptions=True)
