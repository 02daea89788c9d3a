"""`cuda-llm verify FILE [--kernel NAME] [--timeout S] -- COMMAND ARGS...`: after an edit and
your rebuild, run the program again with capture on the launch the spec's capture recorded:
the kernel's outputs against the capture's (the spec's tolerance), its duration and the
program's wall time before and after (docs/design.md "Capture"). Exit codes: 0 the outputs
match; 1 they differ, or the program could not be captured again; 2 bad usage.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cuda_llm_lsp.cli.common import read_source
from cuda_llm_lsp.engine.verify import verify

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, help=".cu file whose spec names a capture")
    parser.add_argument("--kernel", help="the kernel (default: the first with a capture)")
    parser.add_argument("--timeout", type=float, help="seconds the program may run")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ARGS...")


def run(args: argparse.Namespace) -> int:
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        print("verify: give the program to run after --", file=sys.stderr)
        return EXIT_USAGE
    _, problem = read_source(args.file)
    if problem:
        print(f"verify: {problem}", file=sys.stderr)
        return EXIT_USAGE
    outcome = verify(args.file, tuple(command), args.kernel, args.timeout)
    for line in outcome.lines:
        print(line)
    if not outcome.ok:
        print(f"verify: {outcome.message}", file=sys.stderr)
        return EXIT_FAIL
    print(outcome.message)
    return EXIT_OK
