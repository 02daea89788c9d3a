"""textDocument/codeAction on a kernel (cursor anywhere inside it).

Offers "Optimize K" (kind refactor.rewrite), "Benchmark K", "Tune K" where its spec declares
tunables; a kernel without a spec gets only "Add test spec for K" (a versioned edit inserting the
draft above the kernel): nothing can be measured or checked without one. Once a suggestion
exists, "Accept optimized K (2.1× faster, 4/4 cases)" (or "Accept tuned K"), "Reject suggestion
for K", "Show suggested K"; "Cancel … of K" while a job runs. Also `cudaLlm.addSpec`: the same
draft as a command. A kernel whose spec block cannot be read gets no job action
(its diagnostics say why). Every kernel gets "Capture test spec for K from program…"
(`cudaLlm.captureSpec`), and one whose spec names a capture "Verify K in program" once
`cudaLlm.captureCommand` is set (`lsp.capture_job`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import cast

from lsprotocol import types

from cuda_llm_lsp.lsp import commands
from cuda_llm_lsp.lsp.positions import split_lines, to_point, to_position
from cuda_llm_lsp.lsp.state import CudaLlmServer
from cuda_llm_lsp.source.draft import draft_spec
from cuda_llm_lsp.source.kernels import Kernel, kernel_at
from cuda_llm_lsp.source.spec import TestSpec, parse_spec
from cuda_llm_lsp.source.text import Point

log = logging.getLogger(__name__)
OPTIMIZE_KIND = types.CodeActionKind.RefactorRewrite
KIND = "refactor.cuda-llm"  # a sub-kind of refactor: shown with the lightbulb


def register(server: CudaLlmServer) -> None:
    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[OPTIMIZE_KIND, KIND], resolve_provider=False),
    )
    async def code_actions(
        ls: CudaLlmServer, params: types.CodeActionParams
    ) -> list[types.CodeAction | types.Command]:
        return await actions(ls, params)

    @commands.kernel_command(server, commands.ADD_SPEC)
    async def add_spec(ls: CudaLlmServer, uri: str, kernel: str) -> bool:
        text, found = await ls.kernel(uri, kernel)
        if found is None:
            return await commands.known_kernel(ls, uri, kernel)
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


async def _kernel_under(
    server: CudaLlmServer, uri: str, position: types.Position
) -> tuple[str, Kernel | None]:
    text, kernels = await server.kernels(uri)
    point = to_point(split_lines(text), position, server.codec)
    return text, kernel_at(kernels, point)


async def actions(
    server: CudaLlmServer, params: types.CodeActionParams
) -> list[types.CodeAction | types.Command]:
    uri = params.text_document.uri
    text, kernel = await _kernel_under(server, uri, params.range.start)
    if kernel is None:
        return []
    name = kernel.name
    args = [{"uri": uri, "kernel": name}]
    found: list[types.CodeAction] = []

    def command(title: str, command: str, kind: str = KIND) -> None:
        found.append(
            types.CodeAction(
                title=title,
                kind=kind,
                command=types.Command(title=title, command=command, arguments=args),
            )
        )

    job = server.jobs.running(uri, name)
    suggestion = server.suggestions.get((uri, name))
    if suggestion is not None:
        by_hand = len(suggestion.notes)  # launch sites its own launch could not rewrite
        hand = f"; change {by_hand} launch site(s) by hand: see Show" if by_hand else ""
        command(f"Accept {suggestion.done} {name} ({suggestion.figures}{hand})", commands.ACCEPT)
        command(f"Reject suggestion for {name}", commands.REJECT)
        command(f"Show suggested {name}", commands.SHOW)
    if job is not None:
        command(f"Cancel {job.kind} of {name}", commands.CANCEL)
    elif kernel.spec is not None:  # without a spec there is nothing to run: add one first
        spec = await _spec(server, uri, text, kernel)
        if spec is not None:  # a spec that cannot be read (its diagnostics say why): no job
            command(f"Optimize {name}", commands.OPTIMIZE, OPTIMIZE_KIND)
            command(f"Benchmark {name}", commands.BENCHMARK)
            command(f"Profile {name}", commands.PROFILE)
            if spec.tunables is not None:
                command(f"Tune {name}", commands.TUNE)
    if kernel.spec is None:
        edit = add_spec_edit(server, uri, text, kernel)
        if edit is not None:
            found.append(types.CodeAction(title=f"Add test spec for {name}", kind=KIND, edit=edit))
    if job is None:  # without `cudaLlm.captureCommand` the command says how to set it
        command(f"Capture test spec for {name} from program…", commands.CAPTURE_SPEC)
        if server.settings.capture_command and kernel.spec is not None:
            spec = await _spec(server, uri, text, kernel)
            if spec is not None and spec.capture:
                command(f"Verify {name} in program (after your rebuild)", commands.VERIFY)
    wanted = params.context.only
    if wanted:
        found = [a for a in found if any(str(a.kind).startswith(str(w)) for w in wanted)]
    return list(found)


async def _spec(server: CudaLlmServer, uri: str, text: str, kernel: Kernel) -> TestSpec | None:
    """The kernel's spec, None when it cannot be read: the analysis's parse when it is of this
    text, else one parse in a thread."""
    state = server.documents.get(uri)
    analysis = state.analysis if state is not None else None
    if analysis is not None and analysis.text == text:
        info = next((i for i in analysis.kernels if i.kernel.name == kernel.name), None)
        if info is not None:
            return cast(TestSpec | None, info.spec)
    try:
        spec, _ = await asyncio.to_thread(parse_spec, kernel, text)
    except Exception:
        log.exception("parse_spec failed for %s", kernel.name)
        return None
    return spec


def add_spec_edit(
    server: CudaLlmServer, uri: str, text: str, kernel: Kernel
) -> types.WorkspaceEdit | None:
    """Insert the draft spec on its own lines above the kernel (versioned where supported)."""
    try:
        draft = draft_spec(kernel, text)
    except Exception:
        log.exception("draft_spec failed for %s", kernel.name)
        return None
    doc = server.document(uri)
    if doc is None:
        return None
    lines = split_lines(text)
    line = kernel.span.start.line
    indent = (
        lines[line][: len(lines[line]) - len(lines[line].lstrip())] if line < len(lines) else ""
    )
    at = to_position(lines, Point(line, 0), server.codec)
    block = "".join(f"{indent}{row}\n" if row else "\n" for row in draft.rstrip("\n").split("\n"))
    insert = types.TextEdit(range=types.Range(start=at, end=at), new_text=block)
    workspace = server.client_capabilities.workspace
    edit_caps = workspace.workspace_edit if workspace else None
    if edit_caps and edit_caps.document_changes:
        return types.WorkspaceEdit(
            document_changes=[
                types.TextDocumentEdit(
                    text_document=types.OptionalVersionedTextDocumentIdentifier(
                        uri=uri, version=doc.version
                    ),
                    edits=[insert],
                )
            ]
        )
    return types.WorkspaceEdit(changes={uri: [insert]})
