"""The real language server whose capture runner is `tests/support/fake_capture` (no GPU):
the editor's capture actions end to end on the CPU.

Usage: python tests/lsp/servers/capture_server.py [server options]
"""

from __future__ import annotations

import sys

from cuda_llm_lsp.lsp.app import create_server, serve_stdio
from tests.support.fake_capture import fake_run_capture


def main() -> int:
    server = create_server()
    server.capture_runner = fake_run_capture
    serve_stdio(server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
