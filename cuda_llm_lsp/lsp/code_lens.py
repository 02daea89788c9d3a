"""textDocument/codeLens: per kernel, its resources and the Optimize / Benchmark commands (a
kernel without a test spec: "Add test spec" instead, as its code actions; none for a kernel whose
spec block cannot be read); and `cudaLlm.showResources`, the resources lens's command.

Clicking the resources lens shows the hover's facts (resources, spec, last result) as a message,
so the lens is never a dead link.

Lenses sit on the kernels of the last analysis; a client that does not ask for code lenses
(Neovim 0.7 without a plugin) simply never calls this. The state asks clients to refresh them
(`CudaLlmServer.refresh_code_lenses`) after an analysis and when a job starts or ends.
"""

from __future__ import annotations

from typing import Any

from lsprotocol import types

from cuda_llm_lsp.lsp import commands
from cuda_llm_lsp.lsp.kernel_facts import plain_summary, resources_line
from cuda_llm_lsp.lsp.positions import split_lines, to_range
from cuda_llm_lsp.lsp.state import CudaLlmServer


def register(server: CudaLlmServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_CODE_LENS)
    def code_lens(ls: CudaLlmServer, params: types.CodeLensParams) -> list[types.CodeLens]:
        uri = params.text_document.uri
        state = ls.documents.get(uri)
        if state is None or state.analysis is None:
            return []
        return lenses(ls, uri, state.analysis)

    @commands.kernel_command(server, commands.RESOURCES)
    async def show_resources(ls: CudaLlmServer, uri: str, kernel: str) -> bool:
        """The kernel's resources, spec and last result as a message (the hover, on a click)."""
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
            return await commands.known_kernel(ls, uri, kernel)
        ls.message(plain_summary(info, ls.reports.get((uri, kernel))))
        return True


def lenses(server: CudaLlmServer, uri: str, analysis: Any) -> list[types.CodeLens]:
    lines = split_lines(analysis.text)
    found: list[types.CodeLens] = []
    for info in analysis.kernels:
        name = info.kernel.name
        where = to_range(lines, info.kernel.name_span, server.codec)
        args = [{"uri": uri, "kernel": name}]
        running = server.jobs.running(uri, name)
        found.append(
            types.CodeLens(
                range=where,
                command=types.Command(
                    title=resources_line(name, info.resources, info.symbol_note),
                    command=commands.RESOURCES,
                    arguments=args,
                ),
            )
        )
        if running is not None:
            found.append(
                types.CodeLens(
                    range=where,
                    command=types.Command(
                        title=f"Cancel {running.kind}", command=commands.CANCEL, arguments=args
                    ),
                )
            )
            continue
        if info.kernel.spec is None:  # nothing to run without a spec: the draft comes first
            found.append(
                types.CodeLens(
                    range=where,
                    command=types.Command(
                        title="Add test spec", command=commands.ADD_SPEC, arguments=args
                    ),
                )
            )
            continue
        if info.kernel.spec is not None and info.spec is None:
            continue  # a spec that cannot be read (its diagnostics say why): no job
        found.append(
            types.CodeLens(
                range=where,
                command=types.Command(title="Optimize", command=commands.OPTIMIZE, arguments=args),
            )
        )
        found.append(
            types.CodeLens(
                range=where,
                command=types.Command(
                    title="Benchmark", command=commands.BENCHMARK, arguments=args
                ),
            )
        )
        found.append(
            types.CodeLens(
                range=where,
                command=types.Command(title="Profile", command=commands.PROFILE, arguments=args),
            )
        )
    return found
