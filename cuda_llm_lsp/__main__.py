"""`cuda-llm-lsp` / `python -m cuda_llm_lsp`: the language server on stdio (`--stdio`, the
default), or `--tcp HOST:PORT`."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from cuda_llm_lsp.engine import EVALUATOR_ENV, demo_label, evaluator_for, evaluator_problem
from cuda_llm_lsp.lsp.app import create_server, exit_status, serve_stdio
from cuda_llm_lsp.redact import RedactSecrets


def build_parser() -> argparse.ArgumentParser:
    from cuda_llm_lsp import __version__

    parser = argparse.ArgumentParser(
        prog="cuda-llm-lsp",
        description="The cuda-llm language server (stdio unless --tcp is given).",
    )
    parser.add_argument("--version", action="version", version=f"cuda-llm-lsp {__version__}")
    transport = parser.add_mutually_exclusive_group()
    transport.add_argument(
        "--stdio",
        action="store_true",
        help="talk over stdin/stdout (the default; accepted because many clients pass it)",
    )
    transport.add_argument(
        "--tcp", metavar="HOST:PORT", help="listen on a TCP socket instead of stdio"
    )
    parser.add_argument("--log-file", metavar="PATH", help="write the server's log to this file")
    parser.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="log level for --log-file (default INFO)",
    )
    return parser


def _host_port(value: str) -> tuple[str, int] | None:
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        return None
    return host, int(port)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    address = None
    if args.tcp is not None:
        address = _host_port(args.tcp)
        if address is None:
            print(f"cuda-llm-lsp: --tcp expects HOST:PORT, got {args.tcp!r}", file=sys.stderr)
            return 2
    if args.log_file:
        try:
            logging.basicConfig(
                filename=args.log_file,
                level=args.log_level,
                format="%(asctime)s %(levelname)s %(name)s: %(message)s",
            )
        except OSError as exc:
            print(f"cuda-llm-lsp: cannot write the log file: {exc}", file=sys.stderr)
            return 2
    else:  # stdout is the protocol channel: log warnings to stderr only
        logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    for handler in logging.getLogger().handlers:
        handler.addFilter(RedactSecrets())

    problem = evaluator_problem()
    if problem is not None:
        print(f"cuda-llm-lsp: {problem}", file=sys.stderr)
        return 2
    if demo_label() is not None:  # the GPU replaced by recorded outcomes: tests and demos only
        logging.getLogger(__name__).warning(
            "%s (%s=%s)", demo_label(), EVALUATOR_ENV, os.environ[EVALUATOR_ENV]
        )
    server = create_server(evaluator_factory=evaluator_for)  # with cudaLlm.gpus / .cluster
    try:
        if address is not None:
            server.start_tcp(*address)
        else:
            serve_stdio(server)
    except KeyboardInterrupt:
        return 130
    return exit_status(server)


if __name__ == "__main__":
    sys.exit(main())
