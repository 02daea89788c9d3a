"""The server's copy of a document equals the editor's, whatever characters it holds (issue 25,
findings 4 and 5).

pygls split lines with `str.splitlines` (form feed, `\v`, `\x1c`-`\x1e`, `\x85`, U+2028/2029
are line breaks there, not in LSP) and put a `character` past a line's end before the last
character: after incremental edits the server's text was not the editor's. Checked against
`tests/support/lsp_model.py`, a model of LSP's rules written from the specification: random
edit sequences over such text in the three position encodings, at the document layer (many) and
over stdio (diagnostics of the server's copy land where the model says), and an insert past a
line's end.
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

from cuda_llm_lsp.lsp.document import LspWorkspace
from tests.lsp.conftest import DATA, SCRATCH, SERVERS, EditorClient, lsp_fixture
from tests.support import lsp_model
from tests.support.lsp_model import ENCODINGS, Pos
from tests.support.raw_lsp import RawServer, server_env
from tests.support.scripted_llm import ScriptedLlmServer, kernel_reply

SEQUENCES = 150
EDITS = 25


def _range(start: Pos, end: Pos) -> types.Range:
    return types.Range(
        start=types.Position(line=start.line, character=start.character),
        end=types.Position(line=end.line, character=end.character),
    )


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_random_edits_keep_the_document_equal_to_the_model(encoding: str) -> None:
    """The workspace the server uses (`LspWorkspace`), fed the same edits as the model."""
    rng = random.Random(25_04 + ENCODINGS.index(encoding))
    workspace = LspWorkspace(None, position_encoding=encoding)
    assert workspace.position_codec.encoding == encoding
    for sequence in range(SEQUENCES):
        uri = f"file:///tmp/doc{sequence}.cu"
        text = lsp_model.random_text(rng, rng.randrange(0, 40))
        workspace.put_text_document(
            types.TextDocumentItem(uri=uri, language_id="cuda-cpp", version=1, text=text)
        )
        for version in range(2, EDITS + 2):
            changes = []
            for _ in range(rng.choice((1, 1, 3))):  # several changes in one didChange
                start, end, new = lsp_model.random_edit(rng, text, encoding)
                changes.append(types.TextDocumentContentChangePartial(_range(start, end), new))
                text = lsp_model.apply(text, start, end, new, encoding)
            identifier = types.VersionedTextDocumentIdentifier(uri=uri, version=version)
            for change in changes:
                workspace.update_text_document(identifier, change)
            held = workspace.open_document(uri)
            assert held is not None
            assert held.source == text, (sequence, version, changes)
        workspace.remove_text_document(uri)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_positions_past_a_line_end_mean_its_end(encoding: str) -> None:
    workspace = LspWorkspace(None, position_encoding=encoding)
    uri = "file:///tmp/past.cu"
    text = "a\u2028b\fc\r\nx = 2;"
    workspace.put_text_document(
        types.TextDocumentItem(uri=uri, language_id="cuda-cpp", version=1, text=text)
    )
    for line, expected in ((1, "a\u2028b\fc\r\nx = 2; }"), (0, "a\u2028b\fc!\r\nx = 2; }")):
        change = types.TextDocumentContentChangePartial(
            _range(Pos(line, 999), Pos(line, 999)), " }" if line == 1 else "!"
        )
        workspace.update_text_document(
            types.VersionedTextDocumentIdentifier(uri=uri, version=2), change
        )
        held = workspace.open_document(uri)
        assert held is not None and held.source == expected
    assert PositionCodec(encoding).encoding == encoding


# --- over stdio ------------------------------------------------------------------------------

KERNEL = "__global__ void k(float* x) { x[0] = qq; }\n"
FINAL = "__global__ void k(float* x) { x[0] = zz_final; }"


def _server(tmp: Path, encoding: str) -> RawServer:
    raw = RawServer(env=server_env(tmp))
    params = {
        "processId": None,
        "rootUri": None,
        "capabilities": {"general": {"positionEncodings": [encoding]}},
        "initializationOptions": {"cudaLlm": {"debounceMs": 0}},
    }
    reply = raw.response(raw.request("initialize", params), timeout=60)
    assert reply["result"]["capabilities"]["positionEncoding"] == encoding
    raw.notify("initialized", {})
    return raw


@pytest.fixture(params=ENCODINGS)
def encoded(request: Any, tmp_path: Path) -> Iterator[tuple[RawServer, str]]:
    raw = _server(tmp_path, request.param)
    yield raw, request.param
    raw.close()


def _change(raw: RawServer, uri: str, version: int, edits: list[tuple[Pos, Pos, str]]) -> None:
    changes = [{"range": {"start": a.json(), "end": b.json()}, "text": t} for a, b, t in edits]
    raw.notify(
        "textDocument/didChange",
        {"textDocument": {"uri": uri, "version": version}, "contentChanges": changes},
    )


def test_random_edits_over_stdio_leave_the_servers_copy_equal_to_the_editors(
    encoded: tuple[RawServer, str], tmp_path: Path
) -> None:
    """Edits inside a comment full of odd breaks, then one replacing the kernel's line by its
    LSP number: the server's diagnostics name exactly the new line's problem, where the model
    puts it."""
    raw, encoding = encoded
    rng = random.Random(2504)
    body = lsp_model.random_text(rng, 60).replace("*", "").replace("/", "")
    text = "/*" + body + "*/\n" + KERNEL
    uri = raw.open(tmp_path / "odd.cu", text)
    version = 1
    for _ in range(40):
        start, end, new = lsp_model.random_edit(rng, text, encoding)
        a, b = lsp_model.offset(text, start, encoding), lsp_model.offset(text, end, encoding)
        if a < 2 or b > text.index("*/"):
            continue  # inside the comment only: the file stays one comment and one kernel
        text = lsp_model.apply(text, start, end, new, encoding)
        version += 1
        _change(raw, uri, version, [(start, end, new)])
    kernel_line = lsp_model.position(text, text.index("__global__"), encoding).line
    version += 1
    _change(raw, uri, version, [(Pos(kernel_line, 0), Pos(kernel_line, 10_000), FINAL)])
    text = lsp_model.apply(text, Pos(kernel_line, 0), Pos(kernel_line, 10_000), FINAL, encoding)
    found = raw.diagnostics(uri, version, timeout=60)
    errors = [d for d in found if d["severity"] == 1]
    where = lsp_model.position(text, text.index("zz_final"), encoding)
    assert len(errors) == 1 and "zz_final" in errors[0]["message"], json.dumps(found)
    assert errors[0]["range"]["start"] == where.json(), (errors, where)


def test_an_insert_past_the_end_of_the_last_line_lands_at_its_end(
    encoded: tuple[RawServer, str], tmp_path: Path
) -> None:
    raw, _ = encoded
    text = "// \u2028 \f\n__global__ void k(float* x) { x[0] = 2;"
    uri = raw.open(tmp_path / "past_end.cu", text)
    assert any(d["severity"] == 1 for d in raw.diagnostics(uri, 1, timeout=60))
    _change(raw, uri, 2, [(Pos(1, 999), Pos(1, 999), " }")])
    assert not [d for d in raw.diagnostics(uri, 2, timeout=60) if d["severity"] == 1]


# --- Accept after such edits -----------------------------------------------------------------

ODD_HEADER = "// notes: a\fb\u2028c\x85d\v e\n// more \u2029 x\x1c y\n"
ACCEPT_FILE = (
    ODD_HEADER
    + """\
#include <cuda_runtime.h>

/* @cuda-llm
sizes.n = [1, 1000, 1048576]
grid = "cdiv(n, 256)"
block = 256
args.n = "n"
args.a = "2.5"
args.x = "float32[n]"
args.y = "inout float32[n]"
*/
extern "C" __global__ void saxpy(int n, float a, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = a * x[i] + y[i];
    }
}

__device__ float next_helper(float v) { return v * 2.0f; }

int main() {
    int n = 1 << 20;
    float *x = nullptr, *y = nullptr;
    saxpy<<<(n + 255) / 256, 256>>>(n, 2.5f, x, y);
    return 0;
}
"""
)
FAST_SAXPY = """\
extern "C" __global__ void saxpy(int n, float a, const float* x, float* y) {
    // variant: fast
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = fmaf(a, x[i], y[i]);
    }
}"""
OLD_SAXPY = ACCEPT_FILE[ACCEPT_FILE.index('extern "C"') : ACCEPT_FILE.index("\n\n__device__")]
ACCEPT_LLM = ScriptedLlmServer([{"text": kernel_reply(FAST_SAXPY), "repeat": -1}]).start()
accept_client = lsp_fixture(
    server_command=[
        sys.executable,
        str(SERVERS / "recorded_server.py"),
        str(DATA / "recording.json"),
    ],
    init_options={
        "cudaLlm": {
            "debounceMs": 0,
            "baseUrl": ACCEPT_LLM.base_url,
            "model": "scripted-model",
            "rounds": 1,
            "candidates": 1,
            "apiKey": "sk-test-not-a-real-key",
        }
    },
)


async def test_accept_after_edits_among_odd_line_breaks_replaces_exactly_the_kernel(
    accept_client: EditorClient,
) -> None:
    client = accept_client
    encoding = str(client.init_result.capabilities.position_encoding or "utf-16")
    path = SCRATCH / "odd_breaks_accept.cu"
    path.write_text(ACCEPT_FILE, encoding="utf-8")
    uri = client.open(path)
    await client.diagnostics_for(uri, 1)
    text, version = ACCEPT_FILE, 1
    # Drop LSP line 1 (the second comment line), then type a comment above the spec: pygls
    # took line 1 for "b\u2028" and kept a line the editor had removed.
    for start, end, new in (
        (Pos(1, 0), Pos(2, 0), ""),
        (Pos(2, 0), Pos(2, 0), "// edited above the spec\n"),
    ):
        text = lsp_model.apply(text, start, end, new, encoding)
        version += 1
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[types.TextDocumentContentChangePartial(_range(start, end), new)],
            )
        )
    await client.diagnostics_for(uri, version)
    args = [{"uri": uri, "kernel": "saxpy"}]
    token = (
        await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="cudaLlm.optimize", arguments=args)
        )
    )["token"]
    await client.wait_for(
        lambda: any(
            isinstance(v, types.WorkDoneProgressEnd) for v in client.progress_reports.get(token, [])
        ),
        timeout=120,
    )
    accepted = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="cudaLlm.accept", arguments=args)
    )
    assert accepted is True
    (request,) = client.applied_edits
    if request.edit.document_changes:
        edits = [e for change in request.edit.document_changes for e in change.edits]
    else:
        edits = list(request.edit.changes[uri])
    ordered = sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character))
    for edit in reversed(ordered):
        start = Pos(edit.range.start.line, edit.range.start.character)
        end = Pos(edit.range.end.line, edit.range.end.character)
        text = lsp_model.apply(text, start, end, edit.new_text, encoding)
    expected_before = lsp_model.apply(ACCEPT_FILE, Pos(1, 0), Pos(2, 0), "", encoding)
    expected_before = lsp_model.apply(
        expected_before, Pos(2, 0), Pos(2, 0), "// edited above the spec\n", encoding
    )
    assert text == expected_before.replace(OLD_SAXPY, FAST_SAXPY), text
