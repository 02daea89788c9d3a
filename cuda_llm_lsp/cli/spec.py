"""`cuda-llm spec --from-capture DIR FILE [--kernel NAME] [--write]`: the test spec of a captured
launch (docs/design.md "Capture"): printed, or written above the kernel (`--write`, replacing its
spec). Exit codes: 0 done; 2 bad usage (no such file, capture or kernel).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cuda_llm_lsp.cli.common import read_source
from cuda_llm_lsp.engine.capture import CaptureError, spec_for_file

EXIT_OK, EXIT_USAGE = 0, 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, help=".cu file the program was built from")
    parser.add_argument("--from-capture", type=Path, required=True, help="capture directory")
    parser.add_argument("--kernel", help="the kernel (default: the captured one)")
    parser.add_argument("--write", action="store_true", help="write the spec above the kernel")


def run(args: argparse.Namespace) -> int:
    path: Path = args.file
    _, problem = read_source(path)
    if problem:
        print(f"spec: {problem}", file=sys.stderr)
        return EXIT_USAGE
    try:
        made = spec_for_file(path, args.from_capture, args.kernel)
    except (CaptureError, OSError, UnicodeDecodeError) as exc:
        print(f"spec: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.write:
        path.write_text(made.text, encoding="utf-8")
        print(f"wrote the spec of {made.kernel} into {path}")
    else:
        sys.stdout.write(made.block)
    return EXIT_OK
