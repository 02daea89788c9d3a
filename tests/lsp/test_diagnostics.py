"""Live diagnostics: device errors on their line, versions carried, stale results dropped."""

from __future__ import annotations

import uuid

from lsprotocol import types

from tests.lsp.conftest import DATA, EditorClient, lsp_fixture

client = lsp_fixture(init_options={"cudaLlm": {"debounceMs": 0}})


async def test_device_error_on_line_9_and_nothing_on_host_lines(client: EditorClient) -> None:
    uri = client.open(DATA / "broken.cu")
    found = await client.diagnostics_for(uri, 1)
    errors = [d for d in found if d.severity == types.DiagnosticSeverity.Error]
    assert len(errors) == 1, found
    assert errors[0].range.start.line == 8  # line 9, 0-based
    assert errors[0].source == "nvrtc"
    assert "undefined_factor" in errors[0].message
    kernel_lines = range(4, 11)  # the kernel's lines; main() and the includes are host code
    assert all(d.range.start.line in kernel_lines for d in found), found


async def test_clean_file_has_no_errors(client: EditorClient) -> None:
    uri = client.open(DATA / "saxpy.cu")
    found = await client.diagnostics_for(uri, 1)
    assert [d for d in found if d.severity == types.DiagnosticSeverity.Error] == []


async def test_results_for_an_older_version_are_never_published(client: EditorClient) -> None:
    uri = client.open(DATA / "saxpy.cu")
    await client.diagnostics_for(uri, 1)
    good = client.text(uri)
    marker = f"missing_{uuid.uuid4().hex[:8]}"  # a fresh text, so the compile is not cached
    broken = good.replace("y[i] = a * x[i] + y[i];", f"y[i] = a * x[i] + {marker};")
    assert broken != good
    v2 = client.change(uri, broken)
    v3 = client.change(uri, good.replace("// Ünïcödé", f"// {marker} Ünïcödé"))
    found = await client.diagnostics_for(uri, v3)
    assert [d for d in found if d.severity == types.DiagnosticSeverity.Error] == []
    versions = [p.version for p in client.published if p.uri == uri]
    assert v2 not in versions, versions  # v2's compile finished after v3 arrived: dropped
    assert versions == sorted(versions)


async def test_every_publish_carries_the_version_it_describes(client: EditorClient) -> None:
    uri = client.open(DATA / "saxpy.cu")
    await client.diagnostics_for(uri, 1)
    text = client.text(uri).replace("y[i] = a * x[i] + y[i];", "y[i] = a * x[i] + oops;")
    version = client.change(uri, text)
    found = await client.diagnostics_for(uri, version)
    errors = [d for d in found if d.severity == types.DiagnosticSeverity.Error]
    assert len(errors) == 1 and "oops" in errors[0].message
    assert errors[0].range.start.line == text.split("\n").index(
        next(line for line in text.split("\n") if "oops" in line)
    )


async def test_close_clears_the_diagnostics(client: EditorClient) -> None:
    uri = client.open(DATA / "broken.cu")
    assert await client.diagnostics_for(uri, 1)
    client.text_document_did_close(
        types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    await client.wait_for(
        lambda: client.published[-1].uri == uri and not client.published[-1].diagnostics
    )


async def test_spec_errors_are_cuda_llm_diagnostics_inside_the_block(client: EditorClient) -> None:
    text = (DATA / "saxpy.cu").read_text(encoding="utf-8")
    bad = text.replace('args.x = "float32[n]"', 'args.x = "float33[n]"')
    uri = client.open(DATA / "saxpy.cu", bad)
    found = await client.diagnostics_for(uri, 1)
    spec = [d for d in found if d.source == "cuda-llm"]
    line = bad.split("\n").index('args.x = "float33[n]"')
    assert spec and spec[0].range.start.line == line, found
