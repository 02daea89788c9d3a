"""`cuda-llm-lsp` / `python -m cuda_llm_lsp`: the language server on stdio (`--stdio`, the
default), or `--tcp HOST:PORT`.

Started as `python -m cuda_llm_lsp` in a cloned repository (an editor that starts its server in
the project folder), Python has put that folder first on `sys.path`: a repository's `argparse.py`
would run inside the server. Its first lines take the start directory off `sys.path`, unless it
is where this package lives (a source checkout run in place), before any other import. That
cannot undo what ran earlier: a repository's `cuda_llm_lsp.py` is what `-m` runs, and the few
modules Python imports before `__main__`. So clients start the server elsewhere: the console
script `cuda-llm-lsp` (its own `bin` directory goes first, not the current one), or a directory
of their own with `PYTHONSAFEPATH=1`, as the VS Code extension and docs/neovim.lua do.
"""

from __future__ import annotations

import os
import sys


def without_start_directory(path: list[str], cwd: str, package_home: str) -> list[str]:
    """`path` without the current directory that `python -m` put first (`''` for `-c`), unless
    that directory holds this package."""
    if not path:
        return path
    first = os.path.abspath(os.path.join(cwd, path[0]))
    if first == os.path.abspath(cwd) and first != os.path.abspath(package_home):
        return path[1:]
    return path


if __name__ == "__main__":  # not for the console script, whose sys.path[0] is its bin directory
    sys.path[:] = without_start_directory(
        sys.path, os.getcwd(), os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    )

import argparse  # noqa: E402 - after the start directory is gone
import logging  # noqa: E402
from collections.abc import Sequence  # noqa: E402

from cuda_llm_lsp.engine import (  # noqa: E402
    EVALUATOR_ENV,
    demo_label,
    evaluator_for,
    evaluator_problem,
)
from cuda_llm_lsp.lsp.app import create_server, exit_status, serve_stdio  # noqa: E402
from cuda_llm_lsp.redact import RedactSecrets  # noqa: E402


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
