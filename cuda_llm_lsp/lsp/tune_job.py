"""`cudaLlm.tune`: starts the Tune job, the search of a kernel's tunables (`tune.NAME`,
`restrict`: docs/design.md "Tuning") on the GPU, in the background.

Runs `tune.search.tune_kernel` on the document's text as it is when the job starts and reports
each configuration through work-done progress. When it ends, the kernel's report carries the
table of configurations (shown in its hover) and the best values become a suggestion: the file's
`#define` defaults, else the spec's lists (`tune.edit.tuned_text`, what `cuda-llm tune --write`
writes), accepted or rejected like an optimized kernel. That edit reaches outside the kernel, so
the suggestion covers the text from the first changed line to the kernel's end (`lead`,
`trail`): Accept refuses when any of it changed. Cancel stops between configurations and
interrupts the one on the GPU; what was measured stays in the hover.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from functools import partial

from lsprotocol import types

from cuda_llm_lsp.engine import Refusal, TuneOutcome, tune_in_file
from cuda_llm_lsp.lsp import commands, results
from cuda_llm_lsp.lsp.jobs import Job, JobProgress
from cuda_llm_lsp.lsp.render import JobRenderer, job_error, offer, run_action
from cuda_llm_lsp.lsp.results import KernelReport, Suggestion
from cuda_llm_lsp.lsp.state import CudaLlmServer
from cuda_llm_lsp.source.spec.tunables import describe
from cuda_llm_lsp.tune.types import Measured, TuneResult

#: Rows of the hover's table; the rest are counted below it.
TABLE_ROWS = 20


def register(server: CudaLlmServer) -> None:
    commands.job_command(server, commands.TUNE, start)


def start(server: CudaLlmServer, uri: str, kernel: str) -> Job | None:
    return server.jobs.start(uri, kernel, "tune", f"Tuning {kernel}", partial(run, server))


async def run(server: CudaLlmServer, job: Job, progress: JobProgress) -> str:
    text, original = await server.job_kernel(job)
    render = JobRenderer(server, job, progress, original)
    try:
        outcome = await run_action(server, job, render, tune_in_file, text, server.gpus_for(job))
    except asyncio.CancelledError:  # cancelled: what the progress heard of stays in the hover
        measured = tuple(render.measured)
        heard = TuneResult(job.kernel, "sample", 0, render.default, measured, None, "cancelled", 0)
        if heard.measured:
            table = markdown_table(heard.ranked(), heard.default)
            _cancelled(server, job, original, len(heard.measured), table)
        raise
    if isinstance(outcome, Refusal):
        raise job_error(outcome, "tune")
    result = outcome.result
    table = markdown_table(result.ranked(), result.default)
    if job.cancelled or outcome.cancelled:  # it stopped before the job's end did
        if result.measured:
            _cancelled(server, job, outcome.original, len(result.measured), table)
        return "cancelled"
    report = KernelReport(
        job.kernel, outcome.original, summary(result), table=table, label=job.label
    )
    server.set_report(job.uri, report)
    return await _offer(server, job, text, outcome)


def _cancelled(server: CudaLlmServer, job: Job, original: str, count: int, table: str) -> None:
    """What was measured before the cancel stays in the hover; nothing is suggested."""
    info = f"{job.kernel}: tuning cancelled after {count} configuration(s)"
    server.set_report(
        job.uri, KernelReport(job.kernel, original, info, table=table, label=job.label)
    )


async def _offer(server: CudaLlmServer, job: Job, text: str, outcome: TuneOutcome) -> str:
    """The best configuration as a suggestion (None passed, or the default is the best: a
    message instead)."""
    result, edit = outcome.result, outcome.edit
    best, default = result.best, result.default
    if best is None:
        server.message(
            job.say(
                f"cuda-llm: {job.kernel}: no configuration passed its checks (see the table "
                "in its hover)"
            ),
            types.MessageType.Warning,
        )
        return "no configuration passed its checks"
    if best.config == default:
        said = f"the default {describe(default)} is the fastest configuration"
        server.message(job.say(f"cuda-llm: {job.kernel}: {said}"))
        return said
    notes = "".join(f"; {note}" for note in outcome.notes)
    if edit is None:  # nothing could be written (a list over several lines)
        server.message(job.say(f"cuda-llm: {job.kernel}: best {describe(best.config)}{notes}"))
        return f"best {describe(best.config)}"
    default_ms = result.default_result.ms if result.default_result else None
    message = (
        f"best {describe(best.config)}: {results.format_ms(best.ms)}, "
        f"{best.speedup or 0:.2f}× the default ({describe(default)}, "
        f"{results.format_ms(default_ms)}); {len(result.measured)} configurations "
        f"({result.strategy}){notes}"
    )
    cases = outcome.spec.case_count  # a finalist passed every case again on new inputs
    suggestion = Suggestion(
        uri=job.uri,
        kernel=job.kernel,
        original=edit.original(text),
        suggested=edit.replacement,
        speedup=best.speedup,
        baseline_ms=default_ms,
        best_ms=best.ms,
        cases_passed=cases,
        cases_total=cases,
        message=message,
        kind="tune",
        lead=edit.lead,
        trail=edit.trail,
        label=job.label,
    )
    return await offer(server, suggestion, message, job)


def summary(result: TuneResult) -> str:
    """'scale: tuned 4 configurations (exhaustive of 4) · best BLOCK=1024 ITEMS=1 500 µs (2.00×
    the default BLOCK=128 ITEMS=1) · 3 correct · spread 2.00× · done' (the report's line)."""
    correct = sum(m.status == "ok" for m in result.measured)
    text = (
        f"{result.kernel}: tuned {len(result.measured)} configurations ({result.strategy} of "
        f"{result.space_size})"
    )
    best = result.best
    if best is None:
        text += " · no configuration passed its checks"
    else:
        text += (
            f" · best {describe(best.config)} {results.format_ms(best.ms)} "
            f"({best.speedup or 0:.2f}× the default {describe(result.default)})"
        )
    text += f" · {correct} correct"
    if result.spread:
        text += f" · spread {result.spread:.2f}×"
    return text + (f" · stopped: {result.stopped}" if result.stopped else " · done")


def markdown_table(ranked: Sequence[Measured], default: Mapping[str, int]) -> str:
    """The configurations as a Markdown table for the hover, in the order given
    (`TuneResult.ranked`: correct ones fastest first)."""
    names = list(default)
    lines = [
        "| " + " | ".join([*names, "status", "ms", "vs default"]) + " |",
        "|" + "---:|" * len(names) + "---|---:|---:|",
    ]
    for m in ranked[:TABLE_ROWS]:
        status = results.status_text(m.status) + (" (final)" if m.finalist else "")
        if dict(m.config) == dict(default):
            status += " · default"
        ms = f"{m.ms:.4g}" if m.ms is not None else "-"
        speed = f"{m.speedup:.2f}×" if m.speedup is not None else "-"
        values = [str(m.config.get(name, "")) for name in names]
        lines.append("| " + " | ".join([*values, status, ms, speed]) + " |")
    if len(ranked) > TABLE_ROWS:
        lines.append(f"\n… and {len(ranked) - TABLE_ROWS} more configurations")
    return "\n".join(lines)
