"""Every request is answered, however malformed; `exit` sets the status LSP asks for.

Against the real server process over stdio, with a raw client (`tests/support/raw_lsp.py`):
pygls alone answered nothing to bad params (a traceback in stderr each) nor to a request after
`shutdown`, and `exit` without `shutdown` ended with status 0.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.raw_lsp import RawServer, server_env

DATA = Path(__file__).parent / "data"
INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND = -32602, -32600, -32601


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RawServer]:
    raw = RawServer(env=server_env(tmp_path))
    raw.initialize('{"cudaLlm": {"debounceMs": 0}}', client="neovim")
    yield raw
    raw.close()


def _hover(uri: str, position: str) -> str:
    return f'{{"textDocument": {{"uri": "{uri}"}}, "position": {position}}}'


BAD_HOVERS = {
    "negative line": '{"line": -1, "character": 0}',
    "negative character": '{"line": 0, "character": -5}',
    "fractional line": '{"line": 1.5, "character": 0}',
    "boolean character": '{"line": 0, "character": true}',
    "string line": '{"line": "3", "character": 0}',
    "null position": "null",
    "line past 2^31": '{"line": 4294967296, "character": 0}',
    "missing character": '{"line": 0}',
}


@pytest.mark.parametrize("case", sorted(BAD_HOVERS))
def test_malformed_params_get_invalid_params(server: RawServer, case: str) -> None:
    uri = server.open(DATA / "saxpy.cu", (DATA / "saxpy.cu").read_text())
    reply = server.response(
        server.request("textDocument/hover", raw_params=_hover(uri, BAD_HOVERS[case]))
    )
    assert reply["error"]["code"] == INVALID_PARAMS, reply
    assert "textDocument/hover" in reply["error"]["message"]
    assert server.alive()
    assert "Traceback" not in server.stderr()


def test_a_request_without_params_gets_invalid_params(server: RawServer) -> None:
    for method in ("textDocument/hover", "textDocument/codeLens", "workspace/executeCommand"):
        reply = server.response(server.request(method))
        assert reply["error"]["code"] == INVALID_PARAMS, reply
    assert "Traceback" not in server.stderr()


def test_bad_notifications_are_logged_in_one_line_and_the_server_goes_on(
    server: RawServer,
) -> None:
    server.notify("textDocument/didOpen", {"textDocument": {"uri": 5}})
    server.notify("textDocument/didChange", None)
    server.notify("$/cancelRequest", {"id": None})
    server.send('{"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": [1, 2]}')
    server.send("this is not json")
    server.send('{"jsonrpc": "2.0", "id": 77, "method": 12, "params": {}}')
    uri = server.open(DATA / "broken.cu", (DATA / "broken.cu").read_text())
    found = server.diagnostics(uri, 1, timeout=30)
    assert any("undefined_factor" in d["message"] for d in found), found
    stderr = server.stderr()
    assert "Traceback" not in stderr
    assert "ignoring textDocument/didOpen" in stderr


def test_unknown_methods_still_get_method_not_found(server: RawServer) -> None:
    reply = server.response(server.request("cudaLlm/noSuchThing"))
    assert reply["error"]["code"] == METHOD_NOT_FOUND


def test_requests_after_shutdown_get_invalid_request_and_exit_is_0(server: RawServer) -> None:
    assert "error" not in server.response(server.request("shutdown"), timeout=15)
    uri = (DATA / "saxpy.cu").resolve().as_uri()
    reply = server.response(
        server.request("textDocument/hover", raw_params=_hover(uri, '{"line": 0, "character": 0}'))
    )
    assert reply["error"]["code"] == INVALID_REQUEST, reply
    server.notify("exit")
    assert server.exit_status(timeout=10) == 0


def test_exit_without_shutdown_exits_with_status_1(server: RawServer) -> None:
    server.notify("exit")
    assert server.exit_status(timeout=10) == 1
