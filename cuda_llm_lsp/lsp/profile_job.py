"""`cudaLlm.profile` (Profile K): the kernel's timed case under Nsight Compute, in the background.

The findings land as diagnostics from source `cuda-llm profile` on the lines they concern and
the summary on the kernel's name (`profile_results`); they are dropped once the kernel's text
changes. Without a GPU, ncu or counter permission the job ends with one message saying what to
do. The use case itself is `engine.profile_in_file`, as in `cuda-llm profile`.
"""

from __future__ import annotations

from functools import partial

from cuda_llm_lsp.engine import Refusal, detached, profile_in_file
from cuda_llm_lsp.lsp import commands
from cuda_llm_lsp.lsp.jobs import Job, JobError, JobProgress
from cuda_llm_lsp.lsp.profile_results import ProfileReport
from cuda_llm_lsp.lsp.render import JobRenderer, job_error
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
    text, original = await server.job_kernel(job)
    try:
        profiler = server.profiler_factory(server.settings.gpus)  # the first GPU selected
    except ValueError as exc:  # a `cudaLlm.gpus` that is not GPU numbers
        raise JobError(f"cannot profile {job.kernel}: {exc}") from exc
    render = JobRenderer(server, job, progress, original)
    work = partial(
        profile_in_file,
        text,
        server.path_of(job.uri),
        job.kernel,
        server.settings,
        profiler,
        server.gpus,  # one GPU call at a time: ncu's counters see this kernel alone
        cancel=job.cancel_token,  # Cancel ends ncu and its worker at once
        on_event=render.post,
    )
    result = await detached(work, f"cuda-llm-profile-{job.kernel}")
    if isinstance(result, Refusal) and result.kind == "no_profiler":
        raise JobError(f"cannot profile {job.kernel} here: {result.message}")
    if isinstance(result, Refusal):
        raise job_error(result, "profile")
    server.set_profile(job.uri, ProfileReport(job.kernel, original, result))
    problems = sum(1 for f in result.lines if f.kinds != ("stall_hotspot",))
    return f"{job.kernel}: {result.summary.line()} · {problems} line(s) with a problem"
