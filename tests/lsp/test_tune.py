"""Tune from the editor: the action where a spec declares tunables, the job's progress and cancel,
the table in the hover, and the best values as a suggestion (accept: one edit; reject: none).

Real server, real NVRTC (each configuration compiled with its -D), real tuner; only the GPU is
replaced by per-configuration recorded outcomes (tests/lsp/data/tune_recording.json: BLOCK=256
twice as fast as the default 128, 1024 wrong).
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

from lsprotocol import types

from tests.lsp.conftest import DATA, SERVERS, EditorClient, lsp_fixture
from tests.lsp.test_editor_flow import _actions, _command, _line_of, _values

RECORDED = [sys.executable, str(SERVERS / "recorded_server.py"), str(DATA / "tune_recording.json")]
OPTIONS = {"cudaLlm": {"debounceMs": 0}}
BOTH = ["visual-studio-code", "neovim"]

client = lsp_fixture(server_command=RECORDED, init_options=OPTIONS, clients=BOTH)
extension = lsp_fixture(
    server_command=RECORDED,
    init_options=OPTIONS,
    clients=["visual-studio-code"],
    experimental={"cudaLlm": {"suggestionNotification": True}},
)


def _ended(client: EditorClient, token: str) -> Any:
    return next(
        (v for v in _values(client, token) if isinstance(v, types.WorkDoneProgressEnd)), None
    )


async def _tune(client: EditorClient, uri: str, kernel: str = "scale") -> str:
    answer = await _command(client, "cudaLlm.tune", uri, kernel)
    token = answer["token"]
    await client.wait_for(lambda: _ended(client, token), timeout=120)
    return token


async def _hover(client: EditorClient, uri: str, line: int, character: int) -> str:
    found = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=line, character=character),
        )
    )
    assert found is not None
    return found.contents.value  # type: ignore[union-attr]


async def test_tune_is_offered_only_where_the_spec_declares_tunables(client: EditorClient) -> None:
    uri = client.open(DATA / "tunable.cu")
    await client.diagnostics_for(uri, 1)
    text = client.text(uri)
    scale = [a.title for a in await _actions(client, uri, _line_of(text, "2.0f * x[i]"))]
    copy = [a.title for a in await _actions(client, uri, _line_of(text, "y[i] = x[i];"))]
    assert "Tune scale" in scale and "Optimize scale" in scale, scale
    assert "Optimize copy" in copy and not any(t.startswith("Tune") for t in copy), copy
    action = next(
        a
        for a in await _actions(client, uri, _line_of(text, "2.0f * x[i]"))
        if a.title == "Tune scale"
    )
    assert action.command.command == "cudaLlm.tune"
    assert list(action.command.arguments) == [{"uri": uri, "kernel": "scale"}]
    # Tuning a kernel without tunables says why and starts nothing.
    assert await _command(client, "cudaLlm.tune", uri, "copy") is not None
    said = await client.wait_for(
        lambda: [m for m in client.messages if "declares no tunables" in m.message]
    )
    assert said[0].type == types.MessageType.Warning


async def test_tune_reports_progress_shows_the_table_and_accept_applies_one_edit(
    client: EditorClient,
) -> None:
    uri = client.open(DATA / "tunable.cu")
    await client.diagnostics_for(uri, 1)
    original = client.text(uri)
    token = await _tune(client, uri)

    values = _values(client, token)
    assert isinstance(values[0], types.WorkDoneProgressBegin) and values[0].cancellable
    assert values[0].title.startswith("Tuning scale")
    reports = [v.message or "" for v in values if isinstance(v, types.WorkDoneProgressReport)]
    assert any("/3 · BLOCK=256: 0.500 ms (2.00×)" in m for m in reports), reports
    assert any("BLOCK=1024: wrong output" in m for m in reports), reports
    assert "2.00× faster" in _ended(client, token).message

    name_line = _line_of(original, "void scale")
    shown = await _hover(client, uri, name_line, original.split("\n")[name_line].index("scale"))
    assert "| BLOCK | status | ms | vs default |" in shown, shown
    assert "| 256 | ok (final) | 0.5 | 2.00× |" in shown, shown
    assert "| 128 | ok (final) · default | 1 | 1.00× |" in shown, shown
    assert "| 1024 | wrong output | - | - |" in shown, shown
    assert "best BLOCK=256" in shown and "3 configurations (exhaustive of 3)" in shown

    titles = [a.title for a in await _actions(client, uri, name_line + 1)]
    assert "Accept tuned scale (2.00× faster, 3/3 cases)" in titles, titles
    assert "Reject suggestion for scale" in titles

    version = client.doc_version(uri)
    assert await _command(client, "cudaLlm.accept", uri, "scale") is True
    (request,) = client.applied_edits
    if client.kind == "visual-studio-code":
        (change,) = request.edit.document_changes
        assert change.text_document.version == version
        (text_edit,) = change.edits
        annotation = request.edit.change_annotations[text_edit.annotation_id]
        assert annotation.needs_confirmation and annotation.label.startswith("Tuned scale")
    else:
        (text_edit,) = request.edit.changes[uri]
    # One edit from the #define's line to the kernel's end: the default becomes 256.
    assert text_edit.range.start == types.Position(
        line=_line_of(original, "#define BLOCK"), character=0
    )
    client.change(uri, [text_edit])
    assert client.text(uri) == original.replace("#define BLOCK 128", "#define BLOCK 256")
    titles = [a.title for a in await _actions(client, uri, name_line + 1)]
    assert not any(t.startswith("Accept") for t in titles)


async def test_reject_leaves_the_file_and_a_changed_define_refuses_accept(
    client: EditorClient,
) -> None:
    uri = client.open(DATA / "tunable.cu")
    await client.diagnostics_for(uri, 1)
    original = client.text(uri)
    await _tune(client, uri)
    # The #define changed by hand: the suggestion no longer fits, Accept refuses and keeps it.
    client.change(uri, original.replace("#define BLOCK 128", "#define BLOCK 512"))
    assert await _command(client, "cudaLlm.accept", uri, "scale") is False
    assert client.applied_edits == []
    said = next(m for m in client.messages if "changed since the tuning started" in m.message)
    assert said.type == types.MessageType.Warning
    client.change(uri, original)
    assert await _command(client, "cudaLlm.reject", uri, "scale") is True
    assert client.applied_edits == [] and client.text(uri) == original
    titles = [a.title for a in await _actions(client, uri, _line_of(original, "2.0f * x[i]"))]
    assert not any(t.startswith(("Accept", "Reject")) for t in titles), titles


async def test_cancel_stops_the_tuning_on_the_gpu(client: EditorClient) -> None:
    text = (
        (DATA / "tunable.cu")
        .read_text(encoding="utf-8")
        .replace("(const float* x", "(const float* x /* tune: slow */", 1)
    )
    uri = client.open(DATA / "tunable.cu", text)
    await client.diagnostics_for(uri, 1)
    answer = await _command(client, "cudaLlm.tune", uri, "scale")
    token = answer["token"]
    # Its re-check as the fastest finalist "runs" 60 s on the recorded GPU: cancelled then.
    await client.wait_for(
        lambda: any(
            isinstance(v, types.WorkDoneProgressReport) and (v.message or "").startswith("3/3")
            for v in _values(client, token)
        )
    )
    titles = [a.title for a in await _actions(client, uri, _line_of(text, "2.0f * x[i]"))]
    assert "Cancel tune of scale" in titles and "Tune scale" not in titles, titles
    began = time.monotonic()
    assert await _command(client, "cudaLlm.cancel", uri, "scale") is True
    await client.wait_for(lambda: _ended(client, token), timeout=10)
    assert _ended(client, token).message == "cancelled"
    # What was measured stays in the hover; nothing is suggested.
    name_line = _line_of(text, "void scale")
    column = text.split("\n")[name_line].index("scale")
    shown = await _hover(client, uri, name_line, column)
    for _ in range(50):  # the job's end is sent before its work has wound down
        if "tuning cancelled" in shown:
            break
        await asyncio.sleep(0.1)
        shown = await _hover(client, uri, name_line, column)
    assert "tuning cancelled after 3 configuration(s)" in shown, shown
    assert "| 256 | ok | 0.5 | 2.00× |" in shown and "| 128 | ok · default | 1 | 1.00× |" in shown
    assert client.suggestion_notes == []
    titles = [a.title for a in await _actions(client, uri, name_line + 1)]
    assert not any(t.startswith("Accept") for t in titles), titles
    # The GPU is free again at once (a run still on it would hold the next one 60 s).
    client.change(uri, text.replace(" /* tune: slow */", ""))
    token = await _tune(client, uri)
    assert "suggestion ready" in _ended(client, token).message
    assert time.monotonic() - began < 45


async def test_the_extension_gets_the_tuned_region_as_a_suggestion(extension: EditorClient) -> None:
    client = extension
    uri = client.open(DATA / "tunable.cu")
    await client.diagnostics_for(uri, 1)
    original = client.text(uri)
    await _tune(client, uri)
    (note,) = client.suggestion_notes
    assert note["kernel"] == "scale" and note["speedup"] == 2.0
    assert note["original"].startswith("#define BLOCK 128\n#endif\n")
    assert note["original"].endswith("}") and "void scale" in note["original"]
    assert note["suggested"] == note["original"].replace("BLOCK 128", "BLOCK 256", 1)
    assert note["range"]["start"] == {"line": _line_of(original, "#define BLOCK"), "character": 0}
    answer = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(
            command="cudaLlm.accept", arguments=[{"uri": uri, "kernel": "scale", "confirmed": True}]
        )
    )
    assert answer == {"applied": True}
    (request,) = client.applied_edits
    (change,) = request.edit.document_changes
    assert not request.edit.change_annotations[change.edits[0].annotation_id].needs_confirmation


async def test_without_a_define_the_best_value_goes_first_in_the_specs_list(
    client: EditorClient,
) -> None:
    text = (DATA / "tunable.cu").read_text(encoding="utf-8")
    text = text.replace("#ifndef BLOCK\n#define BLOCK 128\n#endif\n", "")
    uri = client.open(DATA / "tunable.cu", text)
    await client.diagnostics_for(uri, 1)
    await _tune(client, uri)
    assert await _command(client, "cudaLlm.accept", uri, "scale") is True
    (request,) = client.applied_edits
    if client.kind == "visual-studio-code":
        (text_edit,) = request.edit.document_changes[0].edits
    else:
        (text_edit,) = request.edit.changes[uri]
    line = _line_of(text, "tune.BLOCK")
    assert text_edit.range.start == types.Position(line=line, character=0)
    client.change(uri, [text_edit])
    assert client.text(uri) == text.replace("[128, 256, 1024]", "[256, 128, 1024]")
