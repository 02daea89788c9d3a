"""The language server app: `create_server` registers every feature on a fresh state, `serve_stdio`
serves it, and `shutdown` cancels the jobs and closes the evaluator.

Features register in an order that keeps `executeCommandProvider.commands` as clients have
always seen it (optimize, benchmark, cancel, accept, reject, show, resources, addSpec), new
ones last (tune, demoExample, captureSpec, verify).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from cuda_llm_lsp.engine import LlmFactory
from cuda_llm_lsp.lsp import (
    benchmark_job,
    cancel,
    capture_job,
    code_actions,
    code_lens,
    demo,
    diagnostics,
    hover,
    optimize_job,
    profile_job,
    settings,
    suggestions,
    symbols,
    transport,
    tune_job,
)
from cuda_llm_lsp.lsp.protocol import quiet_parse_errors
from cuda_llm_lsp.lsp.state import Analyzer, CudaLlmServer, EvaluatorFactory

log = logging.getLogger(__name__)

#: How long `shutdown` waits for the evaluator to close before answering anyway.
SHUTDOWN_WAIT_S = 3.0
#: How long `exit` lets the interpreter end in order before the process ends regardless.
EXIT_WAIT_S = 0.5

FEATURES = (
    settings,
    diagnostics,
    hover,
    symbols,
    optimize_job,
    benchmark_job,
    cancel,
    suggestions,
    code_lens,
    code_actions,
    tune_job,
    profile_job,
    demo,
    capture_job,
)


def create_server(
    *,
    analyzer: Analyzer | None = None,
    evaluator_factory: EvaluatorFactory | None = None,
    llm_factory: LlmFactory | None = None,
) -> CudaLlmServer:
    """A server with every feature registered."""
    server = CudaLlmServer(
        analyzer=analyzer, evaluator_factory=evaluator_factory, llm_factory=llm_factory
    )
    for feature in FEATURES:
        feature.register(server)

    @server.feature(types.SHUTDOWN)
    async def on_shutdown(ls: CudaLlmServer, params: None) -> None:
        # Closing the evaluator waits for its worker (a busy one up to seconds): off the event
        # loop, and not past the client's patience, which then kills the server and, with it,
        # the worker (it exits when its parent does).
        ls.jobs.cancel_all()
        try:
            await asyncio.wait_for(asyncio.to_thread(ls.close_engine), SHUTDOWN_WAIT_S)
        except asyncio.TimeoutError:
            log.warning("the evaluator did not close within %.0f s of shutdown", SHUTDOWN_WAIT_S)

    @server.feature(types.EXIT)
    def on_exit(ls: CudaLlmServer, params: None) -> None:
        # pygls exits next, and the interpreter then waits for every worker thread (a compile,
        # the parse of a huge file): the compile processes are killed now, and a timer ends the
        # process if the orderly exit takes longer than EXIT_WAIT_S.
        ls.stop_compiles()
        code = getattr(ls.protocol, "exit_code", None)
        if code is None:
            code = 0 if getattr(ls.protocol, "_shutdown", False) else 1
        timer = threading.Timer(EXIT_WAIT_S, _hard_exit, args=(code,))
        timer.daemon = True
        timer.start()

    return server


def _hard_exit(code: int) -> None:
    logging.shutdown()
    os._exit(code)


def exit_status(server: LanguageServer) -> int:
    """The process's exit status once serving ended: 1 after `exit` without `shutdown` (LSP)."""
    return getattr(server.protocol, "exit_code", None) or 0


def serve_stdio(server: LanguageServer) -> None:
    """Serve on stdin/stdout, the protocol on a private copy of file descriptor 1.

    Anything else that writes to stdout (a stray `print`, a warning, a C library such as the
    CUDA driver) would corrupt a message and make the client drop the connection; it goes to
    stderr instead, which editors show as the server's log. Messages are read by
    `transport.serve` (bounded framing), not pygls's loop.
    """
    sys.stdout.flush()
    protocol_out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    quiet_parse_errors()
    transport.serve(server, stdin=sys.stdin.buffer, stdout=protocol_out)
