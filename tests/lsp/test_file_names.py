"""A file's name never moves its diagnostics (issue 36, item 7), over real stdio.

NVRTC's log names the file as `NAME(LINE): error: ...`, parsed back line by line: a file named
`a\\nb.cu` had its problem shown on line 1 as one "in included file" `b.cu`, and a name holding
`(1): error: ` of its own did the same. Such a file is compiled under a fixed name.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.raw_lsp import RawServer, server_env

KERNEL = "__global__ void k(float* x) {\n  x[0] = 1.0f;\n  undefined_thing = 3;\n}\n"
NAMES = ["plain.cu", "a\nb.cu", "a(1): error: b.cu", "esc\x1b[2Jb.cu", "cr\rb.cu", "k (copy).cu"]


@pytest.mark.parametrize("name", NAMES)
def test_diagnostics_stay_on_their_line_whatever_the_file_name(tmp_path: Path, name: str) -> None:
    server = RawServer(env=server_env(tmp_path))
    try:
        server.initialize('{"cudaLlm": {"debounceMs": 0}}', client="neovim")
        uri = server.open(tmp_path / name, KERNEL)
        diagnostics = server.diagnostics(uri, 1, timeout=60)
        errors = [d for d in diagnostics if d["severity"] == 1]
        assert [(d["range"]["start"]["line"], d["message"]) for d in errors] == [
            (2, 'identifier "undefined_thing" is undefined')
        ], diagnostics
    finally:
        server.close()
