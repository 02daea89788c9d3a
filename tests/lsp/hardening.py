"""Helpers shared by the issue 25 (trust, include reads, secrets) tests over real stdio."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.raw_lsp import RawServer

KERNEL = (
    'extern "C" __global__ void scale(float* y, int n) {\n'
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) y[i] = 2.0f * undefined_factor;\n"
    "}\n"
)
DIAGNOSTICS_S = 60.0  # first compile: the compile processes load NVRTC on two shared cores


def initialize(
    server: RawServer, options: dict[str, Any], root: Path, *, pull: bool = False
) -> None:
    """`initialize` with `root` as the one workspace folder; `pull`: the client answers
    `workspace/configuration` (RawServer answers null), else settings come in the params."""
    params = {
        "processId": None,
        "rootUri": root.resolve().as_uri(),
        "workspaceFolders": [{"uri": root.resolve().as_uri(), "name": root.name}],
        "capabilities": {"workspace": {"configuration": pull}},
        "initializationOptions": options,
    }
    server.response(server.request("initialize", params), timeout=60)
    server.notify("initialized", {})


def messages(server: RawServer) -> list[str]:
    """The text of every `window/showMessage` so far."""
    shown = [m for m in list(server.messages) if m.get("method") == "window/showMessage"]
    return [m["params"]["message"] for m in shown]


def published(server: RawServer, uri: str, start: int, timeout: float) -> list[dict[str, Any]]:
    """The first diagnostics published for `uri` from message index `start` on."""
    found = server.wait_for(
        lambda m: (
            m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri
        ),
        timeout=timeout,
        start=start,
    )
    return list(found["params"]["diagnostics"])


def on_line(diagnostics: list[dict[str, Any]], line: int) -> list[str]:
    """Messages of the diagnostics starting on 0-based `line`."""
    return [d["message"] for d in diagnostics if d["range"]["start"]["line"] == line]
