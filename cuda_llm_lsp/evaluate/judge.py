"""The evaluation rules (docs/design.md): what a launch's buffers say, and which status wins.

Per case of `evaluate` (the original kernel is the oracle), in order of precedence:
  launch_error > timeout > fault          the run itself failed (the worker reports these)
  > out_of_bounds                          a guard byte around any buffer changed
  > input_modified                         an `in` buffer came back different
  > unwritten_output                       an output element still holds the poison
  > wrong_output                           outside rtol/atol of the oracle
  > nondeterministic                       a second run on the same inputs differs
then, on the timed (last) case only, after interleaved timing with the oracle, on the very
device buffers the candidate was timed on (same allocations, same pointers):
  > stale_after_timing                     the last timed launch's outputs are wrong or
                                           unwritten (outputs are re-poisoned before every
                                           timed launch; skipped when the spec has an inout
                                           buffer, whose values evolve across launches), or a
                                           run on NEW input values written into those buffers
                                           (outputs poisoned, inout reset) is wrong;
  (out_of_bounds / input_modified / fault / timeout there keep their own status.)

Pure: the worker's replies and the host inputs in, `Finding`s out; no process, no CUDA. The
per-buffer checks and their wording are `compare`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import cast

import numpy as np

from cuda_llm_lsp.evaluate.compare import (
    GUARD_BYTES,
    OK,
    Finding,
    check_guards,
    check_unchanged,
    compare_output,
    split_guarded,
    storage_dtype,
    unwritten_mask,
)
from cuda_llm_lsp.evaluate.protocol import Failure, Recheck
from cuda_llm_lsp.evaluate.types import Status
from cuda_llm_lsp.source.spec import Case, TestSpec

# after the timing, these keep their own status; any other problem is `stale_after_timing`
_OWN_STATUS_AFTER_TIMING = ("timeout", "fault", "launch_error", "out_of_bounds", "input_modified")


@dataclass(frozen=True)
class LaunchOutcome:
    """One kernel launch's outcome on one case, as the judge reads it."""

    status: Status | None  # launch_error / timeout / fault, or None when it ran
    message: str
    outputs: Mapping[str, np.ndarray]  # storage dtype, data only
    finding: Finding  # guards / inputs-unchanged problems (OK if none)


def failed_launch(failure: Failure, where: str) -> LaunchOutcome:
    # the worker reports launch_error, timeout and fault for a launch ("error" raised before)
    return LaunchOutcome(cast(Status, failure.status), f"{where}: {failure.message}", {}, OK)


def read_launch(
    spec: TestSpec,
    case: Case,
    inputs: Mapping[str, np.ndarray],
    buffers: Mapping[str, bytes],
    where: str,
) -> LaunchOutcome:
    """The worker's guarded buffers -> outputs, and guard / input-unchanged findings.
    Buffers the worker did not send back (`Recheck.last`: outputs only) are skipped."""
    outputs: dict[str, np.ndarray] = {}
    guard_finding = changed_finding = OK  # the first of each: out_of_bounds wins
    for arg in spec.args:
        if not arg.is_pointer or arg.name not in buffers:
            continue
        dtype = arg.dtype or "float32"
        sd = storage_dtype(dtype)
        count = int(case.counts.get(arg.name, 0))
        raw = buffers[arg.name]
        unchanged = arg.role == "in" and len(raw) == 2 * GUARD_BYTES and count > 0
        nbytes = 0 if unchanged else count * sd.itemsize
        guard = check_guards(arg.name, raw, nbytes, sd.itemsize, where)
        if guard_finding is OK:
            guard_finding = guard
        if unchanged:
            continue
        data = np.frombuffer(split_guarded(raw, nbytes)[1], dtype=sd)
        if arg.name in inputs and arg.role == "in":
            if changed_finding is OK:
                changed_finding = check_unchanged(arg.name, inputs[arg.name], data, where)
        else:
            outputs[arg.name] = data
    finding = guard_finding if guard_finding is not OK else changed_finding
    return LaunchOutcome(None, "", outputs, finding)


def output_args(spec: TestSpec) -> list[tuple[str, str]]:
    """(name, element type) of the buffers compared after a run."""
    names = spec.outputs or tuple(
        a.name for a in spec.args if a.is_pointer and a.role in ("out", "inout")
    )
    result = []
    for name in names:
        arg = spec.arg(name)
        if arg is not None and arg.is_pointer:
            result.append((name, arg.dtype or "float32"))
    return result


def compare_outputs(
    spec: TestSpec,
    case: Case,
    expected: LaunchOutcome,
    got: LaunchOutcome,
    where: str,
    what: str = "expected",
) -> Finding:
    """The first output of `got` that is unwritten or outside tolerance of `expected`'s."""
    for name, dtype in output_args(spec):
        if name not in expected.outputs or name not in got.outputs:
            continue
        f = compare_output(
            name, expected.outputs[name], got.outputs[name], dtype, rtol=spec.rtol,
            atol=spec.atol, where=where, sizes=case.sizes, what=what,
        )  # fmt: skip
        if f is not OK:
            return f
    return OK


def unwritten_outputs(spec: TestSpec, run: LaunchOutcome, where: str) -> Finding:
    for name, dtype in output_args(spec):
        if name in run.outputs:
            mask = unwritten_mask(run.outputs[name], dtype)
            if mask.any():
                idx = np.flatnonzero(mask)
                return Finding(
                    "unwritten_output",
                    f"{where}: {idx.size} of {mask.size} elements of {name} were never "
                    f"written (first {name}[{int(idx[0])}], last {name}[{int(idx[-1])}])",
                    int(idx.size),
                )
    return OK


def self_check(spec: TestSpec, run: LaunchOutcome, where: str) -> Finding:
    """What a run shows without an oracle: its failure, guards / inputs, unwritten outputs."""
    if run.status is not None:
        return Finding(run.status, run.message)
    if run.finding is not OK:
        return run.finding
    return unwritten_outputs(spec, run, where)


def against_oracle(
    spec: TestSpec, case: Case, oracle: LaunchOutcome, run: LaunchOutcome, where: str
) -> Finding:
    """A run's failure, guards / inputs, then its outputs against the oracle's."""
    if run.status is not None:
        return Finding(run.status, run.message)
    if run.finding is not OK:
        return run.finding
    return compare_outputs(spec, case, oracle, run, where)


def first_run(
    spec: TestSpec, case: Case, oracle: LaunchOutcome, first: LaunchOutcome, where: str
) -> Finding:
    """The candidate's first run on a case (a problem's status is final)."""
    problem = against_oracle(spec, case, oracle, first, where)
    if problem is not OK and problem.status is None:
        return replace(problem, status="wrong_output")
    return problem


def second_run(
    spec: TestSpec,
    case: Case,
    oracle: LaunchOutcome,
    first: LaunchOutcome,
    second: LaunchOutcome,
    where: str,
) -> Finding:
    """The candidate's second run on the same inputs, after a first one that passed: wrong or
    unwritten now (or different from the first) is `nondeterministic`."""
    problem = against_oracle(spec, case, oracle, second, where + ", second run")
    if problem is OK:
        problem = compare_outputs(spec, case, first, second, where, "first run gave")
        if problem is not OK:
            problem = Finding("nondeterministic", "two runs on the same inputs "
                              f"differ: {problem.message}")  # fmt: skip
    if problem is OK:
        return OK
    status: Status = problem.status or "nondeterministic"
    if status in ("wrong_output", "unwritten_output"):
        return replace(problem, status="nondeterministic", message="the second run on the same "
                       f"inputs differs from the first: {problem.message}")  # fmt: skip
    return replace(problem, status=status)


def repeat_alone(
    spec: TestSpec, case: Case, first: LaunchOutcome, second: LaunchOutcome, where: str
) -> Finding:
    """`benchmark`'s second run of a kernel whose first run passed its self-check."""
    problem = self_check(spec, second, where + ", second run")
    if problem is OK:
        problem = compare_outputs(spec, case, first, second, where, "first run gave")
    if problem.status in ("wrong_output", "unwritten_output"):
        return Finding(
            "nondeterministic", f"the second run on the same inputs differs: {problem.message}"
        )
    return problem


def after_timing(
    spec: TestSpec,
    case: Case,
    recheck: Recheck | None,
    timed_launches: int,
    *,
    inputs: Mapping[str, np.ndarray],
    oracle: LaunchOutcome,
    fresh: Mapping[str, np.ndarray],
    fresh_oracle: LaunchOutcome,
    where: str,
) -> Finding:
    """The timed candidate on its own buffers: the last timed launch against the oracle's run on
    `inputs`, then a run on `fresh` values in the same buffers against `fresh_oracle`."""
    if recheck is None:
        return OK
    problem = OK
    what = ""
    if not any(a.role == "inout" for a in spec.args):
        # outputs were poisoned before every timed launch: the last one must have
        # computed them (no inout buffer evolves across launches, so they are comparable)
        last = read_launch(spec, case, inputs, recheck.last, where)
        problem = against_oracle(spec, case, oracle, last, where)
        what = (f"the last of {timed_launches} timed launches (outputs poisoned before "
                "each, same inputs as the first runs) is wrong")  # fmt: skip
    if problem is OK:
        after = read_launch(spec, case, fresh, recheck.buffers, where + ", recheck")
        problem = against_oracle(spec, case, fresh_oracle, after, where)
        what = (f"after the timing runs ({timed_launches} timed launches), a run on new "
                "input values in the same buffers is wrong")  # fmt: skip
    if problem is OK:
        return OK
    status: Status = problem.status or "stale_after_timing"
    if status not in _OWN_STATUS_AFTER_TIMING:
        status = "stale_after_timing"
    return Finding(status, f"{what}: {problem.message}", problem.bad_count)
