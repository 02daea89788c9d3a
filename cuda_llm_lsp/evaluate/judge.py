"""The evaluation rules (docs/design.md): what a launch's buffers say, and which status wins.

Per case of `evaluate` (the original kernel is the oracle), in order of precedence:
  launch_error > timeout > fault          the run itself failed (the worker reports these)
  > out_of_bounds                          a guard byte around any buffer changed
  > input_modified                         an `in` buffer came back different
  > unwritten_output                       an output element still holds the poison
  > wrong_output                           outside rtol/atol of the oracle
  > nondeterministic                       a second run on the same inputs differs
then a run of the last case with outputs pre-filled with zeros, and the hidden generalisation
cases (outputs pre-filled with random values; a case the original fails or makes non-finite is
dropped): wrong or unwritten there is `wrong_output` (a fault keeps its status); then, on the
timed (last) case only, after interleaved timing with the original (every launch on inputs no
launch has had, `inout` restored, outputs poisoned, all outside the timed region):
  > stale_after_timing                     a sampled timed launch (one in each of the first
                                           batches, run on a reference set the original was
                                           run on before) is wrong, unwritten or changed its
                                           inputs, or the last left outputs unwritten;
  (out_of_bounds / input_modified / fault / timeout there keep their own status.)

Pure: the worker's summaries in (it checks on the device, `device_checks`), `Finding`s out; no
process, no CUDA. The per-buffer checks' wording is `compare`'s.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import cast

from cuda_llm_lsp.evaluate.compare import (
    OK,
    Finding,
    storage_dtype,
    word_guards,
    word_output,
    word_unchanged,
    word_unwritten,
)
from cuda_llm_lsp.evaluate.protocol import Failure, RunReply, TimedChecks
from cuda_llm_lsp.evaluate.types import Status
from cuda_llm_lsp.source.spec import Case, TestSpec

# after the timing, these keep their own status; any other problem is `stale_after_timing`
_OWN_STATUS_AFTER_TIMING = ("timeout", "fault", "launch_error", "out_of_bounds", "input_modified")


@dataclass(frozen=True)
class LaunchOutcome:
    """One kernel launch's outcome on one case, as the judge reads it."""

    status: Status | None  # launch_error / timeout / fault, or None when it ran
    message: str
    checks: RunReply  # the worker's summaries
    finding: Finding  # guards / inputs-unchanged problems (OK if none)
    kept: str | None = None  # the name the worker keeps its outputs under


def failed_launch(failure: Failure, where: str) -> LaunchOutcome:
    # the worker reports launch_error, timeout and fault for a launch ("error" raised before)
    status = cast(Status, failure.status)
    return LaunchOutcome(status, f"{where}: {failure.message}", RunReply(), OK)


def read_launch(
    spec: TestSpec, case: Case, checks: RunReply, where: str, kept: str | None = None
) -> LaunchOutcome:
    """The worker's summaries -> guard / input-unchanged findings (the first of each, in the
    order of the arguments; out_of_bounds wins). Buffers the worker did not check (`last`
    after the timing: outputs only) are skipped."""
    guard_finding = changed_finding = OK
    for arg in spec.args:
        if not arg.is_pointer:
            continue
        sd = storage_dtype(arg.dtype or "float32")
        count = int(case.counts.get(arg.name, 0))
        guards = checks.guards.get(arg.name)
        if guards is not None and guard_finding is OK:
            guard_finding = word_guards(arg.name, guards, count * sd.itemsize, sd.itemsize, where)
        changed = checks.changed.get(arg.name)
        if changed is not None and changed_finding is OK:
            changed_finding = word_unchanged(arg.name, changed, count, where)
    finding = guard_finding if guard_finding is not OK else changed_finding
    return LaunchOutcome(None, "", checks, finding, kept)


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
    """The first output of `got` that is unwritten or outside tolerance of `expected`'s (as
    the worker compared them: `got` against the run kept as `expected.kept`)."""
    against = got.checks.compared.get(expected.kept or "", {})
    for name, dtype in output_args(spec):
        if name not in against:
            continue
        f = word_output(
            name,
            against[name],
            dtype,
            rtol=spec.rtol,
            atol=spec.atol,
            where=where,
            sizes=case.sizes,
            what=what,
            atol_relative=spec.atol_relative,
        )
        if f is not OK:
            return f
    return OK


def unwritten_outputs(spec: TestSpec, run: LaunchOutcome, where: str) -> Finding:
    for name, _dtype in output_args(spec):
        summary = run.checks.unwritten.get(name)
        if summary is not None and summary.unwritten:
            return word_unwritten(name, summary, where)
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
            problem = Finding(
                "nondeterministic", f"two runs on the same inputs differ: {problem.message}"
            )
    if problem is OK:
        return OK
    status: Status = problem.status or "nondeterministic"
    if status in ("wrong_output", "unwritten_output"):
        return replace(
            problem,
            status="nondeterministic",
            message=f"the second run on the same inputs differs from the first: {problem.message}",
        )
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


def prefilled_run(
    spec: TestSpec, case: Case, oracle: LaunchOutcome, run: LaunchOutcome, where: str, how: str
) -> Finding:
    """A run whose outputs were pre-filled with plausible values (`how`: "zeros", "random
    values") instead of poison: every element must still come out right (a kernel that writes
    only where it sees the poison fails here)."""
    problem = against_oracle(spec, case, oracle, run, where)
    if problem is OK:
        return OK
    status: Status = problem.status or "wrong_output"
    return Finding(
        status,
        f"with its outputs pre-filled with {how} before the run: {problem.message}",
        problem.bad_count,
    )


def hidden_run(
    spec: TestSpec, case: Case, oracle: LaunchOutcome, run: LaunchOutcome, where: str
) -> Finding:
    """A hidden generalisation case (`where` names its kind and sizes): wrong or unwritten is
    `wrong_output`, a fault keeps its own status."""
    problem = against_oracle(spec, case, oracle, run, where)
    if problem is OK:
        return OK
    status: Status = problem.status or "wrong_output"
    if status == "unwritten_output":
        status = "wrong_output"
    return Finding(status, f"on a {problem.message}", problem.bad_count)


def after_timing(
    spec: TestSpec, case: Case, checks: TimedChecks | None, timed_launches: int, where: str
) -> Finding:
    """The timed candidate: every buffer's guards after all its launches, each sampled launch
    (on a reference set) against the oracle's run on that set with its inputs unchanged, then
    the outputs the last launch left (poisoned before it: unwritten elements)."""
    if checks is None:
        return OK
    what = (
        f"of {timed_launches} timed launches (outputs poisoned before each, new input "
        "values before each)"
    )
    problem = read_launch(spec, case, checks.guards, where).finding
    if problem is OK:
        for index, reply in checks.sampled:
            run = read_launch(spec, case, reply, where)
            problem = run.finding
            for kept in reply.compared:
                if problem is OK:
                    problem = compare_outputs(spec, case, replace(run, kept=kept), run, where)
            if problem is OK:
                problem = unwritten_outputs(spec, run, where)
            if problem is not OK:
                what += (
                    f"; launch {index + 1} ran on a reference set the original was run on "
                    "first: a run on new input values in the same buffers is wrong"
                )
                break
    else:
        what += ", one wrote outside its buffers"
    if problem is OK:
        problem = unwritten_outputs(spec, read_launch(spec, case, checks.last, where), where)
        what += ", the last left its outputs unwritten"
    if problem is OK:
        return OK
    status: Status = problem.status or "stale_after_timing"
    if status not in _OWN_STATUS_AFTER_TIMING:
        status = "stale_after_timing"
    return Finding(status, f"{what}: {problem.message}", problem.bad_count)
