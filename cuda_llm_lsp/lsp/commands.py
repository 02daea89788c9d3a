"""workspace/executeCommand: the `cudaLlm.*` command names and the argument convention they share.

Every command takes one argument `{"uri": ..., "kernel": ...}` (or the two as positional
arguments; `cudaLlm.cancel` without one cancels every job) and returns at once; long work runs
as a background job (`cudaLlm.optimize`, `cudaLlm.benchmark`, `cudaLlm.tune` and
`cudaLlm.profile`, `cudaLlm.captureSpec` and `cudaLlm.verify` answer
`{"token": ...}`, the job's progress token). Each feature registers its own commands with
`kernel_command`; code lenses and code actions name them with these constants.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from lsprotocol import types

from cuda_llm_lsp.lsp.state import CudaLlmServer  # at run time: pygls reads the annotations

OPTIMIZE = "cudaLlm.optimize"
BENCHMARK = "cudaLlm.benchmark"
ACCEPT = "cudaLlm.accept"
REJECT = "cudaLlm.reject"
CANCEL = "cudaLlm.cancel"
SHOW = "cudaLlm.showSuggestion"
ADD_SPEC = "cudaLlm.addSpec"
RESOURCES = "cudaLlm.showResources"  # behind the resources code lens
TUNE = "cudaLlm.tune"
PROFILE = "cudaLlm.profile"
DEMO_EXAMPLE = "cudaLlm.demoExample"  # no arguments: writes and opens the demo's example
CAPTURE_SPEC = "cudaLlm.captureSpec"  # runs `cudaLlm.captureCommand`, offers the spec as an edit
VERIFY = "cudaLlm.verify"  # after Accept and a rebuild: the program again, against the capture
COMMANDS = (
    OPTIMIZE,
    BENCHMARK,
    ACCEPT,
    REJECT,
    CANCEL,
    SHOW,
    ADD_SPEC,
    RESOURCES,
    TUNE,
    PROFILE,
    DEMO_EXAMPLE,
    CAPTURE_SPEC,
    VERIFY,
)

KernelHandler = Callable[[CudaLlmServer, str, str], Awaitable[Any]]


def target(
    server: CudaLlmServer, args: tuple[Any, ...], *, need_open: bool = True
) -> tuple[str, str] | None:
    """(uri, kernel) from the command's arguments, or None after telling the user why not."""
    uri = kernel = None
    if len(args) == 1 and isinstance(args[0], dict):
        uri, kernel = args[0].get("uri"), args[0].get("kernel")
    elif len(args) == 2:
        uri, kernel = args
    if not isinstance(uri, str) or not isinstance(kernel, str):
        server.message(
            'cuda-llm: commands take one argument {"uri": ..., "kernel": ...}',
            types.MessageType.Error,
        )
        return None
    if need_open and server.document(uri) is None:
        server.message(f"cuda-llm: {uri} is not open in the editor", types.MessageType.Error)
        return None
    return uri, kernel


async def known_kernel(server: CudaLlmServer, uri: str, kernel: str) -> bool:
    if (await server.kernel(uri, kernel))[1] is None:
        server.message(f"cuda-llm: no kernel named {kernel} in {uri}", types.MessageType.Error)
        return False
    return True


def kernel_command(server: CudaLlmServer, name: str) -> Callable[[KernelHandler], Any]:
    """Register `handler(server, uri, kernel)` as command `name` of an open document's kernel."""

    def wrap(handler: KernelHandler) -> Any:
        async def run(ls: CudaLlmServer, *args: Any) -> Any:
            found = target(ls, args)
            if found is None:
                return None
            return await handler(ls, *found)

        return server.command(name)(run)

    return wrap


def job_command(
    server: CudaLlmServer, name: str, start: Callable[[CudaLlmServer, str, str], Any]
) -> None:
    """Register command `name` that starts a background job (`start(server, uri, kernel)`) on a
    kernel the document has, answering the job's progress token (None: not started)."""

    @kernel_command(server, name)
    async def run(ls: CudaLlmServer, uri: str, kernel: str) -> Any:
        if await known_kernel(ls, uri, kernel):
            job = start(ls, uri, kernel)
            return {"token": job.token} if job else None
        return None
