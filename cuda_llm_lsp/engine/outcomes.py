"""What an action returns: its outcome (with the edit to apply, when there is one), or a typed
`Refusal` saying why it could not run. Front ends render these; none decides anything itself.

Passed through from `evaluate`, so that every front end reads a result alike: `LineProfile`
(profile's outcome, a plain dataclass) and the words for a measured time (`evaluate/format.py`:
`format_ms`, `peak_note`, `summary_line`, `ABOVE_PEAK_REASON`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from cuda_llm_lsp.evaluate.format import ABOVE_PEAK_REASON, format_ms, peak_note, summary_line
from cuda_llm_lsp.evaluate.line_profile import LineProfile
from cuda_llm_lsp.evaluate.types import DeviceFacts, EvalResult
from cuda_llm_lsp.fsr.types import OptimizeResult
from cuda_llm_lsp.source.spec import SpecError, TestSpec
from cuda_llm_lsp.tune.types import TuneResult

__all__ = [
    "ABOVE_PEAK_REASON",
    "BenchmarkOutcome",
    "FileEdit",
    "LineProfile",
    "OptimizeOutcome",
    "Refusal",
    "RefusalKind",
    "TuneOutcome",
    "format_ms",
    "peak_note",
    "summary_line",
]

RefusalKind = Literal[
    "no_kernel",  # no kernel of that name in the text
    "no_spec",  # the kernel has no test spec (`draft`: one to start from, where asked for)
    "spec_errors",  # its spec has errors (`problems`)
    "no_tunables",  # tune: the spec declares no tune.NAME
    "does_not_build",  # the kernel does not compile (`status`: the candidate status)
    "bad_inputs",  # the spec's inputs cannot be made (a missing file, a bad value)
    "baseline_failed",  # the kernel fails its own spec
    "cannot_tune",  # tune: the default configuration does not build, or the like
    "no_gpu",  # no CUDA GPU or driver
    "unavailable",  # the GPUs asked for cannot be used (`cudaLlm.cluster` without Ray, ...)
    "no_profiler",  # profile: no GPU, no ncu, no counter permission or an unsupported GPU
    "profile_failed",  # profile: the kernel does not build, or the profiled run failed
]


@dataclass(frozen=True)
class Refusal:
    """Why an action did not run; `message` is for the user as is."""

    kind: RefusalKind
    kernel: str
    message: str
    problems: tuple[SpecError, ...] = ()
    draft: str | None = None
    status: str = "error"


@dataclass(frozen=True)
class FileEdit:
    """The whole new text of a file, and the one region of it that changes: `old[start:end]`
    becomes `text[start:new_end]`; `lead`/`trail`: how far the region reaches before and after
    the kernel's own range; `notes`: what the user must still change by hand."""

    text: str
    start: int
    end: int
    new_end: int
    lead: int
    trail: int
    notes: tuple[str, ...] = ()

    def original(self, old: str) -> str:
        return old[self.start : self.end]

    @property
    def replacement(self) -> str:
        return self.text[self.start : self.new_end]


@dataclass(frozen=True)
class BenchmarkOutcome:
    kernel: str
    original: str  # the kernel's text as benchmarked
    spec: TestSpec
    result: EvalResult
    device: DeviceFacts
    builder: str = "nvrtc"  # which compiler built it (`KernelBinary.builder`)


@dataclass(frozen=True)
class TuneOutcome:
    """The search's result; `edit` makes the best configuration the default (None: the default
    is the best, none passed, or it cannot be written: `notes` say why)."""

    kernel: str
    original: str
    spec: TestSpec
    result: TuneResult
    edit: FileEdit | None
    notes: tuple[str, ...]
    device: str

    @property
    def cancelled(self) -> bool:
        return self.result.stopped == "cancelled"


@dataclass(frozen=True)
class OptimizeOutcome:
    """The FSR loop's result; `edit` writes its accepted winner into the file (None: nothing
    accepted, or `not_applicable` says why the winner cannot be written)."""

    kernel: str
    original: str
    result: OptimizeResult
    edit: FileEdit | None = None
    not_applicable: str | None = None
