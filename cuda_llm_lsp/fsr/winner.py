"""Which candidate wins: the ranking, the noise bar, and the re-validation of the best ones.

The best correct candidates are re-evaluated in turn on new inputs (and under the sanitizer where
there is one); the first that still beats the baseline beyond the measured spread wins. A
candidate that fails its re-validation has its outcome rewritten with the reason, in the run's
own list, so that a run cancelled half-way through still reports it.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from cuda_llm_lsp.evaluate.types import EvalResult, KernelBinary, Status
from cuda_llm_lsp.fsr.baseline import Baseline
from cuda_llm_lsp.fsr.gpu import GpuLane, Seeds
from cuda_llm_lsp.fsr.toolchain import Toolchain
from cuda_llm_lsp.fsr.types import CandidateOutcome
from cuda_llm_lsp.source.untrusted import neutralize

MIN_GAIN = 0.02  # a winner must be at least this much faster, or beyond the measured spread

Slot = tuple[int, int]  # (round, index) of a candidate


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


@dataclass(frozen=True)
class Winner:
    outcome: CandidateOutcome
    check: EvalResult  # its re-validation on new inputs
    sanitized: bool  # compute-sanitizer ran and found nothing


@dataclass(frozen=True)
class Choice:
    """The winner, or why there is none."""

    winner: Winner | None
    reason: str = ""


async def choose_winner(
    outcomes: list[CandidateOutcome],
    binaries: dict[Slot, KernelBinary],
    baseline: Baseline,
    *,
    top_k: int,
    sanitize: bool,
    lane: GpuLane,
    seeds: Seeds,
    toolchain: Toolchain,
) -> Choice:
    """Re-validate the best candidates in turn; the first that holds up wins. Failures are
    rewritten in `outcomes` itself."""
    ranked = top_correct(outcomes, max(1, top_k))
    if not ranked:
        reason = "no candidate was correct"
        slower = [o for o in outcomes if o.status == "slower"]
        if slower:
            reason = f"{len(slower)} correct candidate(s), all slower than the original"
        return Choice(None, reason)
    notes: list[str] = []
    for outcome in ranked:
        binary = binaries[(outcome.round, outcome.index)]
        label = f"round {outcome.round} candidate {outcome.index}"
        if outcome.speedup is not None and outcome.speedup <= 1.0 + MIN_GAIN:
            notes.append(
                f"{label} is {outcome.speedup:.3f}x, within measurement noise "
                f"(needs > {1.0 + MIN_GAIN:.3f}x)"
            )
            continue  # both measurements must clear the bar: no need for a second one
        # its own launch block's configuration, if any (the oracle keeps the original's)
        own = outcome.launch.applied_to(baseline.spec) if outcome.launch else None
        check = await lane.call(
            lane.evaluator.evaluate,
            baseline.binary,
            binary,
            baseline.spec,
            spec_dir=baseline.spec_dir,
            seed=seeds.next(),
            **({"candidate_spec": own} if own else {}),
        )
        if check.status != "ok":
            message = f"on re-validation with new inputs: {check.message}"
            _rewrite(outcomes, outcome, check.status, message)
            notes.append(f"{label} failed re-validation ({check.status})")
            continue
        needed = required_speedup(check)
        if check.speedup is None or check.speedup <= needed:
            shown = f"{check.speedup:.3f}x" if check.speedup is not None else "no timing"
            notes.append(f"{label} is {shown}, within measurement noise (needs > {needed:.3f}x)")
            continue
        sanitized = False
        if sanitize:
            report = await lane.call(
                toolchain.sanitize, binary, own or baseline.spec, baseline.spec_dir
            )
            if report is not None and report.status != "ok":
                message = report.sanitizer_report or report.message
                _rewrite(outcomes, outcome, "sanitizer", message)
                notes.append(f"{label} failed compute-sanitizer")
                continue
            sanitized = report is not None
        return Choice(Winner(outcome, check, sanitized))
    return Choice(None, "; ".join(notes))


def _rewrite(
    outcomes: list[CandidateOutcome], outcome: CandidateOutcome, status: Status, message: str
) -> None:
    """`outcome` rewritten in `outcomes`; its message (a sanitizer report quotes the kernel's
    output) neutralized like every outcome's."""
    outcomes[:] = [
        dataclasses.replace(o, status=status, message=neutralize(message)) if o is outcome else o
        for o in outcomes
    ]
