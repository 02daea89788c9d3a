"""workspace/executeCommand: the `cudaLlm.*` commands behind the code actions and lenses.

Every command takes one argument `{"uri": ..., "kernel": ...}` (or the two as positional
arguments; `cudaLlm.cancel` without one cancels every job) and returns at once; long work runs
as a background job (`cudaLlm.optimize` / `cudaLlm.benchmark` answer `{"token": ...}`, the
job's progress token).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from lsprotocol import types

from cuda_llm_lsp.lsp import benchmark, optimize, suggestions
from cuda_llm_lsp.lsp.code_actions import add_spec_edit
from cuda_llm_lsp.lsp.server import CudaLlmServer  # at run time: pygls reads the annotations

OPTIMIZE = "cudaLlm.optimize"
BENCHMARK = "cudaLlm.benchmark"
ACCEPT = "cudaLlm.accept"
REJECT = "cudaLlm.reject"
CANCEL = "cudaLlm.cancel"
SHOW = "cudaLlm.showSuggestion"
ADD_SPEC = "cudaLlm.addSpec"
RESOURCES = "cudaLlm.showResources"  # behind the resources code lens
COMMANDS = (OPTIMIZE, BENCHMARK, ACCEPT, REJECT, CANCEL, SHOW, ADD_SPEC, RESOURCES)


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


async def _known_kernel(server: CudaLlmServer, uri: str, kernel: str) -> bool:
    if (await server.kernel(uri, kernel))[1] is None:
        server.message(f"cuda-llm: no kernel named {kernel} in {uri}", types.MessageType.Error)
        return False
    return True


def register(server: CudaLlmServer) -> None:
    def command(name: str) -> Callable[[Callable[..., Awaitable[Any]]], Any]:
        def wrap(handler: Callable[[CudaLlmServer, str, str], Awaitable[Any]]) -> Any:
            async def run(ls: CudaLlmServer, *args: Any) -> Any:
                found = target(ls, args)
                if found is None:
                    return None
                return await handler(ls, *found)

            return server.command(name)(run)

        return wrap

    @command(OPTIMIZE)
    async def do_optimize(ls: CudaLlmServer, uri: str, kernel: str) -> Any:
        if await _known_kernel(ls, uri, kernel):
            job = optimize.start(ls, uri, kernel)
            return {"token": job.token} if job else None
        return None

    @command(BENCHMARK)
    async def do_benchmark(ls: CudaLlmServer, uri: str, kernel: str) -> Any:
        if await _known_kernel(ls, uri, kernel):
            job = benchmark.start(ls, uri, kernel)
            return {"token": job.token} if job else None
        return None

    @server.command(CANCEL)
    async def do_cancel(ls: CudaLlmServer, *args: Any) -> bool:
        """`{uri, kernel}`: that kernel's job; no argument: every job."""
        if not args:
            running = bool(ls.jobs.jobs)
            ls.jobs.cancel_all()
            return running
        found = target(ls, args, need_open=False)
        if found is None:
            return False
        if not ls.jobs.cancel(*found):
            ls.message(f"cuda-llm: nothing is running for {found[1]}")
            return False
        return True

    @command(ACCEPT)
    async def do_accept(ls: CudaLlmServer, uri: str, kernel: str) -> bool:
        return await suggestions.accept(ls, uri, kernel)

    @command(REJECT)
    async def do_reject(ls: CudaLlmServer, uri: str, kernel: str) -> bool:
        return await suggestions.reject(ls, uri, kernel)

    @command(SHOW)
    async def do_show(ls: CudaLlmServer, uri: str, kernel: str) -> bool:
        return await suggestions.show(ls, uri, kernel)

    @command(RESOURCES)
    async def do_resources(ls: CudaLlmServer, uri: str, kernel: str) -> bool:
        """The kernel's resources, spec and last result as a message (the hover, on a click)."""
        from cuda_llm_lsp.lsp.hover import plain_summary

        state = ls.documents.get(uri)
        analysis = state.analysis if state is not None else None
        info = (
            next((i for i in analysis.kernels if i.kernel.name == kernel), None)
            if analysis
            else None
        )
        if info is None:
            if analysis is None:
                ls.message(f"cuda-llm: {uri} is still being compiled; try again in a moment")
                return False
            return await _known_kernel(ls, uri, kernel)
        ls.message(plain_summary(ls, uri, info))
        return True

    @command(ADD_SPEC)
    async def do_add_spec(ls: CudaLlmServer, uri: str, kernel: str) -> bool:
        text, found = await ls.kernel(uri, kernel)
        if found is None:
            return await _known_kernel(ls, uri, kernel)
        if found.spec is not None:
            ls.message(f"cuda-llm: {kernel} already has a test spec")
            return False
        edit = add_spec_edit(ls, uri, text, found)
        if edit is None:
            ls.message(f"cuda-llm: could not draft a spec for {kernel}", types.MessageType.Error)
            return False
        answer = await ls.workspace_apply_edit_async(
            types.ApplyWorkspaceEditParams(edit=edit, label=f"Add test spec for {kernel}")
        )
        return bool(answer.applied)
