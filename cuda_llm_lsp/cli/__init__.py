"""The `cuda-llm` command: one subcommand per module in this package.

Each subcommand module exposes `HELP`, `add_arguments(parser)` and `run(args) -> int`; this
module only wires them, so the CLI, the language server and tests share the same engine.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

SUBCOMMANDS = ("check", "bench", "optimize", "history", "suite")


def build_parser() -> argparse.ArgumentParser:
    from cuda_llm_lsp import __version__

    parser = argparse.ArgumentParser(
        prog="cuda-llm",
        description="Compile, check, benchmark and optimize CUDA kernels.",
    )
    parser.add_argument("--version", action="version", version=f"cuda-llm {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        try:
            module = importlib.import_module(f"cuda_llm_lsp.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"cuda_llm_lsp.cli.{name}":
                raise
            continue
        command = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(command)
        command.set_defaults(handler=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "handler", None) is None:
        parser.print_help()
        return 2
    try:
        return int(args.handler(args))
    except KeyboardInterrupt:
        print("cuda-llm: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
