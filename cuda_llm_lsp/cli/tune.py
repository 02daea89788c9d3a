"""`cuda-llm tune FILE --kernel K`: the fastest correct configuration of a kernel's tunables.

The spec declares them (`tune.NAME = [values]`, `restrict = [...]`: docs/design.md "Tuning").
Progress goes to stderr; stdout gets the table of configurations (fastest correct first), the
best against the default, and the unified diff that makes the best the default (`#define`
values, else the spec list's order); `--write` applies it; `--format json` prints one object
instead. Ctrl-C stops the run and prints what was measured. Exit codes: 0 a best configuration
found; 1 none correct, or the default fails its own spec or does not build; 2 usage or spec
problem (no such kernel, no tunables); 3 no GPU; 130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from cuda_llm_lsp.cli.common import error, no_kernel, read_source_bytes, spec_problems, write_back
from cuda_llm_lsp.cli.progress import Display, interrupt_cancels
from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.engine import CancelToken, GpuService, Refusal, make_evaluator, tune_in_file
from cuda_llm_lsp.engine.accept import show_diff
from cuda_llm_lsp.evaluate.types import no_gpu_message
from cuda_llm_lsp.source.kernels import find_kernels
from cuda_llm_lsp.source.spec.tunables import describe
from cuda_llm_lsp.tune.types import Measured, TuneOptions, TuneResult

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_NO_GPU, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def add_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = TuneOptions()
    parser.add_argument("file", type=Path, help=".cu file")
    parser.add_argument("--kernel", required=True, help="kernel whose spec declares tune.NAME")
    parser.add_argument(
        "--max-points",
        type=int,
        default=defaults.max_points,
        help="configurations measured at most; every one when the space is no "
        f"larger (default {defaults.max_points})",
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=defaults.budget_s,
        help=f"seconds of search (default {defaults.budget_s:g})",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=defaults.workers,
        help=f"compiles at once (default {defaults.workers})",
    )
    parser.add_argument(
        "--finalists",
        type=int,
        default=defaults.finalists,
        help=f"fastest configurations re-checked on new inputs (default {defaults.finalists})",
    )
    parser.add_argument("--seed", type=int, default=defaults.seed, help="sampling and inputs")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument(
        "--write", action="store_true", help="make the best configuration the file's default"
    )
    parser.epilog = (
        "exit codes: 0 best found, 1 none correct / default fails, 2 usage or spec "
        "problem, 3 no GPU, 130 interrupted"
    )


def _error(message: str, code: int, as_json: bool) -> int:
    return error("tune", message, code, as_json)


def run(args: argparse.Namespace) -> int:
    as_json = args.format == "json"
    path: Path = args.file
    if min(args.max_points, args.workers, args.finalists) < 1 or not args.budget > 0:
        message = "--max-points, --workers, --finalists and --budget must be positive"
        return _error(message, EXIT_USAGE, as_json)
    original, problem = read_source_bytes(path)  # a FIFO or /dev/zero would never end
    if problem is not None:
        return _error(f"{path}: {problem}", EXIT_USAGE, as_json)
    text = original.decode("utf-8", errors="replace")
    names = [k.name for k in find_kernels(text)]
    if args.kernel not in names:
        return _error(no_kernel(args.kernel, path, names), EXIT_USAGE, as_json)
    options = TuneOptions(
        max_points=args.max_points,
        budget_s=args.budget,
        workers=args.workers,
        finalists=args.finalists,
        seed=args.seed,
    )
    token, gpus = CancelToken(), GpuService(lambda: make_evaluator())
    display = None if as_json else Display(sys.stderr, live=False)
    work = tune_in_file(
        text, path.resolve(), args.kernel, Settings(), gpus, options, cancel=token, on_event=display
    )
    try:
        with interrupt_cancels(token, "tune"):
            outcome = asyncio.run(work)
    finally:
        gpus.close()
    if isinstance(outcome, Refusal):
        return _refused(outcome, path, as_json)
    result = outcome.result
    new_text = outcome.edit.text if outcome.edit is not None else text
    diff = show_diff(text, new_text, str(path)) if new_text != text else ""
    if as_json:
        print(json.dumps(_json(result, diff, outcome.notes), indent=2))
    else:
        sys.stdout.write(_table(result))
        sys.stdout.write(diff)
        for note in outcome.notes:
            print(f"note: {note}", file=sys.stderr)
    if token.cancelled:
        return EXIT_INTERRUPTED
    if result.best is None:
        return EXIT_FAIL
    if args.write and diff:
        return write_back("tune", path, original, new_text)
    return EXIT_OK


def _refused(refusal: Refusal, path: Path, as_json: bool) -> int:
    """Say why the kernel was not tuned, with the exit code it calls for."""
    kernel = refusal.kernel
    if refusal.kind in ("spec_errors", "no_spec"):
        why = "is missing (cuda-llm bench drafts one)"
        if refusal.problems:
            why = f"has errors:\n{spec_problems(path, refusal.problems)}"
        return _error(f"the test spec of {kernel} {why}", EXIT_USAGE, as_json)
    if refusal.kind in ("no_gpu", "unavailable"):
        return _error(no_gpu_message(refusal.message), EXIT_NO_GPU, as_json)
    usage = refusal.kind in ("no_tunables", "bad_inputs", "no_kernel")
    return _error(refusal.message, EXIT_USAGE if usage else EXIT_FAIL, as_json)


def _table(result: TuneResult) -> str:
    names = list(result.default)
    widths = [max(len(n), 6) for n in names]
    head = "  ".join(n.rjust(w) for n, w in zip(names, widths, strict=True))
    lines = [f"{head}  {'status':<16}{'ms':>10}  {'vs default':>10}"]
    for m in result.ranked():
        values = "  ".join(str(m.config[n]).rjust(w) for n, w in zip(names, widths, strict=True))
        status = m.status + (" (final)" if m.finalist else "")
        ms = f"{m.ms:.4f}" if m.ms is not None else "-"
        speed = f"{m.speedup:.2f}x" if m.speedup is not None else "-"
        mark = "  <- default" if m.config == result.default else ""
        lines.append(f"{values}  {status:<16}{ms:>10}  {speed:>10}{mark}")
    default = result.default_result
    if result.best is not None:
        best = result.best
        over = f"{best.speedup:.2f}x over the default ({describe(result.default)}"
        over += f", {default.ms:.4g} ms)" if default and default.ms else ")"
        lines.append(f"best: {describe(best.config)}: {best.ms:.4g} ms, {over}")
    else:
        lines.append("best: none: no configuration passed its checks")
    correct = sum(m.status == "ok" for m in result.measured)
    spread = f", spread {result.spread:.2f}x" if result.spread else ""
    stopped = f"; stopped: {result.stopped}" if result.stopped else ""
    lines.append(
        f"{len(result.measured)} configurations ({result.strategy}), {correct} correct"
        f"{spread}, {result.elapsed_s:.1f} s{stopped}"
    )
    return "\n".join(lines) + "\n"


def _json(result: TuneResult, diff: str, notes: tuple[str, ...]) -> dict[str, Any]:
    def one(m: Measured) -> dict[str, Any]:
        return {
            "config": m.config,
            "status": m.status,
            "ms": m.ms,
            "spread_pct": m.spread_pct,
            "speedup": m.speedup,
            "finalist": m.finalist,
            "message": m.message,
        }

    default = result.default_result
    return {
        "kernel": result.kernel,
        "strategy": result.strategy,
        "space_size": result.space_size,
        "default": result.default,
        "default_ms": default.ms if default else None,
        "best": one(result.best) if result.best else None,
        "spread": result.spread,
        "stopped": result.stopped,
        "elapsed_s": result.elapsed_s,
        "configurations": [one(m) for m in result.ranked()],
        "diff": diff,
        "notes": list(notes),
    }
