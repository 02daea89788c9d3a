"""What the subcommands share: reading FILE (regular files of a bounded size only), a failure's
message (or its JSON object), `--write`'s check-and-write, the GPU arguments and the message for
a kernel that is not in the file.

Not in the package's `__init__`: `cuda-llm --help` imports that alone, and the size limit comes
from `compile.analysis` (~150 ms of imports that only a subcommand needs).
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from cuda_llm_lsp.config import BY_FIELD, Settings
from cuda_llm_lsp.engine.analysis import DEFAULT_MAX_FILE_CHARS
from cuda_llm_lsp.source.spec import SpecError

#: Bytes of one source file read at most: UTF-8 needs at most 4 per character.
MAX_SOURCE_BYTES = 4 * DEFAULT_MAX_FILE_CHARS

_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
)


def read_source_bytes(name: str | Path) -> tuple[bytes, str | None]:
    """The file's bytes, or why it is not read: only regular files of a bounded size are (a FIFO
    or /dev/zero would never end, /dev/urandom is endless noise)."""
    try:
        info = os.stat(name)
    except OSError as exc:
        return b"", f"cannot read file: {exc.strerror or exc}"
    if not stat.S_ISREG(info.st_mode):
        kind = next((what for test, what in _KINDS if test(info.st_mode)), "not a regular file")
        return b"", f"not read: {kind}, not a regular source file"
    if info.st_size > MAX_SOURCE_BYTES:
        return b"", (
            f"not read: {info.st_size / 1e6:.1f} MB is over the {MAX_SOURCE_BYTES / 1e6:.0f} MB "
            "limit for one source file"
        )
    try:
        with open(name, "rb") as stream:
            data = stream.read(MAX_SOURCE_BYTES + 1)
    except OSError as exc:
        return b"", f"cannot read file: {exc.strerror or exc}"
    return data, None


def read_source(name: str | Path) -> tuple[str, str | None]:
    """`read_source_bytes` as text (undecodable bytes replaced)."""
    data, problem = read_source_bytes(name)
    return data.decode("utf-8", errors="replace"), problem


def error(command: str, message: str, code: int, as_json: bool) -> int:
    """Report a failure of `cuda-llm COMMAND` (stderr, or `{"error", "exit_code"}` on stdout
    with `--format json`) and return its exit code."""
    if as_json:
        print(json.dumps({"error": message, "exit_code": code}))
    else:
        print(f"cuda-llm {command}: {message}", file=sys.stderr)
    return code


def no_kernel(name: str, path: Path, kernels: Iterable[str]) -> str:
    """The message for `--kernel NAME` naming no kernel of FILE."""
    listed = ", ".join(kernels) or "none"
    return f"no kernel {name!r} in {path} (kernels: {listed})"


def write_back(command: str, path: Path, original: bytes, new_text: str) -> int:
    """`--write`: `new_text` into `path`, only if the file is still byte-identical to what the
    run started from. 0 when written, else 1 (said on stderr)."""
    try:
        current = path.read_bytes()
    except OSError as exc:
        print(f"cuda-llm {command}: not written: cannot read {path}: {exc}", file=sys.stderr)
        return 1
    if current != original:
        print(
            f"cuda-llm {command}: not written: {path} changed while the run was going; "
            "the diff above still applies to the original text",
            file=sys.stderr,
        )
        return 1
    try:
        path.write_bytes(new_text.encode("utf-8"))
    except OSError as exc:
        print(f"cuda-llm {command}: not written: {exc}", file=sys.stderr)
        return 1
    print(f"cuda-llm {command}: wrote {path}", file=sys.stderr)
    return 0


def add_gpu_arguments(parser: argparse.ArgumentParser, use: str) -> None:
    """`--gpus` and `--cluster` (`engine.make_evaluator`); `use`: what the GPUs do, as in
    'local GPUs judging candidates in parallel'."""
    parser.add_argument(
        "--gpus", metavar="LIST", default="all", help=f"local GPUs {use}: all (default) or 0,1"
    )
    parser.add_argument(
        "--cluster",
        metavar="ADDRESS",
        help="a Ray cluster's GPUs instead: ray://HOST:PORT or auto (ray extra)",
    )


def spec_problems(path: Path, problems: Sequence[SpecError]) -> str:
    """A spec's problems, one `FILE:LINE:COL: severity: message` line each."""
    return "\n".join(
        f"{path}:{p.span.start.line + 1}:{p.span.start.column + 1}: "
        f"{getattr(p, 'severity', 'error')}: {p.message}"
        for p in problems
    )


def setting_value(name: str) -> Callable[[str], int | float]:
    """The argparse type of a flag that sets the setting `name` (a `Settings` field) for one
    run: its range is the server's (`config.SCHEMA`), so the two never disagree."""
    entry = BY_FIELD[name]
    assert entry.low is not None and entry.high is not None, name
    low, high = entry.low, entry.high
    whole = isinstance(getattr(Settings(), name), int)

    def parse(text: str) -> int | float:
        try:
            number: int | float = int(text) if whole else float(text)
        except ValueError:
            kind = "a whole number" if whole else "a number"
            raise argparse.ArgumentTypeError(f"{text!r} is not {kind}") from None
        if not low <= number <= high:
            raise argparse.ArgumentTypeError(f"must be between {low:g} and {high:g}")
        return number

    return parse


def setting_help(name: str, text: str) -> str:
    """`text` with the setting's range and default: "rounds of candidates (1-50, default 4)"."""
    entry, default = BY_FIELD[name], getattr(Settings(), name)
    shown = "not sent" if default is None else f"{default}"
    return f"{text} ({entry.low:g}-{entry.high:g}, default {shown}; cudaLlm.{entry.key})"


def add_setting_flag(parser: argparse.ArgumentParser, name: str, metavar: str, text: str) -> None:
    """The flag (`config.SCHEMA`'s) that sets the setting `name` for one run, with its range."""
    entry = BY_FIELD[name]
    assert entry.flag is not None, name
    parser.add_argument(
        entry.flag, type=setting_value(name), metavar=metavar, help=setting_help(name, text)
    )
