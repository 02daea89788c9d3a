"""textDocument/codeLens: per kernel, its resources and the Optimize / Benchmark commands.

Clicking the resources lens runs `cudaLlm.showResources`: the hover's facts (resources, spec,
last result) as a message, so the lens is never a dead link.

Lenses sit on the kernels of the last analysis; a client that does not ask for code lenses
(Neovim 0.7 without a plugin) simply never calls this.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from cuda_llm_lsp.lsp.positions import split_lines, to_range

if TYPE_CHECKING:
    from cuda_llm_lsp.compile.types import Resources
    from cuda_llm_lsp.lsp.server import CudaLlmServer

log = logging.getLogger(__name__)


def resources_line(name: str, resources: Resources | None, why: str = "") -> str:
    """'saxpy · 24 regs · 0 B spill · 0 B smem' (or `why` there are no figures: the analysis's
    `KernelInfo.symbol_note`)."""
    if resources is None:
        return f"{name} · {why or 'no resource figures'}"
    spill = resources.spill_stores + resources.spill_loads
    text = (
        f"{name} · {resources.registers} regs · {spill} B spill · {resources.shared_bytes} B smem"
    )
    if resources.stack_bytes:
        text += f" · {resources.stack_bytes} B stack"
    if resources.constant_bytes:
        text += f" · {resources.constant_bytes} B const"
    return text


def register(server: CudaLlmServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_CODE_LENS)
    def code_lens(ls: CudaLlmServer, params: types.CodeLensParams) -> list[types.CodeLens]:
        uri = params.text_document.uri
        state = ls.documents.get(uri)
        if state is None or state.analysis is None:
            return []
        return lenses(ls, uri, state.analysis)


def refresh(server: CudaLlmServer) -> None:
    """Ask the client to fetch the lenses again (a new analysis, a job started or ended), where
    it supports `workspace/codeLens/refresh`; others ask on their own, e.g. after an edit."""
    workspace = server.client_capabilities.workspace
    lens = workspace.code_lens if workspace else None
    if lens and lens.refresh_support:
        server.spawn(_ask_refresh(server), "code lens refresh")


async def _ask_refresh(server: CudaLlmServer) -> None:
    try:
        await asyncio.wait_for(server.workspace_code_lens_refresh_async(None), 5)
    except Exception as exc:
        log.debug("code lens refresh failed: %s", exc)


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
                    command="cudaLlm.showResources",
                    arguments=args,
                ),
            )
        )
        if running is not None:
            found.append(
                types.CodeLens(
                    range=where,
                    command=types.Command(
                        title=f"Cancel {running.kind}", command="cudaLlm.cancel", arguments=args
                    ),
                )
            )
            continue
        found.append(
            types.CodeLens(
                range=where,
                command=types.Command(title="Optimize", command="cudaLlm.optimize", arguments=args),
            )
        )
        found.append(
            types.CodeLens(
                range=where,
                command=types.Command(
                    title="Benchmark", command="cudaLlm.benchmark", arguments=args
                ),
            )
        )
    return found
