"""`cudaLlm.benchmark`: starts the Benchmark job, the kernel's spec cases and timed case on the
GPU (one of `cudaLlm.gpus`, or of `cudaLlm.cluster`), in the background.

The result lands as an Information diagnostic on the kernel's name
(`transpose: 0.311 ms ±0.4% · 215 GB/s (7% of copy peak) · 4/4 cases pass`).
"""

from __future__ import annotations

from functools import partial

from cuda_llm_lsp.engine import Refusal, benchmark_in_file
from cuda_llm_lsp.engine.outcomes import summary_line
from cuda_llm_lsp.lsp import commands, results
from cuda_llm_lsp.lsp.jobs import Job, JobProgress
from cuda_llm_lsp.lsp.render import JobRenderer, job_error, run_action
from cuda_llm_lsp.lsp.state import CudaLlmServer


def register(server: CudaLlmServer) -> None:
    commands.job_command(server, commands.BENCHMARK, start)


def start(server: CudaLlmServer, uri: str, kernel: str) -> Job | None:
    title = f"Benchmarking {kernel}"
    return server.jobs.start(uri, kernel, "benchmark", title, partial(run, server))


async def run(server: CudaLlmServer, job: Job, progress: JobProgress) -> str:
    text, original = await server.job_kernel(job)
    render = JobRenderer(server, job, progress, original)
    outcome = await run_action(server, job, render, benchmark_in_file, text, server.gpus_for(job))
    if isinstance(outcome, Refusal):
        raise job_error(outcome, "benchmark")
    result = outcome.result
    line = summary_line(job.kernel, result)
    if result.gpu:  # several GPUs (`cudaLlm.gpus`, `cudaLlm.cluster`): the one that measured it
        line += f" · on {result.gpu.split(' ')[0]}"
    hint = None
    if result.status != "ok":
        hint = f"{results.status_text(result.status)}: {result.message}"
    report = results.KernelReport(job.kernel, outcome.original, line, hint, label=job.label)
    server.set_report(job.uri, report)
    return line
