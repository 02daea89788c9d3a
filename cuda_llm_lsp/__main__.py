"""`cuda-llm-lsp` / `python -m cuda_llm_lsp`: the language server on stdio, or `--tcp HOST:PORT`."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    from cuda_llm_lsp import __version__

    parser = argparse.ArgumentParser(
        prog="cuda-llm-lsp",
        description="The cuda-llm language server (stdio unless --tcp is given).",
    )
    parser.add_argument("--version", action="version", version=f"cuda-llm-lsp {__version__}")
    parser.add_argument(
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

    from cuda_llm_lsp.lsp.server import create_server

    server = create_server()
    try:
        if address is not None:
            server.start_tcp(*address)
        else:
            server.start_io()
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
