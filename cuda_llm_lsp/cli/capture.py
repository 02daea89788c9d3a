"""`cuda-llm capture [--kernel K] [--launch N | --slowest] [--max-bytes B] [--out DIR] --
COMMAND ARGS...`: run your program with the capture library injected and record one launch of
a kernel (docs/design.md "Capture"). Exit codes: 0 captured; 1 nothing captured (the message
says why: the kernels the program launched, with counts); 2 bad usage.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cuda_llm_lsp.engine.capture import DEFAULT_MAX_BYTES, CaptureRequest, run_capture

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kernel", default="", help="substring of the kernel's name (default: any)"
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--launch", type=int, default=1, help="the Nth matching launch (1 = first)")
    which.add_argument(
        "--slowest", action="store_true", help="run twice: time every launch, capture the slowest"
    )
    parser.add_argument(
        "--max-bytes",
        type=int,
        default=DEFAULT_MAX_BYTES,
        help=f"bytes recorded at most, before and after together (default {DEFAULT_MAX_BYTES})",
    )
    parser.add_argument("--out", type=Path, default=Path("cuda-llm-capture"), help="directory")
    parser.add_argument("--timeout", type=float, help="seconds the program may run")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ARGS...")


def run(args: argparse.Namespace) -> int:
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        print("capture: give the program to run after --", file=sys.stderr)
        return EXIT_USAGE
    if args.launch < 1 or args.max_bytes < 1:
        print("capture: --launch and --max-bytes must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    outcome = run_capture(
        CaptureRequest(
            tuple(command),
            args.out,
            kernel=args.kernel,
            launch=args.launch,
            slowest=args.slowest,
            max_bytes=args.max_bytes,
            timeout_s=args.timeout,
        )
    )
    if not outcome.ok:
        print(f"capture: {outcome.message}", file=sys.stderr)
        return EXIT_FAIL
    print(outcome.message)
    print(f"next: cuda-llm spec --from-capture {args.out} FILE.cu [--write]")
    return EXIT_OK
