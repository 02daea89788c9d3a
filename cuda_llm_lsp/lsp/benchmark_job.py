"""`cudaLlm.benchmark`: starts the Benchmark job, the kernel's spec cases and timed case on the
GPU (one of `cudaLlm.gpus`, or of `cudaLlm.cluster`), in the background.

The result lands as an Information diagnostic on the kernel's name
(`transpose: 0.311 ms ±0.4% · 215 GB/s (7% of copy peak) · 4/4 cases pass`).
"""

from __future__ import annotations

import asyncio
from functools import partial

from cuda_llm_lsp.evaluate.candidate import build_binary
from cuda_llm_lsp.evaluate.format import summary_line
from cuda_llm_lsp.evaluate.types import KernelBinary
from cuda_llm_lsp.lsp import commands, results
from cuda_llm_lsp.lsp.jobs import Job, JobError, JobProgress, no_gpu_is_a_job_error
from cuda_llm_lsp.lsp.state import CudaLlmServer
from cuda_llm_lsp.source.spec import parse_spec


def register(server: CudaLlmServer) -> None:
    commands.job_command(server, commands.BENCHMARK, start)


def start(server: CudaLlmServer, uri: str, kernel: str) -> Job | None:
    title = f"Benchmarking {kernel}"
    return server.jobs.start(uri, kernel, "benchmark", title, partial(run, server))


async def run(server: CudaLlmServer, job: Job, progress: JobProgress) -> str:
    text, kernel = await server.job_kernel(job)
    original = kernel.span.slice(text)
    spec, problems = await asyncio.to_thread(parse_spec, kernel, text)
    if spec is None:
        if problems:
            raise JobError(
                f"the test spec of {job.kernel} has errors (see the diagnostics); fix them first"
            )
        raise JobError(
            f"{job.kernel} has no test spec: use the code action 'Add test spec for "
            f"{job.kernel}' and review the draft"
        )
    path = server.path_of(job.uri)
    evaluator = await server.job_evaluator(job, "benchmark")
    with no_gpu_is_a_job_error(job, "benchmark"):  # built for the GPU that judges it
        facts = await asyncio.to_thread(evaluator.device_facts)
    progress.report("compiling")
    built = await asyncio.to_thread(
        build_binary, text, path, job.kernel, server.settings, arch=facts.arch
    )
    if not isinstance(built, KernelBinary):
        raise JobError(f"{job.kernel} does not build: {built.message}")
    progress.report(f"running {spec.case_count} cases on the GPU", 30)
    with no_gpu_is_a_job_error(job, "benchmark"):
        result = await asyncio.to_thread(
            evaluator.benchmark, built, spec, spec_dir=path.parent if path else None
        )
    line = summary_line(job.kernel, result)
    if result.gpu:  # several GPUs (`cudaLlm.gpus`, `cudaLlm.cluster`): the one that measured it
        line += f" · on {result.gpu.split(' ')[0]}"
    hint = (
        None if result.status == "ok" else f"{results.status_text(result.status)}: {result.message}"
    )
    server.set_report(
        job.uri, results.KernelReport(job.kernel, original, line, hint, label=job.label)
    )
    return line
