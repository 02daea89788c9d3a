"""Requests the server sends the client, when the client is slow to answer (issue 36, item 7).

Against the real server over stdio with a raw client that holds the server's requests: `shutdown`
while `window/showDocument` waits was answered with an internal error (pygls cancelled the
pending futures while iterating their table: `dictionary changed size during iteration`), and
`showDocument` was awaited without a limit, so the command that asked never answered.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cuda_llm_lsp.lsp.state import SHOW_DOCUMENT_WAIT_S
from tests.support.raw_lsp import RawServer, server_env

DEMO = {"command": "cudaLlm.demoExample", "arguments": []}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RawServer]:
    raw = RawServer(env=server_env(tmp_path))
    raw.initialize('{"cudaLlm": {"debounceMs": 0}}', client="visual-studio-code")
    raw.wait_for(lambda m: m.get("method") == "workspace/configuration", timeout=30)
    yield raw
    raw.close()


def _show_document(server: RawServer) -> dict:
    return server.wait_for(lambda m: m.get("method") == "window/showDocument", timeout=30)


def test_shutdown_while_show_document_waits_answers_cleanly(server: RawServer) -> None:
    server.answer_requests = False
    command = server.request("workspace/executeCommand", DEMO)
    _show_document(server)
    reply = server.response(server.request("shutdown"), timeout=15)
    assert "error" not in reply, reply
    assert "error" in server.response(command, timeout=10)  # cancelled by the shutdown
    for held in server.held:  # the client answers at last: dropped, no traceback
        server.send({"jsonrpc": "2.0", "id": held["id"], "result": {"success": True}})
    server.notify("exit")
    assert server.exit_status(timeout=10) == 0
    assert "Traceback" not in server.stderr(), server.stderr()


def test_an_unanswered_show_document_falls_back_to_the_message_naming_the_file(
    server: RawServer,
) -> None:
    server.answer_requests = False
    command = server.request("workspace/executeCommand", DEMO)
    _show_document(server)
    reply = server.response(command, timeout=SHOW_DOCUMENT_WAIT_S + 10)
    path = reply["result"]["path"]
    said = server.wait_for(
        lambda m: m.get("method") == "window/showMessage" and path in m["params"]["message"],
        timeout=5,
    )
    assert "demo's example" in said["params"]["message"]
    for held in server.held:  # a late answer is dropped; the server goes on
        server.send({"jsonrpc": "2.0", "id": held["id"], "result": {"success": True}})
    server.answer_requests = True
    assert "error" not in server.response(server.request("shutdown"), timeout=15)
    assert "Traceback" not in server.stderr(), server.stderr()
