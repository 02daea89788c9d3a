"""Includes never read special files and stay bounded (issue 25, findings 2 and 3), over real
stdio: each refused header is reported on its `#include` line, and the server keeps answering."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests.lsp.hardening import DIAGNOSTICS_S, KERNEL, initialize, on_line
from tests.support.raw_lsp import RawServer, server_env

ANSWER_S = 10.0  # hover after the refused includes: the server is not busy reading them


def test_special_and_huge_includes_are_refused_on_their_lines(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    os.mkfifo(workspace / "pipe.cuh")
    with (workspace / "blob.bin").open("wb") as handle:  # sparse: 48 MB for free
        handle.truncate(48 * 1024 * 1024)
    (workspace / "status.cuh").symlink_to("/proc/self/status")
    includes = [
        '#include "/proc/self/environ"',
        '#include "pipe.cuh"',
        '#include "/dev/zero"',
        '#include "blob.bin"',
        '#include "status.cuh"',
        "#include </proc/self/cmdline>",
    ]
    text = "\n".join(includes) + "\n" + KERNEL
    server = RawServer(env=server_env(tmp_path / "scratch"))
    try:
        initialize(server, {}, workspace)
        started = time.monotonic()
        uri = server.open(workspace / "k.cu", text)
        diagnostics = server.diagnostics(uri, 1, DIAGNOSTICS_S)
        for line, include in enumerate(includes):
            found = on_line(diagnostics, line)
            assert any("not read" in m for m in found), (include, diagnostics)
        assert "over the 4.0 MiB limit" in " ".join(on_line(diagnostics, 3))
        kernel_line = len(includes) + 2
        assert any("undefined_factor" in m for m in on_line(diagnostics, kernel_line))
        hover = server.request(
            "textDocument/hover",
            {"textDocument": {"uri": uri}, "position": {"line": kernel_line - 2, "character": 30}},
        )
        server.response(hover, timeout=ANSWER_S)
        assert time.monotonic() - started < DIAGNOSTICS_S
        assert server.alive() and server.rss_mb() < 1000
    finally:
        server.close()
