"""The stdio edge holds against what a hostile or confused client sends (issue 25, 10-12).

Against the real server process over stdio (`tests/support/raw_lsp.py`): an absurd
`Content-Length` is refused without dying and the next message is read; `shutdown` followed at
once by `exit` is answered and ends with status 0 and a clean stderr; before `initialize` a
request gets -32002 and a notification is logged, never a "Error in server" message; a change
to a document that is not open, a `%00` URI and a body that is not UTF-8 are logged, never a
traceback; notification handlers' futures are not kept.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.raw_lsp import RawServer, frame, server_env

DATA = Path(__file__).parent / "data"
SERVER_NOT_INITIALIZED = -32002


@pytest.fixture
def raw(tmp_path: Path) -> Iterator[RawServer]:
    server = RawServer(env=server_env(tmp_path))
    yield server
    server.close()


def _ready(raw: RawServer) -> RawServer:
    raw.initialize('{"cudaLlm": {"debounceMs": 0}}', client="neovim")
    return raw


def _answers(raw: RawServer) -> bool:
    """The server still answers a request (an unknown method: MethodNotFound)."""
    return "error" in raw.response(raw.request("cudaLlm/noSuchMethod"), timeout=15)


def _shown_errors(raw: RawServer) -> list[str]:
    return [
        m["params"]["message"]
        for m in raw.messages
        if m.get("method") == "window/showMessage" and "Error in server" in m["params"]["message"]
    ]


def test_an_absurd_content_length_is_refused_and_the_next_message_read(raw: RawServer) -> None:
    _ready(raw)
    body = b'{"jsonrpc": "2.0", "id": 900, "method": "cudaLlm/noSuchMethod"}'
    raw.send_bytes(b"Content-Length: 99999999999\r\n\r\n" + body)
    raw.send_bytes(frame(b'{"jsonrpc": "2.0", "id": 901, "method": "cudaLlm/noSuchMethod"}'))
    assert "error" in raw.response(901, timeout=15)
    assert raw.alive()
    assert _answers(raw)
    assert "99999999999" in raw.stderr()
    assert "MemoryError" not in raw.stderr() and "Traceback" not in raw.stderr()


def test_a_body_that_is_not_utf8_is_logged(raw: RawServer) -> None:
    _ready(raw)
    raw.send_bytes(frame(b'{"jsonrpc": "2.0", "method": "x/y", "params": {"a": "\xe9\xff"}}'))
    assert _answers(raw)
    assert "not UTF-8" in raw.stderr()
    assert "Traceback" not in raw.stderr()


def test_shutdown_then_exit_at_once_answers_shutdown_and_exits_0(raw: RawServer) -> None:
    _ready(raw)
    raw.open(DATA / "broken.cu", (DATA / "broken.cu").read_text())  # a compile may be running
    shutdown = {"jsonrpc": "2.0", "id": 77, "method": "shutdown"}
    exit_ = {"jsonrpc": "2.0", "method": "exit"}
    raw.send_bytes(frame(json.dumps(shutdown).encode()) + frame(json.dumps(exit_).encode()))
    assert raw.exit_status(timeout=15) == 0
    reply = raw.response(77, timeout=1)
    assert "error" not in reply and reply["result"] is None
    assert "Traceback" not in raw.stderr(), raw.stderr()


def test_before_initialize_requests_get_32002_and_notifications_are_logged(
    raw: RawServer,
) -> None:
    uri = (DATA / "broken.cu").resolve().as_uri()
    raw.open(DATA / "broken.cu", "int x;\n")
    hover = raw.request(
        "textDocument/hover",
        {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}},
    )
    assert raw.response(hover)["error"]["code"] == SERVER_NOT_INITIALIZED
    _ready(raw)
    assert _answers(raw)
    assert not _shown_errors(raw)
    assert "before initialize" in raw.stderr()
    assert "Traceback" not in raw.stderr()


def test_a_change_to_a_document_not_open_is_logged_not_shown(raw: RawServer) -> None:
    _ready(raw)
    uri = (DATA / "never_opened.cu").resolve().as_uri()
    change = {
        "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
        "text": "x",
    }
    raw.notify(
        "textDocument/didChange",
        {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [change]},
    )
    assert _answers(raw)
    assert not _shown_errors(raw)
    assert "not open" in raw.stderr()
    assert "Traceback" not in raw.stderr()


def test_a_nul_byte_uri_gets_no_traceback(raw: RawServer) -> None:
    _ready(raw)
    uri = "file:///tmp/a%00b.cu"
    item = {
        "uri": uri,
        "languageId": "cuda-cpp",
        "version": 1,
        "text": "__global__ void k(float* x) { x[0] = yy; }\n",
    }
    raw.notify("textDocument/didOpen", {"textDocument": item})
    found = raw.diagnostics(uri, 1, timeout=30)
    assert any("yy" in d["message"] for d in found), found
    hover = raw.request(
        "textDocument/hover",
        {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 4}},
    )
    raw.response(hover, timeout=15)
    raw.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
    raw.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    assert _answers(raw)
    assert not _shown_errors(raw)
    assert "Traceback" not in raw.stderr(), raw.stderr()


def test_thousands_of_edits_do_not_grow_memory(raw: RawServer) -> None:
    """pygls kept the futures of every notification's handlers (two per didChange, about
    3.7 kB an edit: 37 MB over 10,000 edits); now the growth is allocator noise."""
    _ready(raw)
    text = (DATA / "broken.cu").read_text()
    uri = raw.open(DATA / "broken.cu", text)
    raw.diagnostics(uri, 1, timeout=60)

    def edits(first: int, count: int) -> None:
        batch = []
        for version in range(first, first + count):
            end = {"line": 3, "character": 0 if version % 2 else 1}
            change = {
                "range": {"start": {"line": 3, "character": 0}, "end": end},
                "text": "x" if version % 2 else "",
            }
            body = {
                "jsonrpc": "2.0",
                "method": "textDocument/didChange",
                "params": {
                    "textDocument": {"uri": uri, "version": version},
                    "contentChanges": [change],
                },
            }
            batch.append(frame(json.dumps(body).encode()))
            if len(batch) == 50:
                raw.send_bytes(b"".join(batch))
                batch.clear()
        raw.send_bytes(b"".join(batch))
        raw.diagnostics(uri, first + count - 1, timeout=60)

    edits(2, 1000)  # warm: caches, pools, the allocator's arenas
    before = raw.rss_mb()
    edits(1002, 10_000)
    grown = raw.rss_mb() - before
    assert grown < 8, f"RSS grew {grown:.1f} MB over 10,000 edits"
