"""`cudaLlm.optimize`: starts the Optimize job, the FSR loop on one kernel of an open document,
in the background.

Runs `engine.optimize_in_file` on the document's text as it is when the job starts, renders
each candidate through work-done progress and the kernel's result diagnostics (`render`), and
on success keeps the winner's edit as a suggestion (never applied without the user's Accept).
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial

from lsprotocol import types

from cuda_llm_lsp.engine import (
    LlmFactory,
    OptimizeOutcome,
    Refusal,
    demo_config,
    demo_for,
    endpoint_key_missing,
    history_for_run,
    make_llm,
    optimize_in_file,
)
from cuda_llm_lsp.engine.build import RunHistory
from cuda_llm_lsp.fsr.types import OptimizeResult, config_from_settings
from cuda_llm_lsp.lsp import commands
from cuda_llm_lsp.lsp.jobs import Job, JobProgress
from cuda_llm_lsp.lsp.render import JobRenderer, job_error, offer, run_action
from cuda_llm_lsp.lsp.results import Suggestion
from cuda_llm_lsp.lsp.state import CudaLlmServer

log = logging.getLogger(__name__)


def register(server: CudaLlmServer) -> None:
    commands.job_command(server, commands.OPTIMIZE, start)


def start(server: CudaLlmServer, uri: str, kernel: str) -> Job | None:
    return server.jobs.start(uri, kernel, "optimize", f"Optimizing {kernel}", partial(run, server))


async def run(server: CudaLlmServer, job: Job, progress: JobProgress) -> str:
    text, original = await server.job_kernel(job)
    settings = server.settings
    gpus = server.gpus_for(job)  # a demo job: the shipped recording's answers
    llm_factory: LlmFactory = server.llm_factory
    history: RunHistory | None = None
    if job.demo:  # the shipped recording answers for the model: no endpoint, no key, no history
        config = demo_config(demo_for(job.kernel), settings)
        llm_factory = make_llm
    else:
        config = config_from_settings(settings)
        history = await history_for_run(lambda exc: log.warning("history unavailable: %s", exc))
    render = JobRenderer(
        server, job, progress, original, config.rounds * config.candidates, config.strategy
    )
    try:
        outcome = await run_action(
            server,
            job,
            render,
            optimize_in_file,
            text,
            config,
            gpus,
            llm_factory=llm_factory,
            history=history,
        )
    except asyncio.CancelledError:
        render.cancelled()
        raise
    if isinstance(outcome, Refusal):
        raise job_error(
            outcome, "optimize", key_missing=not job.demo and endpoint_key_missing(settings)
        )
    result = outcome.result
    render.finish(result)
    if result.cancelled:
        return result.message or "cancelled"
    if outcome.not_applicable is not None:
        said = f"{result.message}; the winner cannot be applied: {outcome.not_applicable}"
        server.message(job.say(f"cuda-llm: {job.kernel}: {said}"), types.MessageType.Warning)
        return f"not applicable: {outcome.not_applicable}"
    if outcome.edit is not None:
        suggestion = _suggestion(job, text, outcome)
        return await offer(server, suggestion, suggestion.measured, job)  # job.say labels it
    kind = types.MessageType.Warning if result.error else types.MessageType.Info
    server.message(job.say(f"cuda-llm: {job.kernel}: {result.message}"), kind)
    return result.message


def _suggestion(job: Job, text: str, outcome: OptimizeOutcome) -> Suggestion:
    result, edit = outcome.result, outcome.edit
    assert edit is not None
    return Suggestion(
        uri=job.uri,
        kernel=job.kernel,
        original=edit.original(text),
        suggested=edit.replacement,
        lead=edit.lead,
        trail=edit.trail,
        notes=edit.notes,
        launch=result.best_launch.describe() if result.best_launch else None,
        speedup=result.speedup,
        baseline_ms=result.baseline_ms,
        best_ms=result.best_ms,
        cases_passed=result.cases_passed,
        cases_total=result.cases_total,
        message=result.message + _launch_note(result, edit.notes),
        run_id=result.run_id,
        label=job.label,
    )


def _launch_note(result: OptimizeResult, notes: tuple[str, ...]) -> str:
    """What the suggestion says of the winner's own launch: its configuration, the spec and
    launch sites changed with it, and the sites to change by hand."""
    if result.best_launch is None:
        return ""
    note = f"; its own launch {result.best_launch.describe()} (spec and launch sites updated)"
    if notes:
        note += "; change by hand: " + "; ".join(notes)
    return note
