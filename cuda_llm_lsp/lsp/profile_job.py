"""`cudaLlm.profile` (Profile K): the kernel's timed case under Nsight Compute, in the background.

The findings land as diagnostics from source `cuda-llm profile` on the lines they concern and
the summary on the kernel's name (`profile_results`); they are dropped once the kernel's text
changes. Without a GPU, ncu or counter permission the job ends with one message saying what to
do. The use case itself is `evaluate.line_profile.profile_lines`, as in `cuda-llm profile`.
"""

from __future__ import annotations

import asyncio
from functools import partial

from cuda_llm_lsp.evaluate.line_profile import (
    LineProfile,
    ProfileError,
    ProfileUnavailable,
    profile_lines,
)
from cuda_llm_lsp.lsp import commands
from cuda_llm_lsp.lsp.jobs import Job, JobError, JobProgress
from cuda_llm_lsp.lsp.profile_results import ProfileReport
from cuda_llm_lsp.lsp.state import CudaLlmServer


def register(server: CudaLlmServer) -> None:
    commands.job_command(server, commands.PROFILE, start)


def start(server: CudaLlmServer, uri: str, kernel: str) -> Job | None:
    title = f"Profiling {kernel}"
    return server.jobs.start(uri, kernel, "profile", title, partial(run, server))


async def run(server: CudaLlmServer, job: Job, progress: JobProgress) -> str:
    if server.settings.demo:  # the demo's recording has no profile, and ncu would use a real GPU
        raise JobError(
            f"cannot profile {job.kernel} in the demo: Profile runs Nsight Compute on a real GPU "
            "(turn cudaLlm.demo off on a machine with one)"
        )
    text, kernel = await server.job_kernel(job)
    original = kernel.span.slice(text)
    progress.report("compiling and running the timed case under ncu")
    profiler = server.profiler_factory()
    job.cancel_hooks.append(profiler.cancel)  # Cancel ends ncu and its worker at once
    path = server.path_of(job.uri)

    def profile() -> LineProfile:
        with server.gpu_gate:  # one GPU call at a time: ncu's counters see this kernel alone
            return profile_lines(text, path, job.kernel, server.settings, profiler)

    try:
        result = await asyncio.to_thread(profile)
    except ProfileUnavailable as exc:
        raise JobError(f"cannot profile {job.kernel} here: {exc}") from exc
    except ProfileError as exc:
        raise JobError(f"cannot profile {job.kernel}: {exc}") from exc
    server.set_profile(job.uri, ProfileReport(job.kernel, original, result))
    problems = sum(1 for f in result.lines if f.kinds != ("stall_hotspot",))
    return f"{job.kernel}: {result.summary.line()} · {problems} line(s) with a problem"
