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
import dataclasses
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass

from cuda_llm_lsp.evaluate.candidate import CandidateRejected
from cuda_llm_lsp.evaluate.types import STATUSES, EvaluationCancelled, KernelBinary, Status
from cuda_llm_lsp.fsr.baseline import Baseline
from cuda_llm_lsp.fsr.gpu import GpuLane
from cuda_llm_lsp.fsr.toolchain import Toolchain, build_candidate, clean_candidate
from cuda_llm_lsp.fsr.types import CandidateTuning, OptimizeConfig, OptimizeRequest
from cuda_llm_lsp.source.spec.launch import LaunchConfig
from cuda_llm_lsp.source.spec.tunables import Tunables, describe
from cuda_llm_lsp.source.templates import template_constants
from cuda_llm_lsp.tune.candidate import (
    candidate_request,
    feedback,
    pinned_source,
    resolved_launch,
    with_launch_block,
)
from cuda_llm_lsp.tune.search import (
    Builder,
    TuneOptions,
    TuneProgress,
    TuneRequest,
    TuneResult,
    tune_kernel,
)
from cuda_llm_lsp.tune.space import Space


def tuning_request(
    code: str, source: str, request: OptimizeRequest, baseline: Baseline
) -> TuneRequest | str | None:
    """The tuning of the reply `code` (cleaned as `source`) when its launch block declares
    tunables of its own; None when it does not; why the block is unusable (`bad_launch`, worded
    as `fsr.launch.candidate_launch` words it) otherwise."""
    text = with_launch_block(code, source, request.kernel)
    if text is None:
        return None
    made = candidate_request(request.file_text, request.path, request.kernel, baseline.spec,
                             request.settings, text, baseline.binary)  # fmt: skip
    if isinstance(made, list):
        return "the launch block is unusable: " + "; ".join(e.message for e in made[:4])
    return made


def default_defines(tune: TuneRequest | None) -> tuple[str, ...]:
    """`NAME=value` of the candidate's default configuration: its first build and judging."""
    tunables = tune.tuning.tunables if tune is not None else None
    return Tunables.compile_defines(tunables.default) if tunables is not None else ()


def planned_points(tune: TuneRequest, max_points: int) -> int:
    """How many configurations the search measures at most (the progress message's count)."""
    tunables = tune.tuning.tunables
    if tunables is None:
        return 0
    strategy, planned = Space(tunables, template_constants(tune.tuning.template_args)).strategy(
        max_points
    )
    return len(planned) if strategy == "exhaustive" else max_points


def options_for(config: OptimizeConfig, seed: int, remaining_s: float | None) -> TuneOptions:
    """The per-candidate search: `tune_points` configurations, `tune_budget_s` seconds (less
    when the run's own time budget has less left), two finalists re-checked."""
    budget = (
        config.tune_budget_s
        if remaining_s is None
        else min(config.tune_budget_s, max(0.0, remaining_s))
    )
    return TuneOptions(max_points=max(1, config.tune_points), budget_s=budget, finalists=2,
                       seed=seed)  # fmt: skip


async def build_configured(
    toolchain: Toolchain, request: OptimizeRequest, source: str, defines: tuple[str, ...], *,
    instance: str | None, arch: str,
) -> KernelBinary | CandidateRejected:  # fmt: skip
    """`build_candidate` with `-D` `defines` added (the binary says which: `defines`)."""
    if not defines:
        return await build_candidate(toolchain, request, source, instance=instance, arch=arch)
    settings = dataclasses.replace(request.settings,
                                   defines=(*request.settings.defines, *defines))  # fmt: skip
    built = await build_candidate(toolchain, dataclasses.replace(request, settings=settings),
                                  source, instance=instance, arch=arch)  # fmt: skip
    return dataclasses.replace(built, defines=defines) if isinstance(built, KernelBinary) else built


def builder(
    toolchain: Toolchain, request: OptimizeRequest, source: str, *, instance: str | None,
    arch: str,
) -> Builder:  # fmt: skip
    """The tuner's compile of one configuration: the loop's toolchain, `-DNAME=value`."""

    def build(config: dict[str, int]) -> KernelBinary | CandidateRejected:
        defines = Tunables.compile_defines(config)
        settings = dataclasses.replace(request.settings,
                                       defines=(*request.settings.defines, *defines))  # fmt: skip
        built = toolchain.build(request.file_text, request.path, request.kernel, settings,
                                kernel_source=source, instance=instance, arch=arch)  # fmt: skip
        if isinstance(built, CandidateRejected):
            return built
        return dataclasses.replace(built, kernel_source=source, defines=defines)

    return build


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
    cancel: threading.Event,
    on_progress: Callable[[TuneProgress], None] | None = None,
) -> TunedCandidate:
    """Tune the correct candidate `source` (`tune`: its request), or with `options` None only
    write its default configuration in; see the module. Raises EvaluationCancelled on cancel."""
    tunables = tune.tuning.tunables
    assert tunables is not None  # tuning_request made it from a block with tunables
    result: TuneResult | None = None
    config: dict[str, int] = dict(tunables.default)
    if options is not None:
        build = builder(toolchain, request, source, instance=baseline.spec.instance,
                        arch=baseline.arch)  # fmt: skip
        result = await lane.call(tune_kernel, tune, lane.evaluator, options, build=build,
                                 on_progress=on_progress, cancel=cancel)  # fmt: skip
        if result.stopped == "cancelled":
            raise EvaluationCancelled("tuning cancelled")
        if result.best is None:
            status, message = failure(result)
            return TunedCandidate(status, message, source, launch, None, None, None,
                                  summary(result))  # fmt: skip
        config = dict(result.best.config)
    text = pinned_source(tune, config)
    assert text is not None  # a candidate's request always has its text
    # the block's lines (and where it was) are blank: no whitespace-only lines left behind
    pinned = re.sub(r"(?m)^[ \t]+$", "", clean_candidate(text, request.file_text)).lstrip("\n")
    own = resolved_launch(launch, config)
    tuning = summary(result) if result is not None else None
    binary = await build_candidate(toolchain, request, pinned, instance=baseline.spec.instance,
                                   arch=baseline.arch)  # fmt: skip
    if not isinstance(binary, KernelBinary):
        message = (f"with {describe(config)} written in as its defaults it does not build: "
                   f"{binary.message}")  # fmt: skip
        return TunedCandidate(binary.status, message, pinned, own, None, None, None, tuning)
    if result is None or result.best is None:
        return TunedCandidate("ok", "", pinned, own, binary, None, None, None)
    best = result.best
    message = (f"{best.speedup:.2f}x with {describe(config)} (tuned: {len(result.measured)} "
               "configuration(s))")  # fmt: skip
    return TunedCandidate("ok", message, pinned, own, binary, best.ms, best.speedup, tuning)


def progress_events(
    emit: Callable[[int, int], None], loop: asyncio.AbstractEventLoop
) -> Callable[[TuneProgress], None]:
    """The tuner's progress (on its thread) as `emit(done, planned)` calls on the event loop."""

    def heard(p: TuneProgress) -> None:
        loop.call_soon_threadsafe(emit, p.done, p.planned)

    return heard
