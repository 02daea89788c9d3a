"""window/workDoneProgress/cancel and `cudaLlm.cancel`: stop a kernel's job, or every job.

The Cancel button of a job's progress notification names the job by its progress token; the
command (from a code lens or code action) by `{uri, kernel}`, or with no argument every job.
"""

from __future__ import annotations

from typing import Any

from lsprotocol import types

from cuda_llm_lsp.lsp import commands
from cuda_llm_lsp.lsp.state import CudaLlmServer  # at run time: pygls reads the annotations


def register(server: CudaLlmServer) -> None:
    @server.feature(types.WINDOW_WORK_DONE_PROGRESS_CANCEL)
    def on_cancel(ls: CudaLlmServer, params: types.WorkDoneProgressCancelParams) -> None:
        ls.jobs.cancel_token(str(params.token))

    @server.command(commands.CANCEL)
    async def do_cancel(ls: CudaLlmServer, *args: Any) -> bool:
        """`{uri, kernel}`: that kernel's job; no argument: every job."""
        if not args:
            running = bool(ls.jobs.jobs)
            ls.jobs.cancel_all()
            return running
        found = commands.target(ls, args, need_open=False)
        if found is None:
            return False
        if not ls.jobs.cancel(*found):
            ls.message(f"cuda-llm: nothing is running for {found[1]}")
            return False
        return True
