"""The tune search's plain data: what to tune, with which options, and what came out.

Front ends (`cli`, `lsp`, `suite`) read these through the engine's outcomes; they import this
module, never the search itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.evaluate.types import KernelBinary
from cuda_llm_lsp.source.spec import TestSpec

Strategy = Literal["exhaustive", "sample"]
Stopped = Literal["budget", "cancelled"]


@dataclass(frozen=True)
class TuneOptions:
    max_points: int = 100  # configurations measured at most; exhaustive when the space fits
    budget_s: float = 600.0  # wall time of the search
    workers: int = 2  # compiles at once
    finalists: int = 3  # re-checked on new inputs and re-timed
    sample_fraction: float = 0.5  # of max_points, drawn at random before local refinement
    seed: int = 0  # sampling, and the inputs every configuration is screened on


@dataclass(frozen=True)
class TuneRequest:
    """What to tune. A user's kernel: `spec` carries the tunables, and the default configuration
    is both the oracle and the reference time. A model's candidate (tune/candidate.py): its text
    as `kernel_source`, its launch block applied to the original's spec as `tuned_spec`, and the
    original's binary as `baseline`: judged and timed against the original, as in the loop."""

    file_text: str
    kernel: str
    spec: TestSpec  # the oracle's (parsed from the file)
    settings: Settings
    path: Path | None = None
    kernel_source: str | None = None  # a candidate's text, spliced in place of the kernel
    tuned_spec: TestSpec | None = None  # the tunables and launch tried; None: `spec`
    baseline: KernelBinary | None = None  # the oracle and reference; None: the default built

    @property
    def tuning(self) -> TestSpec:
        return self.tuned_spec or self.spec


@dataclass(frozen=True)
class Measured:
    """One configuration's outcome (a contract status; `launch_error` also for a launch the
    device cannot run, found before compiling)."""

    config: dict[str, int]
    status: str
    message: str
    ms: float | None = None
    spread_pct: float | None = None
    speedup: float | None = None  # default configuration's median / this one's, interleaved
    finalist: bool = False  # evaluated again on new inputs; these figures are that run's


@dataclass(frozen=True)
class TuneProgress:
    done: int
    planned: int  # max_points, or the space when smaller
    latest: Measured


@dataclass(frozen=True)
class TuneResult:
    kernel: str
    strategy: Strategy
    space_size: int  # before restrictions
    default: dict[str, int]
    measured: tuple[Measured, ...]  # in the order they finished
    best: Measured | None  # the fastest finalist that passed again
    stopped: Stopped | None
    elapsed_s: float

    @property
    def default_result(self) -> Measured | None:
        return next((m for m in self.measured if m.config == self.default), None)

    @property
    def spread(self) -> float | None:
        """Slowest correct configuration's time over the fastest's (1.0: tuning buys nothing)."""
        times = [m.ms for m in self.measured if m.status == "ok" and m.ms]
        return max(times) / min(times) if len(times) > 1 else None

    def ranked(self) -> list[Measured]:
        """Correct ones fastest first, then the rest in the order they finished."""
        ok = sorted((m for m in self.measured if m.status == "ok"), key=lambda m: -(m.speedup or 0))
        return ok + [m for m in self.measured if m.status != "ok"]


class TuneError(RuntimeError):
    """The run cannot start: no tunables, or the default configuration does not build."""
