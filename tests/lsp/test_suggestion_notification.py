"""The `cudaLlm/suggestion` notification for clients that render it (the VS Code extension).

A client declaring `capabilities.experimental.cudaLlm.suggestionNotification = true` gets the
notification as soon as an optimize job ends with a suggestion (before the progress ends), and
`cudaLlm.showSuggestion` sends only the notification: no `window/showDocument` of the preview
(it would steal the focus from the diff) and no message. Other clients keep the old behaviour.
"""

from __future__ import annotations

from lsprotocol import types

from tests.lsp.conftest import DATA, EditorClient, lsp_fixture
from tests.lsp.test_editor_flow import FAST, OPTIONS, RECORDED, _command, _line_of, _values

extension = lsp_fixture(
    server_command=RECORDED,
    init_options=OPTIONS,
    clients=["visual-studio-code"],
    experimental={"cudaLlm": {"suggestionNotification": True}},
)
plain = lsp_fixture(server_command=RECORDED, init_options=OPTIONS, clients=["neovim"])


async def _optimize_until_end(client: EditorClient, uri: str) -> types.WorkDoneProgressEnd:
    token = (await _command(client, "cudaLlm.optimize", uri, "saxpy"))["token"]
    ends = await client.wait_for(
        lambda: [v for v in _values(client, token) if isinstance(v, types.WorkDoneProgressEnd)],
        timeout=120,
    )
    return ends[0]


async def test_the_extension_gets_the_suggestion_when_the_job_ends(
    extension: EditorClient,
) -> None:
    client = extension
    uri = client.open(DATA / "saxpy.cu")
    await client.diagnostics_for(uri, 1)
    end = await _optimize_until_end(client, uri)
    assert "suggestion ready" in end.message
    # Sent before the progress end, so it is already here.
    (note,) = client.suggestion_notes
    assert note["uri"] == uri and note["kernel"] == "saxpy" and note["suggested"] == FAST
    assert note["speedup"] == 2.0 and note["casesPassed"] == note["casesTotal"] == 3
    assert note["range"]["start"]["line"] == _line_of(client.text(uri), "void saxpy")
    # The extension shows its own notification with Accept / Reject: no second one.
    assert not [m for m in client.messages if "Accept optimized" in m.message], client.messages

    assert await _command(client, "cudaLlm.showSuggestion", uri, "saxpy") is True
    await client.wait_for(lambda: len(client.suggestion_notes) == 2)
    assert client.suggestion_notes[1] == note
    await _command(client, "cudaLlm.showResources", uri, "saxpy")  # a round trip after show
    assert client.shown_documents == []
    assert not [m for m in client.messages if m.message.startswith("cuda-llm: suggested")]


async def test_other_clients_get_a_message_and_no_notification_at_the_end(
    plain: EditorClient,
) -> None:
    client = plain
    uri = client.open(DATA / "saxpy.cu")
    await client.diagnostics_for(uri, 1)
    await _optimize_until_end(client, uri)
    said = await client.wait_for(
        lambda: [m for m in client.messages if "Accept optimized saxpy" in m.message]
    )
    assert "Reject suggestion for saxpy" in said[0].message
    assert client.suggestion_notes == []
    assert await _command(client, "cudaLlm.showSuggestion", uri, "saxpy") is True
    await client.wait_for(lambda: client.suggestion_notes)
    await client.wait_for(
        lambda: (
            client.shown_documents
            or [m for m in client.messages if m.message.startswith("cuda-llm: suggested saxpy")]
        )
    )
