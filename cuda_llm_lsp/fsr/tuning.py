"""The loop's tuning step: a correct candidate whose launch block declares tunables is tuned
before it is ranked (docs/design.md, "Tuning").

The block (`tune.NAME = [...]`, `restrict`) is read from the raw reply and put back on the
cleaned candidate (`tune.candidate.with_launch_block`); the candidate is first built and judged
with its default configuration (`-D` for each tunable, as the tuner builds every one); once
correct, `tune.search.tune_kernel` searches it on the run's GPU lane, against the original's
binary as oracle and reference, within `OptimizeConfig.tune_points` configurations and
`tune_budget_s` seconds (16 and 60 s by default: a handful of block sizes or tiles, exhaustively;
a larger space is sampled and refined). Every configuration is judged on every case, hidden ones
included, and the finalists again on new inputs, so the best is one that passed twice.

The candidate then ranks with that configuration: its text has the best values written in as
its `#define` defaults (`tune.candidate.pinned_source`) and is built again without any `-D`, its
launch has them written in (`resolved_launch`), and that text, launch and binary are what the
winner's re-validation, the sanitizer, the diff and the editor's suggestion get: what is offered
is what was measured. When no configuration passes again it ranks as failed, with the status of
the configuration that failed.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from dataclasses import dataclass

from cuda_llm_lsp.cancel import CancelToken
from cuda_llm_lsp.evaluate.candidate import CandidateRejected
from cuda_llm_lsp.evaluate.types import STATUSES, EvaluationCancelled, KernelBinary, Status
from cuda_llm_lsp.fsr.baseline import Baseline
from cuda_llm_lsp.fsr.gpu import GpuLane
from cuda_llm_lsp.fsr.toolchain import Toolchain, build_candidate, clean_candidate
from cuda_llm_lsp.fsr.types import CandidateTuning, OptimizeConfig, OptimizeRequest
from cuda_llm_lsp.source.spec.launch import LaunchConfig
from cuda_llm_lsp.source.spec.tunables import describe
from cuda_llm_lsp.tune.candidate import (
    cut_short,
    feedback,
    pinned_source,
    resolved_launch,
)
from cuda_llm_lsp.tune.search import (
    Builder,
    TuneOptions,
    TuneProgress,
    TuneRequest,
    TuneResult,
    binary_builder,
    tune_kernel,
)

MIN_TUNE_S = 2.0  # less of the run's time left than this: no search, the default ranks


def own_tuning(
    launch: LaunchConfig, text: str, request: OptimizeRequest, baseline: Baseline
) -> TuneRequest | None:
    """The tuning of a candidate whose launch block (`launch`, parsed from `text`: the cleaned
    candidate with its block put back, `with_launch_block`) declares tunables of its own; None
    when it declares none (the file's, if any, are not the candidate's to tune)."""
    spec = baseline.spec
    if launch.tunables is None or launch.tunables is spec.tunables:
        return None
    return TuneRequest(
        request.file_text,
        request.kernel,
        spec,
        request.settings,
        request.path,
        kernel_source=text,
        tuned_spec=launch.applied_to(spec),
        baseline=baseline.binary,
    )


def options_for(config: OptimizeConfig, seed: int, remaining_s: float | None) -> TuneOptions | None:
    """The per-candidate search: `tune_points` configurations, `tune_budget_s` seconds (less
    when the run's own time budget has less left), two finalists re-checked. None (no search:
    the candidate ranks with its default configuration) when tuning is off or the run has less
    than `MIN_TUNE_S` left."""
    if config.tune_points <= 0 or (remaining_s is not None and remaining_s < MIN_TUNE_S):
        return None
    budget = config.tune_budget_s if remaining_s is None else min(config.tune_budget_s, remaining_s)
    return TuneOptions(max_points=config.tune_points, budget_s=budget, finalists=2, seed=seed)


def configured_builder(toolchain: Toolchain, tune: TuneRequest, arch: str) -> Builder:
    """The candidate's compile of one configuration: the loop's toolchain, `-DNAME=value`."""
    return binary_builder(tune, arch, compile=toolchain.build)


async def build_default(
    toolchain: Toolchain, tune: TuneRequest, arch: str
) -> KernelBinary | CandidateRejected:
    """The candidate built with its default configuration's `-D`s (its first judging), as the
    tuner builds each configuration."""
    tunables = tune.tuning.tunables
    assert tunables is not None  # own_tuning made it from a block with tunables
    build = configured_builder(toolchain, tune, arch)
    return await asyncio.to_thread(build, dict(tunables.default))


@dataclass(frozen=True)
class TunedCandidate:
    """A correct candidate after its tuning: what it ranks with, or why it ranks as failed."""

    status: Status  # "ok" (then `speedup` decides ok / slower), else why none passed
    message: str
    source: str  # the best configuration written in; the candidate's own text when failed
    launch: LaunchConfig | None  # its launch with the best values written in
    binary: KernelBinary | None  # `source` built without -D: what re-validation runs
    ms: float | None
    speedup: float | None
    tuning: CandidateTuning | None  # None: tuning was off (`tune_points` 0)


def summary(result: TuneResult) -> CandidateTuning:
    default = result.default_result
    best = result.best
    return CandidateTuning(
        strategy=result.strategy,
        measured=len(result.measured),
        failed=sum(1 for m in result.measured if m.status != "ok"),
        space_size=result.space_size,
        default=dict(result.default),
        default_ms=default.ms if default is not None and default.status == "ok" else None,
        best=dict(best.config) if best is not None else None,
        best_ms=best.ms if best is not None else None,
        spread=result.spread,
        stopped=result.stopped,
        feedback=feedback(result),
    )


def failure(result: TuneResult) -> tuple[Status, str]:
    """Why no configuration ranks: the failing finalist's status (it passed once, then not on
    new inputs), else the first failure's; with the tuner's feedback."""
    failed = [m for m in result.measured if m.status != "ok"]
    worst = next((m for m in failed if m.finalist), failed[0] if failed else None)
    said = feedback(result)
    if worst is None:  # nothing failed and nothing passed: nothing was measured
        return "launch_error", f"tuning measured no configuration. {said}"
    status: Status = worst.status if worst.status in STATUSES else "launch_error"  # type: ignore[assignment]
    return status, f"tuning: {describe(worst.config)}: {worst.message.strip()} {said}"


async def tune_candidate(
    lane: GpuLane,
    toolchain: Toolchain,
    request: OptimizeRequest,
    baseline: Baseline,
    tune: TuneRequest,
    launch: LaunchConfig,
    options: TuneOptions | None,
    *,
    source: str,
    cancel: CancelToken,
    on_progress: Callable[[TuneProgress], None] | None = None,
    on_planned: Callable[[int], None] | None = None,
) -> TunedCandidate:
    """Tune the correct candidate `source` (`tune`: its request), or with `options` None only
    write its default configuration in; see the module. A search the time budget cut off
    before any configuration failed (`cut_short`) also keeps the default: the candidate ranks
    with the figures it was judged with. Raises EvaluationCancelled on cancel."""
    tunables = tune.tuning.tunables
    assert tunables is not None  # own_tuning made it from a block with tunables
    result: TuneResult | None = None
    config: dict[str, int] = dict(tunables.default)
    if options is not None:
        build = configured_builder(toolchain, tune, baseline.arch)
        result = await lane.call(
            tune_kernel,
            tune,
            lane.evaluator,
            options,
            build=build,
            on_progress=on_progress,
            on_planned=on_planned,
            cancel=cancel,
        )
        if result.stopped == "cancelled":
            raise EvaluationCancelled("tuning cancelled")
        if result.best is None and not cut_short(result):
            status, message = failure(result)
            return TunedCandidate(
                status, message, source, launch, None, None, None, summary(result)
            )
        if result.best is not None:
            config = dict(result.best.config)
    text = pinned_source(tune, config)
    assert text is not None  # a candidate's request always has its text
    # the block's lines (and where it was) are blank: no whitespace-only lines left behind
    pinned = re.sub(r"(?m)^[ \t]+$", "", clean_candidate(text, request.file_text)).lstrip("\n")
    own = resolved_launch(launch, config)
    tuning = summary(result) if result is not None else None
    binary = await build_candidate(
        toolchain, request, pinned, spec=baseline.spec, arch=baseline.arch
    )
    if not isinstance(binary, KernelBinary):
        message = (
            f"with {describe(config)} written in as its defaults it does not build: "
            f"{binary.message}"
        )
        return TunedCandidate(binary.status, message, pinned, own, None, None, None, tuning)
    if result is None or result.best is None:  # its default's figures stand
        return TunedCandidate("ok", "", pinned, own, binary, None, None, tuning)
    best = result.best
    message = (
        f"{best.speedup:.2f}x with {describe(config)} (tuned: {len(result.measured)} "
        "configuration(s))"
    )
    return TunedCandidate("ok", message, pinned, own, binary, best.ms, best.speedup, tuning)


def progress_events(
    emit: Callable[[int, int], None], loop: asyncio.AbstractEventLoop
) -> tuple[Callable[[int], None], Callable[[TuneProgress], None]]:
    """The tuner's plan and progress (on its thread) as `emit(done, planned)` calls on the event
    loop: `emit(0, planned)` once the search is planned, then one per configuration measured."""

    def planned(count: int) -> None:
        loop.call_soon_threadsafe(emit, 0, count)

    def heard(p: TuneProgress) -> None:
        loop.call_soon_threadsafe(emit, p.done, p.planned)

    return planned, heard
