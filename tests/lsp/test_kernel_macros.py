"""A kernel declared through a header's macro (`#define __kernel extern "C" __global__`, as
LAMMPS's lib/gpu does) gets what a plain `__global__` kernel gets in the editor: its lens with
figures, and its document symbol; not the GPU jobs' commands, which find kernels in the text."""

from __future__ import annotations

import asyncio
import time

from lsprotocol import types

from tests.lsp.conftest import DATA, EditorClient, lsp_fixture

client = lsp_fixture()
MAIN = DATA / "macro_kernel" / "main.cu"  # includes macro_kernel/k.h, which defines `__kernel`


async def titles_with_figures(client: EditorClient, uri: str) -> dict[int, list[str]]:
    """The lens titles by line once code generation has given every kernel its figures."""
    deadline = time.monotonic() + 60
    while True:
        lenses = await client.text_document_code_lens_async(
            types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )
        titles: dict[int, list[str]] = {}
        for lens in lenses:
            if lens.command:
                titles.setdefault(lens.range.start.line, []).append(lens.command.title)
        flat = [t for line in titles.values() for t in line]
        if len(titles) == 2 and not any("updating" in t for t in flat):
            return titles
        assert time.monotonic() < deadline, titles
        await asyncio.sleep(0.05)


async def test_a_macro_kernel_gets_its_lens_with_figures_like_a_plain_one(
    client: EditorClient,
) -> None:
    uri = client.open(MAIN)
    diagnostics = await client.diagnostics_for(uri, 1)
    assert not [d for d in diagnostics if d.severity == types.DiagnosticSeverity.Error]
    titles = await titles_with_figures(client, uri)
    assert sorted(titles) == [2, 7], titles
    assert any(t.startswith("scale · ") and " regs" in t for t in titles[2]), titles
    assert any(t.startswith("plain · ") and " regs" in t for t in titles[7]), titles
    # no GPU job finds a macro kernel yet: no command that would answer "no kernel named"
    assert len(titles[2]) == 1 and "Add test spec" in titles[7], titles
    symbols = await client.text_document_document_symbol_async(
        types.DocumentSymbolParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    assert [(s.name, s.selection_range.start.line) for s in symbols] == [
        ("scale", 2),
        ("plain", 7),
    ]
