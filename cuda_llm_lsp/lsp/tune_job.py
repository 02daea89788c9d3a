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
import threading
from collections.abc import Callable, Mapping, Sequence
from functools import partial

from lsprotocol import types

from cuda_llm_lsp.evaluate.inputs import InputError
from cuda_llm_lsp.evaluate.types import BaselineFailed, Evaluator
from cuda_llm_lsp.fsr.apply import changed_region
from cuda_llm_lsp.lsp import commands, results
from cuda_llm_lsp.lsp.jobs import Job, JobError, JobProgress, no_gpu_is_a_job_error
from cuda_llm_lsp.lsp.results import KernelReport, Suggestion
from cuda_llm_lsp.lsp.state import CudaLlmServer
from cuda_llm_lsp.source.kernels import Kernel
from cuda_llm_lsp.source.spec import TestSpec, parse_spec
from cuda_llm_lsp.source.spec.tunables import describe
from cuda_llm_lsp.source.text import offset_of
from cuda_llm_lsp.tune.edit import tuned_text
from cuda_llm_lsp.tune.search import (
    Measured,
    TuneError,
    TuneProgress,
    TuneRequest,
    TuneResult,
    tune_kernel,
)

#: Rows of the hover's table; the rest are counted below it.
TABLE_ROWS = 20


def register(server: CudaLlmServer) -> None:
    commands.job_command(server, commands.TUNE, start)


def start(server: CudaLlmServer, uri: str, kernel: str) -> Job | None:
    return server.jobs.start(uri, kernel, "tune", f"Tuning {kernel}", partial(run, server))


async def run(server: CudaLlmServer, job: Job, progress: JobProgress) -> str:
    text, kernel = await server.job_kernel(job)
    original = kernel.span.slice(text)
    spec, problems = await asyncio.to_thread(parse_spec, kernel, text)
    if spec is None:
        if problems:
            raise JobError(
                f"the test spec of {job.kernel} has errors (see the diagnostics); fix them first"
            )
        raise JobError(f"{job.kernel} has no test spec to tune: add one with tune.NAME = [values]")
    if spec.tunables is None:
        raise JobError(
            f"{job.kernel}'s spec declares no tunables: add tune.NAME = [values] and use NAME "
            "in grid/block/smem and the kernel"
        )
    evaluator = await server.job_evaluator(job, "tune")  # cancel stops the GPU work at once
    request = TuneRequest(text, job.kernel, spec, server.settings, server.path_of(job.uri))
    loop = asyncio.get_running_loop()
    seen: list[Measured] = []

    def report(p: TuneProgress) -> None:  # on the server's loop
        if job.cancelled:  # the search's thread winds down on its own: its late news is dropped
            return
        seen.append(p.latest)
        said = f"{p.done}/{p.planned} · {_one_line(p.latest)}"
        progress.report(said, p.done * 100 // max(p.planned, 1))

    def on_progress(p: TuneProgress) -> None:  # on the search's thread
        loop.call_soon_threadsafe(report, p)

    progress.report(f"{spec.tunables.space_size} configurations before restrictions", 0)
    try:
        with no_gpu_is_a_job_error(job, "tune"):
            result = await asyncio.to_thread(
                _search, request, evaluator, job.cancel_event, on_progress
            )
    except asyncio.CancelledError:
        _cancelled(server, job, original, _partial(job.kernel, spec.tunables.default, seen))
        raise
    if job.cancelled or result.stopped == "cancelled":  # it stopped before the job's end did
        _cancelled(server, job, original, result)
        return "cancelled"
    table = markdown_table(result.ranked(), result.default)
    server.set_report(
        job.uri, KernelReport(job.kernel, original, summary(result), table=table, label=job.label)
    )
    return await _offer(server, job, text, kernel, spec, result)


def _cancelled(server: CudaLlmServer, job: Job, original: str, result: TuneResult) -> None:
    """What was measured before the cancel stays in the hover; nothing is suggested."""
    if result.measured:
        info = f"{job.kernel}: tuning cancelled after {len(result.measured)} configuration(s)"
        table = markdown_table(result.ranked(), result.default)
        server.set_report(
            job.uri, KernelReport(job.kernel, original, info, table=table, label=job.label)
        )


def _partial(kernel: str, default: Mapping[str, int], seen: Sequence[Measured]) -> TuneResult:
    """What the progress reported of a search whose result never came (its task was
    cancelled), as a stopped result: the table ranks it as any other (`TuneResult.ranked`)."""
    return TuneResult(kernel, "sample", 0, dict(default), tuple(seen), None, "cancelled", 0.0)


def _search(
    request: TuneRequest,
    evaluator: Evaluator,
    cancel: threading.Event,
    on_progress: Callable[[TuneProgress], None],
) -> TuneResult:
    """The search, in a thread; problems that stop it before it starts are the job's error."""
    try:
        return tune_kernel(request, evaluator, on_progress=on_progress, cancel=cancel)
    except (TuneError, BaselineFailed, InputError) as exc:
        raise JobError(f"cannot tune {request.kernel}: {exc}") from exc


async def _offer(
    server: CudaLlmServer, job: Job, text: str, kernel: Kernel, spec: TestSpec, result: TuneResult
) -> str:
    """The best configuration as a suggestion (None passed, or the default is the best: a
    message instead)."""
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
    edit = tuned_text(text, kernel, spec, best.config)
    notes = "".join(f"; {note}" for note in edit.notes)
    if edit.text == text:  # nothing could be written (a list over several lines)
        server.message(job.say(f"cuda-llm: {job.kernel}: best {describe(best.config)}{notes}"))
        return f"best {describe(best.config)}"
    start, end, new_end = _region(text, edit.text, kernel)
    kernel_start, kernel_end = offset_of(text, kernel.span.start), offset_of(text, kernel.span.end)
    default_ms = result.default_result.ms if result.default_result else None
    message = (
        f"best {describe(best.config)}: {results.format_ms(best.ms)}, "
        f"{best.speedup or 0:.2f}× the default ({describe(default)}, "
        f"{results.format_ms(default_ms)}); {len(result.measured)} configurations "
        f"({result.strategy}){notes}"
    )
    suggestion = Suggestion(
        uri=job.uri,
        kernel=job.kernel,
        original=text[start:end],
        suggested=edit.text[start:new_end],
        speedup=best.speedup,
        baseline_ms=default_ms,
        best_ms=best.ms,
        cases_passed=spec.case_count,  # a finalist passed every case again on new inputs
        cases_total=spec.case_count,
        message=message,
        kind="tune",
        lead=kernel_start - start,
        trail=end - kernel_end,
        label=job.label,
    )
    server.suggestions[(job.uri, job.kernel)] = suggestion
    if server.wants_suggestion_notification():
        await server.notify_suggestion(suggestion)  # the client's diff, before the progress ends
    else:
        server.message(
            job.say(
                f"cuda-llm: {job.kernel}: {message}. Use the code action 'Accept tuned "
                f"{job.kernel}' to make it the default, 'Show suggested {job.kernel}' to review "
                f"it, or 'Reject suggestion for {job.kernel}'."
            )
        )
    return f"{suggestion.figures}: suggestion ready"


def _region(old: str, new: str, kernel: Kernel) -> tuple[int, int, int]:
    """(start, end) in `old` and the end in `new` of the text the edit changes
    (`changed_region`, which covers the kernel's definition), from the start of its first line;
    outside it the two texts are the same."""
    keep = (offset_of(old, kernel.span.start), offset_of(old, kernel.span.end))
    region = changed_region(old, new, keep)
    start = max(old.rfind("\n", 0, region.start), old.rfind("\r", 0, region.start)) + 1
    return start, region.end, region.end + len(new) - len(old)


def _one_line(m: Measured) -> str:
    if m.status != "ok":
        first = m.message.splitlines()[0] if m.message else ""
        return f"{describe(m.config)}: {results.status_text(m.status)}" + (
            f": {first}" if first else ""
        )
    return f"{describe(m.config)}: {results.format_ms(m.ms)} ({m.speedup or 0:.2f}×)"


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
