"""The checks of one run as a typed plan: one dataclass per check kind, results as named fields.

The worker (`worker.CudaBackend._check`) makes a plan of the run's checks (guard bands, inputs
unchanged, unwritten outputs, finite outputs, outputs against a kept run), gives each its slots
in one array of 64-bit counters, launches each check's kernel (`device_checks.SOURCE`) on its
slots, reads the array back in one copy and reads each check's slots as a record with named
fields. Nothing here touches the device: a check says which kernel to launch with which
arguments (`launch`), and how its slots read (`read`).

Slot layouts (`device_checks`): bytes (guard bands) changed, first, last; changed (inputs)
changed, first; output unwritten, first, last, bad, first bad, largest |difference| (bits of a
double), whether any difference is finite, worst (first index of the largest difference), the
buffer's scale (the largest finite |expected|, bits of a double: `cl_scale`, before the check)
and its magnitude (`cl_magnitude`, after `cl_scale`: the units `compare.typical_magnitude`
turns into the mean |expected|, which scales a type's default atol when `atol_relative`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from cuda_llm_lsp.evaluate.compare import is_float
from cuda_llm_lsp.evaluate.counter import DTYPE_CODES
from cuda_llm_lsp.evaluate.device_checks import NO_INDEX

#: a kernel launch of a check: (helper kernel, elements, typed arguments)
Launch = tuple[str, int, list[tuple[str, int | float]]]
#: the byte guard bands are filled with (`compare.GUARD_BYTE`), passed in by the worker
Side = Literal["front", "back"]


@dataclass(frozen=True)
class BytesSlots:
    """A guard band: bytes changed, the first and last changed offset within the band."""

    changed: int
    first: int
    last: int

    SIZE: ClassVar[int] = 3
    INIT: ClassVar[tuple[int, ...]] = (0, NO_INDEX, 0)


@dataclass(frozen=True)
class ChangedSlots:
    """An input: elements changed bit for bit, and the first of them."""

    changed: int
    first: int

    SIZE: ClassVar[int] = 2
    INIT: ClassVar[tuple[int, ...]] = (0, NO_INDEX)


@dataclass(frozen=True)
class OutputSlots:
    """An output (against a reference, itself or nothing): see the module for the layout."""

    unwritten: int
    unwritten_first: int
    unwritten_last: int
    bad: int
    first_bad: int
    largest_bits: int
    any_finite: int
    worst: int
    scale_bits: int
    magnitude_units: int

    SIZE: ClassVar[int] = 10
    INIT: ClassVar[tuple[int, ...]] = (0, NO_INDEX, 0, 0, NO_INDEX, 0, 0, NO_INDEX, 0, 0)

    @property
    def largest(self) -> float:
        """The largest finite |got - expected| (meaningful when `any_finite`)."""
        return _double(self.largest_bits)

    @property
    def scale(self) -> float:
        """The largest finite |expected| (a float compare's; 0 where `cl_scale` did not run)."""
        return _double(self.scale_bits)


def _double(bits: int) -> float:
    return float(np.array([bits], dtype=np.uint64).view(np.float64)[0])


Slots = BytesSlots | ChangedSlots | OutputSlots


@dataclass(frozen=True)
class GuardCheck:
    """The guard band on one `side` of buffer `name`: `nbytes` at `start` must hold `fill`."""

    name: str
    side: Side
    start: int
    nbytes: int
    fill: int
    slot: int

    layout: ClassVar[type[BytesSlots]] = BytesSlots

    def launch(self, at: int) -> Launch:
        args: list[tuple[str, int | float]] = [
            ("uint64", self.start),
            ("uint64", self.nbytes),
            ("uint32", self.fill),
            ("uint64", at),
        ]
        return "cl_check_bytes", self.nbytes, args


@dataclass(frozen=True)
class InputCheck:
    """Input `name` must still equal, bit for bit, its pristine copy at `before`."""

    name: str
    dtype: str
    before: int
    after: int
    n: int
    itemsize: int
    slot: int

    layout: ClassVar[type[ChangedSlots]] = ChangedSlots

    def launch(self, at: int) -> Launch:
        args: list[tuple[str, int | float]] = [
            ("uint64", self.before),
            ("uint64", self.after),
            ("uint64", self.n),
            ("int32", self.itemsize),
            ("uint64", at),
        ]
        return "cl_check_changed", self.n, args


@dataclass(frozen=True)
class OutputCheck:
    """Output `name` (at `got`, `n` elements of the spec dtype `dtype`) by `cl_check_output`:

    - `kind` "unwritten": alone (`expected` 0), its elements still holding `poison`;
    - "finite": against itself with a negative tolerance, so every finite element is "bad":
      `n - bad` are the non-finite ones;
    - "compare": against the kept run `ref` uploaded at `expected`, within `rtol`/`atol` or
      the scale-aware floor (`scale_tol` times the buffer's scale, `compare.within_tolerance`;
      0: no floor), the scale found first by `cl_scale` (`scale`)."""

    kind: Literal["unwritten", "finite", "compare"]
    name: str
    ref: str
    expected: int
    got: int
    n: int
    dtype: str
    poison: int
    rtol: float
    atol: float
    slot: int
    scale_tol: float = 0.0
    atol_relative: bool = False  # `atol` is a type's default: times min(1, mean |expected|)

    layout: ClassVar[type[OutputSlots]] = OutputSlots

    @property
    def scaled(self) -> bool:
        """Whether the buffer's scale is found first: a compare of floats (the summary reports
        the scale even where the spec asks for exact results and there is no floor)."""
        return self.kind == "compare" and is_float(self.dtype)

    def launch(self, at: int) -> Launch:
        args: list[tuple[str, int | float]] = [
            ("uint64", self.expected),
            ("uint64", self.got),
            ("uint64", self.n),
            ("int32", DTYPE_CODES[self.dtype]),
            ("uint64", self.poison),
            ("float64", self.rtol),
            ("float64", self.atol),
            ("float64", self.scale_tol),
            ("int32", int(self.atol_relative)),
            ("uint64", at),
        ]
        return "cl_check_output", self.n, args

    def scale(self, at: int) -> list[Launch]:
        """`cl_scale` (the largest finite |expected|) then `cl_magnitude` (the mean |expected|'s
        units), in this order, into their slots before the check."""
        args: list[tuple[str, int | float]] = [
            ("uint64", self.expected),
            ("uint64", self.n),
            ("int32", DTYPE_CODES[self.dtype]),
            ("uint64", at),
        ]
        return [("cl_scale", self.n, args), ("cl_magnitude", self.n, args)]

    def worst(self, at: int) -> Launch:
        """`cl_worst`: the first index of the largest difference, once something is wrong."""
        args: list[tuple[str, int | float]] = [
            ("uint64", self.expected),
            ("uint64", self.got),
            ("uint64", self.n),
            ("int32", DTYPE_CODES[self.dtype]),
            ("uint64", at),
        ]
        return "cl_worst", self.n, args


Check = GuardCheck | InputCheck | OutputCheck


class CheckPlan:
    """The run's checks and their slots, in the order added."""

    def __init__(self) -> None:
        self.checks: list[Check] = []
        self.init: list[int] = []  # every slot's starting value

    def slot(self, kind: type[GuardCheck | InputCheck | OutputCheck]) -> int:
        """Slots for one more check of `kind`: their first index (starting values added)."""
        slot = len(self.init)
        self.init.extend(kind.layout.INIT)
        return slot

    def add(self, check: Check) -> None:
        self.checks.append(check)

    def outputs(self) -> list[OutputCheck]:
        return [c for c in self.checks if isinstance(c, OutputCheck)]

    def read(self, check: Check, slots: Sequence[int] | np.ndarray) -> Slots:
        """`check`'s slots out of the array read back, as its layout's record."""
        layout = check.layout
        values = [int(v) for v in slots[check.slot : check.slot + layout.SIZE]]
        return layout(*values)
