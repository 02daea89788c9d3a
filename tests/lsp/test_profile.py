"""Profile K in the editor, end to end over stdio with the real server and NVRTC; only ncu's run
is replaced by its output captured on an H100 (tests/data/ncu, `"profiles"` of the recording).

The findings arrive as diagnostics from source `cuda-llm profile` on their lines (a header's on
its `#include` line), the summary on the kernel's name, figures in the hover; they never mix
with compile diagnostics and are dropped when the kernel's text changes.
"""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types

from cuda_llm_lsp.engine import DEMO_LABEL
from tests.lsp.conftest import EditorClient, lsp_fixture

NCU = Path(__file__).resolve().parents[1] / "data" / "ncu"
SOURCE = "cuda-llm profile"
DEMO = f"[{DEMO_LABEL}] "  # recorded ncu output, not a measurement: every result says so

client = lsp_fixture(
    env={"CUDA_LLM_EVALUATOR": f"recorded:{NCU / 'recording.json'}"},
    clients=["visual-studio-code", "neovim"],
)


def profile_diagnostics(client: EditorClient, uri: str) -> list[types.Diagnostic]:
    return [d for d in client.diagnostics.get(uri, []) if d.source == SOURCE]


async def profile(client: EditorClient, uri: str, kernel: str) -> None:
    answer = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(
            command="cudaLlm.profile", arguments=[{"uri": uri, "kernel": kernel}]
        )
    )
    token = answer["token"]
    await client.wait_for(
        lambda: any(
            isinstance(v, types.WorkDoneProgressEnd) for v in client.progress_reports.get(token, [])
        ),
        timeout=120,
    )


async def test_profile_lens_action_and_findings_on_their_lines(client: EditorClient) -> None:
    uri = client.open(NCU / "planted.cu")
    await client.diagnostics_for(uri, 1)
    ident = types.TextDocumentIdentifier(uri=uri)
    lenses = (
        await client.wait_for(lambda: None, timeout=0.1)
        if False
        else await client.text_document_code_lens_async(types.CodeLensParams(ident))
    )
    assert any(lens.command and lens.command.command == "cudaLlm.profile" for lens in lenses)
    line = (
        client.text(uri)
        .splitlines()
        .index(next(t for t in client.text(uri).splitlines() if "void transpose_header" in t))
    )
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=ident,
            range=types.Range(types.Position(line, 30), types.Position(line, 30)),
            context=types.CodeActionContext(diagnostics=[]),
        )
    )
    assert "Profile transpose_header" in [a.title for a in actions]

    await profile(client, uri, "transpose_header")
    found = await client.wait_for(lambda: profile_diagnostics(client, uri))
    by_line = {d.range.start.line: d for d in found}
    summary = by_line[line]
    assert summary.code == "summary" and "occupancy" in summary.message
    assert summary.severity == types.DiagnosticSeverity.Information
    include = by_line[3]  # `#include "planted_helpers.cuh"`: the header's store
    assert include.message.startswith(DEMO + "planted_helpers.cuh:6: uncoalesced global access")
    assert include.severity == types.DiagnosticSeverity.Information
    assert all(
        d.severity == types.DiagnosticSeverity.Hint for d in found if d.code == "stall_hotspot"
    )
    # compile diagnostics (none for this file) are never mixed in: all others have other sources
    others = [d for d in client.diagnostics.get(uri, []) if d.source != SOURCE]
    assert all("uncoalesced" not in d.message for d in others)

    hover = await client.text_document_hover_async(
        types.HoverParams(text_document=ident, position=types.Position(3, 5))
    )
    assert hover is not None and "global_sectors_excessive" in hover.contents.value
    assert "14,680,064" in hover.contents.value
    name_hover = await client.text_document_hover_async(
        types.HoverParams(text_document=ident, position=types.Position(line, 30))
    )
    assert name_hover is not None and "occupancy limiter" in name_hover.contents.value


async def test_findings_go_when_the_kernel_text_changes(client: EditorClient) -> None:
    uri = client.open(NCU / "planted.cu")
    await client.diagnostics_for(uri, 1)
    await profile(client, uri, "lane_branch")
    await profile(client, uri, "pick_local")
    found = await client.wait_for(
        lambda: (
            {d.range.start.line for d in profile_diagnostics(client, uri)} >= {153, 118}
            and profile_diagnostics(client, uri)
        )
    )
    branch = next(d for d in found if d.range.start.line == 153)
    assert branch.code == "divergent_branch"
    assert "warps arrive with 32.0 active threads on average and go on with 16.0" in branch.message
    lines = client.text(uri).splitlines()
    row = next(i for i, t in enumerate(lines) if "if (threadIdx.x & 1)" in t)
    # an edit inside lane_branch: its findings go, pick_local's stay
    edit = types.TextEdit(
        range=types.Range(types.Position(row, 0), types.Position(row, 0)), new_text="  // edited\n"
    )
    version = client.change(uri, [edit])
    await client.diagnostics_for(uri, version)
    left = profile_diagnostics(client, uri)
    assert not [d for d in left if d.code and "divergent_branch" in d.code]
    assert any(d.code and "local_memory" in d.code for d in left)


bare = lsp_fixture(clients=["visual-studio-code"], env={"PATH": "/usr/bin:/bin"})


async def test_without_ncu_profile_ends_with_one_clear_message(bare: EditorClient) -> None:
    uri = bare.open(NCU / "planted.cu")
    await bare.diagnostics_for(uri, 1)
    await profile(bare, uri, "transpose_naive")
    message = await bare.wait_for(lambda: [m for m in bare.messages if "profile" in m.message])
    assert "cannot profile transpose_naive here" in message[0].message
    assert "ncu" in message[0].message or "no CUDA GPU" in message[0].message
    assert not profile_diagnostics(bare, uri)
