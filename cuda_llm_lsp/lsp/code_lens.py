"""textDocument/codeLens: per kernel, its resources and the Optimize / Benchmark commands (a
kernel without a test spec: "Add test spec" instead, as its code actions; none for a kernel whose
spec block cannot be read); and `cudaLlm.showResources`, the resources lens's command.

Clicking the resources lens shows the hover's facts (resources, spec, last result) as a message,
so the lens is never a dead link.

Lenses sit on the kernels of the last analysis; a client that does not ask for code lenses
(Neovim 0.7 without a plugin) simply never calls this. Kernels of the file's headers get their
lens on the `#include` line; the library kernels the nvcc tier found, one summary on line 1.
The state asks clients to refresh them (`CudaLlmServer.refresh_code_lenses`) after an analysis
and when a job starts or ends.
"""

from __future__ import annotations

from lsprotocol import types

from cuda_llm_lsp.engine.analysis import FileAnalysis
from cuda_llm_lsp.lsp import commands
from cuda_llm_lsp.lsp.kernel_facts import info_line, library_list, plain_summary
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
        """The kernel's resources, spec and last result as a message (the hover, on a click);
        a header kernel's resources; the library kernels nvcc compiled (`LIBRARY`)."""
        state = ls.documents.get(uri)
        analysis = state.analysis if state is not None else None
        if analysis is None:
            ls.message(f"cuda-llm: {uri} is still being compiled; try again in a moment")
            return False
        if kernel == LIBRARY and analysis.library_kernels:
            ls.message("cuda-llm: kernels nvcc compiled from libraries: " + "; ".join(
                library_list(analysis.library_kernels).splitlines()
            ))  # fmt: skip
            return True
        info = next((i for i in analysis.kernels if i.kernel.name == kernel), None)
        if info is not None:
            ls.message(plain_summary(info, ls.reports.get((uri, kernel))))
            return True
        header = next((h for h in analysis.header_kernels if h.info.kernel.name == kernel), None)
        if header is not None:
            ls.message(f"cuda-llm: {header.header}: {info_line(header.info)}")
            return True
        return await commands.known_kernel(ls, uri, kernel)


#: The resources lens's `kernel` argument for the library kernels' summary lens.
LIBRARY = "(library kernels)"


def lenses(server: CudaLlmServer, uri: str, analysis: FileAnalysis) -> list[types.CodeLens]:
    lines = split_lines(analysis.text)
    found = _compiled_elsewhere(uri, analysis)
    for info in analysis.kernels:
        name = info.kernel.name
        where = to_range(lines, info.kernel.name_span, server.codec)
        args = [{"uri": uri, "kernel": name}]
        running = server.jobs.running(uri, name)
        found.append(
            types.CodeLens(
                range=where,
                command=types.Command(
                    title=info_line(info),
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
        if info.kernel.via_macro:
            continue  # its `__global__` comes from a macro: figures, but no GPU job finds it
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


def _compiled_elsewhere(uri: str, analysis: FileAnalysis) -> list[types.CodeLens]:
    """Resources lenses for kernels defined outside the file: a header's kernel on the
    `#include` that brings it in; the library kernels nvcc compiled, summed up on line 1."""
    found: list[types.CodeLens] = []
    for h in analysis.header_kernels:
        row = max(0, h.include_line - 1)
        found.append(
            types.CodeLens(
                range=types.Range(start=types.Position(row, 0), end=types.Position(row, 0)),
                command=types.Command(
                    title=f"{h.header}: {info_line(h.info)}",
                    command=commands.RESOURCES,
                    arguments=[{"uri": uri, "kernel": h.info.kernel.name}],
                ),
            )
        )
    library = analysis.library_kernels
    if library:
        registers = sorted(k.resources.registers for k in library)
        spread = (
            f"{registers[0]}–{registers[-1]}" if registers[0] != registers[-1] else registers[0]
        )
        found.append(
            types.CodeLens(
                range=types.Range(start=types.Position(0, 0), end=types.Position(0, 0)),
                command=types.Command(
                    title=f"nvcc: {len(library)} library kernels · {spread} regs",
                    command=commands.RESOURCES,
                    arguments=[{"uri": uri, "kernel": LIBRARY}],
                ),
            )
        )
    return found
