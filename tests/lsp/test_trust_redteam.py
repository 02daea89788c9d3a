"""Red-team reproducers for issue 36 over real stdio: an include directive spelled otherwise
than plainly (a digraph, a comment, a splice, `#include_next`) reads nothing outside an
untrusted workspace, and never reaches nvcc unchecked in a trusted one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cuda_llm_lsp.compile.nvcc import find_nvcc
from tests.lsp.hardening import initialize
from tests.support.raw_lsp import RawServer, server_env

needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="needs nvcc (the nvcc extra)")
SECRET = "tok_9d2b7a_outside_secret"
KERNEL = "__global__ void k(float* x) { x[0] = 1.0f; }\n"
NVCC_S = 240.0  # nvcc on two shared cores


@pytest.fixture
def cleanup() -> Iterator[list[RawServer]]:
    servers: list[RawServer] = []
    yield servers
    for server in servers:
        server.close()


def test_no_include_spelling_reads_outside_an_untrusted_workspace(
    tmp_path: Path, cleanup: list[RawServer]
) -> None:
    workspace = tmp_path / "repo"
    workspace.mkdir()
    secret = tmp_path / "home" / "secret.h"
    secret.parent.mkdir()
    secret.write_text(f"float f = {SECRET};\n")
    secret.chmod(0o600)
    (workspace / "inner.cuh").write_text(f'%:include "{secret}"\n')
    spellings = [
        f'%:include "{secret}"',
        f'#/**/include "{secret}"',
        f'#inc\\\nlude "{secret}"',
        f'#include_next "{secret}"',
        '#include "inner.cuh"',
    ]
    server = RawServer(server_env(tmp_path))
    cleanup.append(server)
    initialize(server, {"cudaLlm": {"debounceMs": 0}, "workspaceTrusted": False}, workspace)
    for i, spelling in enumerate(spellings):
        uri = server.open(workspace / f"k{i}.cu", spelling + "\n" + KERNEL)
        shown = server.diagnostics(uri, 1, 60)
        assert SECRET not in str(shown) and "in included file" not in str(shown), shown
        assert any(d["range"]["start"]["line"] == 0 for d in shown), shown
    cache = tmp_path / "cache"
    for path in cache.rglob("*") if cache.exists() else ():
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


@needs_nvcc
def test_a_spliced_include_of_dev_stdin_never_reaches_nvcc(
    tmp_path: Path, cleanup: list[RawServer]
) -> None:
    workspace = tmp_path / "repo"
    workspace.mkdir()
    server = RawServer(server_env(tmp_path))
    cleanup.append(server)
    initialize(server, {"cudaLlm": {"debounceMs": 0, "nvccCheck": "save"}}, workspace)
    text = '#inc\\\nlude "/dev/stdin"\n' + KERNEL
    uri = server.open(workspace / "k.cu", text)
    found = server.wait_for(
        lambda m: (
            m.get("method") == "textDocument/publishDiagnostics"
            and m["params"]["uri"] == uri
            and any("nvcc not run" in d["message"] for d in m["params"]["diagnostics"])
        ),
        timeout=NVCC_S,
    )
    shown = found["params"]["diagnostics"]
    assert any("spelled otherwise" in d["message"] for d in shown), shown
    for _ in range(5):  # every request still answered
        hover = server.request(
            "textDocument/hover",
            {"textDocument": {"uri": uri}, "position": {"line": 2, "character": 18}},
        )
        assert "result" in server.response(hover, timeout=30)
