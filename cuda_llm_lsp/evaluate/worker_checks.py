"""The worker's checks of one run, on the device: the plan (`check_plan`), its kernels
launched on one array of slots, the slots read back in one copy and turned into `compare`'s
summaries. A kept run's values come up from host memory only for the checks and are scrubbed
off the device after them.

`DeviceChecks` is a part of `worker.CudaBackend`, which supplies the driver (`d`, `check`), the
allocation pool (`_take`, `_give`), the helper kernels (`_call`) and `sync`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import numpy as np

from cuda_llm_lsp.evaluate import device_checks
from cuda_llm_lsp.evaluate.check_plan import (
    BytesSlots,
    ChangedSlots,
    CheckPlan,
    GuardCheck,
    InputCheck,
    OutputCheck,
    OutputSlots,
    Slots,
)
from cuda_llm_lsp.evaluate.compare import (
    GUARD_BYTE,
    ChangeSummary,
    GuardSummary,
    OutputSummary,
    is_float,
    scale_tolerance,
    storage_dtype,
    typical_magnitude,
)
from cuda_llm_lsp.evaluate.protocol import Buffer, Checks, RunReply
from cuda_llm_lsp.evaluate.worker_driver import code


@dataclass
class Placed:
    """One launch's buffers on the device: data pointers, allocations (guards included), each
    buffer's guard band, the copies of `in` buffers taken before the launch, and the
    allocations kept after it."""

    guard: int  # the smallest guard band (0: none, the sanitizer's exact sizes)
    checked: bool  # copies of `in` buffers are taken (to check them unchanged)
    ptrs: dict[str, int] = field(default_factory=dict)
    bases: dict[str, tuple[int, int]] = field(default_factory=dict)
    guards: dict[str, int] = field(default_factory=dict)
    pristine: dict[str, int] = field(default_factory=dict)
    allocations: list[tuple[int, int]] = field(default_factory=list)
    kept: list[int] = field(default_factory=list)


CHECK_TIMEOUT_S = 60.0  # the worker's own kernels (inputs, checks) over the largest buffers
NO_MATCH = (1 << 64) - 1  # a "poison" no element of 4 bytes or less can hold (no unwritten check)


def _poison_value(buf: Buffer) -> int:
    """The run's poison as the checks compare it (an output pre-filled instead: no poison)."""
    return int.from_bytes(buf.poison, "little") if buf.poison is not None else NO_MATCH


def _needs_worst(check: OutputCheck, slots: Slots) -> bool:
    """A float output off its reference with a finite difference: find the largest's index."""
    return (
        isinstance(slots, OutputSlots)
        and check.kind == "compare"
        and bool(slots.bad)
        and is_float(check.dtype)
        and bool(slots.any_finite)
    )


class DeviceChecks:
    """The checks part of the worker's backend (see the module)."""

    d: Any
    kept: dict[str, dict[str, np.ndarray]]

    def check(self, result: Any, where: str) -> Any:
        raise NotImplementedError

    def sync(self, timeout_s: float) -> None:
        raise NotImplementedError

    def _take(self, nbytes: int) -> int:
        raise NotImplementedError

    def _give(self, allocations: list[tuple[int, int]]) -> None:
        raise NotImplementedError

    def _call(self, name: str, n: int, args: Sequence[tuple[str, int | float]]) -> None:
        raise NotImplementedError

    def _check(self, buffers: Sequence[Buffer], placed: Placed, checks: Checks) -> RunReply:
        """The checks of one run, on the device (`check_plan`); one copy of all their slots
        comes back. A kept run's values come up from host memory into a scratch allocation
        only now, after the run, and are scrubbed off the device before this returns."""
        scratch: list[tuple[int, int]] = []
        try:
            plan = self._plan(buffers, placed, checks, scratch)
            if not plan.checks:
                return RunReply()
            host = np.array(plan.init, dtype=np.uint64)
            dev = self._take(host.nbytes)
            scratch.append((dev, host.nbytes))
            self.check(self.d.cuMemcpyHtoD(dev, host.ctypes.data, host.nbytes), "cuMemcpyHtoD")
            for check in plan.checks:
                if isinstance(check, OutputCheck) and check.scaled:  # the floor needs the scale
                    for launch in check.scale(dev + 8 * check.slot):
                        self._call(*launch)
                self._call(*check.launch(dev + 8 * check.slot))
            self.sync(CHECK_TIMEOUT_S)
            self._read(host, dev)
            worst = [c for c in plan.outputs() if _needs_worst(c, plan.read(c, host))]
            for check in worst:
                self._call(*check.worst(dev + 8 * check.slot))
            if worst:
                self.sync(CHECK_TIMEOUT_S)
                self._read(host, dev)
            return self._summaries(plan, host)
        finally:
            self._give(self._scrub(scratch))

    def _plan(
        self,
        buffers: Sequence[Buffer],
        placed: Placed,
        checks: Checks,
        scratch: list[tuple[int, int]],
    ) -> CheckPlan:
        """The run's checks: guard bands and unchanged inputs of every buffer, then each output
        unwritten, finite and against each kept run (uploaded into `scratch`)."""
        plan = CheckPlan()
        for buf in buffers:
            ptr, band = placed.ptrs[buf.name], placed.guards.get(buf.name, 0)
            if band:
                front = GuardCheck(
                    buf.name, "front", ptr - band, band, GUARD_BYTE, plan.slot(GuardCheck)
                )
                plan.add(front)
                back = replace(
                    front, side="back", start=ptr + buf.nbytes, slot=plan.slot(GuardCheck)
                )
                plan.add(back)
            if buf.is_input and buf.nbytes and buf.name in placed.pristine:
                size = storage_dtype(buf.dtype).itemsize
                before, n = placed.pristine[buf.name], buf.nbytes // size
                slot = plan.slot(InputCheck)
                plan.add(InputCheck(buf.name, buf.dtype, before, ptr, n, size, slot))
        by_name = {b.name: b for b in buffers}
        for buf in (by_name[n] for n in checks.outputs if n in by_name):
            got, n = placed.ptrs[buf.name], buf.nbytes // storage_dtype(buf.dtype).itemsize
            output = partial(
                OutputCheck,
                name=buf.name,
                ref="",
                got=got,
                n=n,
                dtype=buf.dtype,
                poison=_poison_value(buf),
                rtol=checks.rtol,
                atol=checks.atol,
                atol_relative=checks.atol_relative,
            )
            if buf.poison is not None:
                plan.add(output(kind="unwritten", expected=0, slot=plan.slot(OutputCheck)))
            if checks.finite and is_float(buf.dtype):  # itself, atol -1: the finite count
                finite = output(kind="finite", expected=got, slot=plan.slot(OutputCheck))
                plan.add(replace(finite, poison=NO_MATCH, rtol=0.0, atol=-1.0, atol_relative=False))
            for ref in checks.against:
                expected = self._upload_kept(ref, buf, scratch)
                if expected is not None:
                    floor = scale_tolerance(buf.dtype, checks.rtol, checks.atol)
                    slot = plan.slot(OutputCheck)
                    plan.add(
                        output(
                            kind="compare", ref=ref, expected=expected, scale_tol=floor, slot=slot
                        )
                    )
        return plan

    def _upload_kept(self, ref: str, buf: Buffer, scratch: list[tuple[int, int]]) -> int | None:
        """Buffer `buf` of the run kept as `ref`, copied into a scratch allocation (None: the
        run has no such buffer, or one of another size)."""
        kept = self.kept.get(ref)
        if kept is None:
            raise KeyError(f"no run kept as {ref!r} in this worker")
        other = kept.get(buf.name)
        if other is None or other.size != buf.nbytes:
            return None
        dev = self._take(other.size)
        scratch.append((dev, other.size))
        if other.size:
            self.check(self.d.cuMemcpyHtoD(dev, other.ctypes.data, other.size), "cuMemcpyHtoD")
        return dev

    def _scrub(self, allocations: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
        """Zero allocations before they go back to the pool: no output (the oracle's above all)
        stays readable on the device for a later run to find. Returns those zeroed; one that
        could not be (the context is lost after a fault) is freed instead, never pooled."""
        zeroed = []
        for base, nbytes in allocations:
            if not nbytes or int(code(self.d.cuMemsetD8(base, 0, nbytes))) == 0:
                zeroed.append((base, nbytes))
            else:
                self.d.cuMemFree(base)
        return zeroed

    def _read(self, host: np.ndarray, dev: int) -> None:
        self.check(self.d.cuMemcpyDtoH(host.ctypes.data, dev, host.nbytes), "cuMemcpyDtoH")

    def _element(self, ptr: int, index: int, dtype: str) -> Any:
        """One element of a device buffer, as the storage dtype's scalar."""
        sd = storage_dtype(dtype)
        host = np.empty(1, dtype=sd)
        address = ptr + index * sd.itemsize
        self.check(self.d.cuMemcpyDtoH(host.ctypes.data, address, sd.itemsize), "cuMemcpyDtoH")
        return host[0]

    def _summaries(self, plan: CheckPlan, host: np.ndarray) -> RunReply:
        """Each check's slots as `compare`'s summaries; the values at a first bad or changed
        element are read from the device."""
        guards: dict[str, GuardSummary] = {}
        changed: dict[str, ChangeSummary] = {}
        unwritten: dict[str, OutputSummary] = {}
        compared: dict[str, dict[str, OutputSummary]] = {}
        nonfinite: dict[str, int] = {}
        for check in plan.checks:
            slots = plan.read(check, host)
            if isinstance(check, GuardCheck):
                assert isinstance(slots, BytesSlots)
                first = slots.first if slots.changed else 0
                if check.side == "front":
                    guards[check.name] = GuardSummary(slots.changed, first, guard=check.nbytes)
                else:
                    guards[check.name] = replace(
                        guards[check.name],
                        back_changed=slots.changed,
                        back_first=first,
                        back_last=slots.last,
                    )
            elif isinstance(check, InputCheck):
                assert isinstance(slots, ChangedSlots)
                changed[check.name] = self._change_summary(check, slots)
            elif check.kind == "finite":
                assert isinstance(slots, OutputSlots)
                nonfinite[check.name] = check.n - slots.bad  # the bad ones are the finite ones
            elif check.kind == "unwritten":
                assert isinstance(slots, OutputSlots)
                unwritten[check.name] = self._output_summary(check, slots)
            else:
                assert isinstance(slots, OutputSlots)
                compared.setdefault(check.ref, {})[check.name] = self._output_summary(check, slots)
        return RunReply(guards, changed, unwritten, compared, nonfinite)

    def _change_summary(self, check: InputCheck, slots: ChangedSlots) -> ChangeSummary:
        if not slots.changed:
            return ChangeSummary()
        before = self._element(check.before, slots.first, check.dtype)
        after = self._element(check.after, slots.first, check.dtype)
        return ChangeSummary(slots.changed, slots.first, before, after)

    def _output_summary(self, check: OutputCheck, slots: OutputSlots) -> OutputSummary:
        first = slots.unwritten_first if slots.unwritten else 0
        summary = OutputSummary(check.n, slots.unwritten, first, slots.unwritten_last)
        if check.kind == "unwritten":
            return summary
        if is_float(check.dtype):  # the floor's scale and magnitude, the largest difference
            largest = slots.largest if slots.any_finite else None
            typical = typical_magnitude(slots.magnitude_units, slots.scale, check.n)
            summary = replace(summary, largest=largest, scale=slots.scale, typical=typical)
        if not slots.bad:
            return summary
        return replace(
            summary,
            bad=slots.bad,
            first_bad=slots.first_bad,
            worst=slots.worst if slots.worst != device_checks.NO_INDEX else 0,
            expected=self._element(check.expected, slots.first_bad, check.dtype),
            got=self._element(check.got, slots.first_bad, check.dtype),
        )
