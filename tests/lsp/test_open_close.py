"""Documents that are not open cost nothing (issue 25, findings 8 and 9).

Against the real server process over stdio: a `didSave` of a document that was never opened
(here a FIFO, which a read blocks on for good) is ignored, so the server keeps answering; and a
burst of 160 open/close pairs of other files (search previews, "Replace in files") does not hold
up an open file's diagnostics: they come within 2 s of its last edit plus three times the
latency the same edit has on a quiet server (the machine may be loaded; strict timing is in
`benchmarks/lsp_latency.py`). Before, every open compiled the file, closed or not: 160 compiles
queued ahead of the edit.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.raw_lsp import ROOT, RawServer, frame, server_env

DATA = Path(__file__).parent / "data"
BROKEN = (DATA / "broken.cu").read_text()  # one error: undefined_factor, line 9
EXAMPLES = sorted((ROOT / "examples").rglob("*.cu"))
PAIRS = 160
SLACK_S = 2.0


@pytest.fixture
def raw(tmp_path: Path) -> Iterator[RawServer]:
    server = RawServer(env=server_env(tmp_path))
    server.initialize('{"cudaLlm": {"debounceMs": 0}}', client="neovim")
    yield server
    server.close()


def _answers(raw: RawServer, timeout: float) -> bool:
    return "error" in raw.response(raw.request("cudaLlm/noSuchMethod"), timeout=timeout)


def test_a_save_of_a_document_never_opened_reads_nothing(raw: RawServer, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.cu"
    os.mkfifo(fifo)
    raw.notify("textDocument/didSave", {"textDocument": {"uri": fifo.as_uri()}})
    assert _answers(raw, timeout=10)  # pygls read the FIFO on the event loop: no answer, ever
    uri = raw.open(DATA / "broken.cu", BROKEN)
    assert any("undefined_factor" in d["message"] for d in raw.diagnostics(uri, 1, timeout=60))
    assert "not open" in raw.stderr()


def _edit_latency(raw: RawServer, uri: str, version: int) -> float:
    """Seconds from sending an edit of `uri` to its diagnostics."""
    text = BROKEN.replace("undefined_factor", f"undefined_factor_{version}")
    started = time.monotonic()
    raw.change(uri, text, version)
    found = raw.diagnostics(uri, version, timeout=120)
    elapsed = time.monotonic() - started
    assert any(f"undefined_factor_{version}" in d["message"] for d in found), found
    return elapsed


def _burst(raw: RawServer, tmp: Path, open_for_s: float) -> None:
    """`PAIRS` files opened every 5 ms, each closed `open_for_s` after its open, as an editor
    paging through search results does."""
    events: list[tuple[float, bytes]] = []
    for i in range(PAIRS):
        source = EXAMPLES[i % len(EXAMPLES)]
        uri = (tmp / f"preview_{i}_{source.name}").as_uri()
        item = {"uri": uri, "languageId": "cuda-cpp", "version": 1, "text": source.read_text()}
        for at, method, params in (
            (i * 0.005, "textDocument/didOpen", {"textDocument": item}),
            (i * 0.005 + open_for_s, "textDocument/didClose", {"textDocument": {"uri": uri}}),
        ):
            body = {"jsonrpc": "2.0", "method": method, "params": params}
            events.append((at, frame(json.dumps(body).encode())))
    started = time.monotonic()
    for at, data in sorted(events, key=lambda e: e[0]):
        time.sleep(max(0.0, started + at - time.monotonic()))
        raw.send_bytes(data)


@pytest.mark.parametrize("open_for_s", [0.0, 0.1])
def test_an_open_files_diagnostics_keep_up_through_an_open_close_burst(
    raw: RawServer, tmp_path: Path, open_for_s: float
) -> None:
    uri = raw.open(DATA / "broken.cu", BROKEN)
    raw.diagnostics(uri, 1, timeout=60)
    quiet = min(_edit_latency(raw, uri, version) for version in (2, 3))
    _burst(raw, tmp_path, open_for_s)
    during = _edit_latency(raw, uri, 4)
    assert during <= SLACK_S + 3 * quiet, (during, quiet)
    assert "Traceback" not in raw.stderr()
