"""The real server, plus a thread that keeps writing to stdout the way stray code does: a Python
`print` and a C-level `write(1, ...)`. With the protocol on a private copy of stdout, none of it
reaches the client.

Usage: python tests/lsp/servers/noisy_server.py
"""

from __future__ import annotations

import os
import sys
import threading
import time

from cuda_llm_lsp.lsp.app import create_server, serve_stdio


def noise() -> None:
    for _ in range(20):
        time.sleep(0.1)
        print("stray print from a library")
        os.write(1, b"Content-Length: 5\r\n\r\nnoise from C code\n")


def main() -> int:
    server = create_server()
    threading.Thread(target=noise, daemon=True).start()
    serve_stdio(server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
