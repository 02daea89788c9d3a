"""The one event stream every action emits, for a front end's one progress renderer.

The FSR loop's events (`fsr.types`: run and round started, a candidate's stages, a candidate
judged, the run finished) pass through as they are; benchmark and tune add theirs here. Events
come on whichever thread the engine runs the step on: a renderer hands them to its own loop.
"""

from __future__ import annotations

from dataclasses import dataclass

from cuda_llm_lsp.fsr.types import (
    CandidateEvaluated,
    CandidateStage,
    ProgressEvent,
    RoundStarted,
    RunFinished,
    RunStarted,
)
from cuda_llm_lsp.tune.types import Measured


@dataclass(frozen=True)
class Step:
    """A step of a benchmark: "compiling", "running 4 cases on the GPU" (`percentage`: of it)."""

    text: str
    percentage: int | None = None


@dataclass(frozen=True)
class TuneStarted:
    """The search starts: the device, the default configuration and the space's size."""

    kernel: str
    device: str
    default: dict[str, int]
    space_size: int


@dataclass(frozen=True)
class ConfigurationMeasured:
    """One configuration of a tune search measured: `done` of `planned`, `latest` its outcome."""

    done: int
    planned: int
    latest: Measured


Event = ProgressEvent | Step | TuneStarted | ConfigurationMeasured

__all__ = [
    "CandidateEvaluated",
    "CandidateStage",
    "ConfigurationMeasured",
    "Event",
    "RoundStarted",
    "RunFinished",
    "RunStarted",
    "Step",
    "TuneStarted",
]
