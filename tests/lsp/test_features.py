"""Code lenses, hover and document symbols on the kernels of a file (UTF-16 columns included)."""

from __future__ import annotations

import asyncio
import time

from lsprotocol import types

from tests.lsp.conftest import DATA, EditorClient, lsp_fixture
from tests.support.load import slack

client = lsp_fixture()


async def lenses_with_figures(client: EditorClient, uri: str) -> list[types.CodeLens]:
    """The lenses once code generation, which follows the diagnostics in the background, has
    given every kernel its figures (until then they say "updating")."""
    deadline = time.monotonic() + 30
    while True:
        lenses = await client.text_document_code_lens_async(
            types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )
        titles = [lens.command.title for lens in lenses if lens.command]
        if titles and not any("updating" in t for t in titles):
            return lenses
        assert time.monotonic() < deadline, titles
        await asyncio.sleep(0.05)


async def test_document_symbols_list_kernels_in_the_negotiated_encoding(
    client: EditorClient,
) -> None:
    uri = client.open(DATA / "saxpy.cu")
    symbols = await client.text_document_document_symbol_async(
        types.DocumentSymbolParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    assert [s.name for s in symbols] == ["saxpy", "scale_rows"]
    line_text = client.text(uri).split("\n")[20]
    scale = symbols[1]
    assert scale.selection_range.start.line == 20
    assert scale.selection_range.start.character == client.units(
        line_text[: line_text.index("scale_rows")]
    )
    assert scale.kind == types.SymbolKind.Function


async def test_code_lens_shows_resources_and_commands(client: EditorClient) -> None:
    uri = client.open(DATA / "saxpy.cu")
    await client.diagnostics_for(uri, 1)
    lenses = await lenses_with_figures(client, uri)
    titles = [lens.command.title for lens in lenses if lens.command]
    assert any(t.startswith("saxpy · ") and " regs · " in t and "B smem" in t for t in titles), (
        titles
    )
    assert any(t.startswith("scale_rows · ") and " regs" in t for t in titles), titles
    commands = {lens.command.command for lens in lenses if lens.command}
    assert {"cudaLlm.optimize", "cudaLlm.benchmark"} <= commands
    saxpy_line = (
        client.text(uri)
        .split("\n")
        .index(next(line for line in client.text(uri).split("\n") if "void saxpy" in line))
    )
    assert all(lens.range.start.line in (saxpy_line, 20) for lens in lenses)


async def test_lenses_appear_after_opening_without_an_edit(client: EditorClient) -> None:
    workspace = client.capabilities.workspace if client.capabilities else None
    lens = workspace.code_lens if workspace else None
    if not (lens and lens.refresh_support):
        return  # such a client asks for lenses again on its own
    uri = client.open(DATA / "saxpy.cu")
    await client.wait_for(lambda: client.lens_refreshes)  # the first analysis asks for them
    await client.diagnostics_for(uri, 1)
    lenses = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    assert any(lens.command and lens.command.command == "cudaLlm.optimize" for lens in lenses)


async def test_clicking_the_resources_lens_shows_the_kernel_summary(client: EditorClient) -> None:
    uri = client.open(DATA / "saxpy.cu")
    await client.diagnostics_for(uri, 1)
    lenses = await lenses_with_figures(client, uri)
    (resources,) = [
        lens.command
        for lens in lenses
        if lens.command and lens.command.title.startswith("saxpy · ")
    ]
    assert resources.command == "cudaLlm.showResources"
    assert list(resources.arguments or []) == [{"uri": uri, "kernel": "saxpy"}]
    assert await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=resources.command, arguments=resources.arguments)
    )
    said = await client.wait_for(
        lambda: [m for m in client.messages if m.message.startswith("cuda-llm: saxpy · ")]
    )
    assert " regs · " in said[-1].message and "Test spec: " in said[-1].message
    assert "*" not in said[-1].message and "\n" not in said[-1].message


async def test_hover_on_kernel_name_shows_resources_and_spec(client: EditorClient) -> None:
    uri = client.open(DATA / "saxpy.cu")
    await client.diagnostics_for(uri, 1)
    await lenses_with_figures(client, uri)
    lines = client.text(uri).split("\n")
    line = next(i for i, t in enumerate(lines) if "void saxpy" in t)
    started = time.monotonic()
    hover = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=line, character=lines[line].index("saxpy") + 2),
        )
    )
    assert time.monotonic() - started < 1.0 * slack()
    assert hover is not None
    text = hover.contents.value
    assert "regs" in text and "Test spec: 3 cases" in text and "n=1048576" in text


async def test_hover_elsewhere_is_empty(client: EditorClient) -> None:
    uri = client.open(DATA / "saxpy.cu")
    await client.diagnostics_for(uri, 1)
    hover = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=0, character=3),
        )
    )
    assert hover is None
