"""`cudaLlm.demoExample`: the demo's example file, for "Try the Demo" (`cudaLlm.demo`).

The example is written afresh to the user's data directory (`engine.demo_example`) and shown
with `window/showDocument` where the client supports it (VS Code opens it itself from the
answer); the answer `{"uri", "path", "kernel", "demo"}` says where it is and whether demo mode
is on in this server, and a message says what to do next, so a client without `showDocument`
(Neovim 0.7) still knows the path.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from lsprotocol import types

from cuda_llm_lsp.engine import demo_example
from cuda_llm_lsp.lsp import commands
from cuda_llm_lsp.lsp.state import CudaLlmServer

log = logging.getLogger(__name__)


def register(server: CudaLlmServer) -> None:
    @server.command(commands.DEMO_EXAMPLE)
    async def example(ls: CudaLlmServer, *args: Any) -> dict[str, Any] | None:
        return await open_example(ls, show=not args or args[0] != {"open": False})


async def open_example(server: CudaLlmServer, *, show: bool) -> dict[str, Any] | None:
    """Write the example and, when `show`, ask the client to open it; None after a message
    saying why it could not be written."""
    try:
        path, kernel = await asyncio.to_thread(demo_example)
    except (OSError, ValueError) as exc:
        server.message(f"cuda-llm: cannot write the demo example: {exc}", types.MessageType.Error)
        return None
    uri = path.as_uri()
    if show and _shows_documents(server):
        await server.show_document(uri)  # bounded; the message and the answer name the file
    if show:  # a client that opens the file itself (`{"open": false}`) says what it likes
        state = "is on" if server.settings.demo else "is off: set cudaLlm.demo to true first"
        server.message(
            f"cuda-llm: the demo's example is {path}; demo mode {state}. Optimize {kernel} "
            "answers from a recorded session (no GPU, no API key): its diff, Accept and undo "
            "are real."
        )
    return {"uri": uri, "path": str(path), "kernel": kernel, "demo": server.settings.demo}


def _shows_documents(server: CudaLlmServer) -> bool:
    window = server.client_capabilities.window
    support = window.show_document if window else None
    return bool(support and support.support)
