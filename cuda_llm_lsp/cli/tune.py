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
import json
import sys
import threading
from pathlib import Path
from typing import Any

from cuda_llm_lsp.cli.common import error, no_kernel, read_source_bytes, write_back
from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.engine import make_evaluator
from cuda_llm_lsp.evaluate.inputs import InputError
from cuda_llm_lsp.evaluate.types import BaselineFailed, NoGpuError, no_gpu_message
from cuda_llm_lsp.fsr.edit import unified_diff
from cuda_llm_lsp.source.kernels import find_kernels
from cuda_llm_lsp.source.spec import parse_spec
from cuda_llm_lsp.source.spec.tunables import describe
from cuda_llm_lsp.tune.edit import tuned_text
from cuda_llm_lsp.tune.search import (
    Measured,
    TuneError,
    TuneOptions,
    TuneProgress,
    TuneRequest,
    TuneResult,
    tune_kernel,
)

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_NO_GPU, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def add_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = TuneOptions()
    parser.add_argument("file", type=Path, help=".cu file")
    parser.add_argument("--kernel", required=True, help="kernel whose spec declares tune.NAME")
    parser.add_argument("--max-points", type=int, default=defaults.max_points,
                        help="configurations measured at most; every one when the space is no "
                        f"larger (default {defaults.max_points})")  # fmt: skip
    parser.add_argument("--budget", type=float, default=defaults.budget_s,
                        help=f"seconds of search (default {defaults.budget_s:g})")  # fmt: skip
    parser.add_argument("--workers", type=int, default=defaults.workers,
                        help=f"compiles at once (default {defaults.workers})")  # fmt: skip
    parser.add_argument("--finalists", type=int, default=defaults.finalists,
                        help="fastest configurations re-checked on new inputs "
                        f"(default {defaults.finalists})")  # fmt: skip
    parser.add_argument("--seed", type=int, default=defaults.seed, help="sampling and inputs")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--write", action="store_true",
                        help="make the best configuration the file's default")  # fmt: skip
    parser.epilog = ("exit codes: 0 best found, 1 none correct / default fails, 2 usage or spec "
                     "problem, 3 no GPU, 130 interrupted")  # fmt: skip


def _error(message: str, code: int, as_json: bool) -> int:
    return error("tune", message, code, as_json)


def run(args: argparse.Namespace) -> int:
    as_json = args.format == "json"
    path: Path = args.file
    if min(args.max_points, args.workers, args.finalists) < 1 or not args.budget > 0:
        return _error("--max-points, --workers, --finalists and --budget must be positive",
                      EXIT_USAGE, as_json)  # fmt: skip
    original, problem = read_source_bytes(path)  # a FIFO or /dev/zero would never end
    if problem is not None:
        return _error(f"{path}: {problem}", EXIT_USAGE, as_json)
    text = original.decode("utf-8", errors="replace")
    kernels = find_kernels(text)
    kernel = next((k for k in kernels if k.name == args.kernel), None)
    if kernel is None:
        message = no_kernel(args.kernel, path, (k.name for k in kernels))
        return _error(message, EXIT_USAGE, as_json)
    spec, problems = parse_spec(kernel, text)
    if spec is None:
        shown = "\n".join(f"{path}:{p.span.start.line + 1}:{p.span.start.column + 1}: "
                          f"{p.severity}: {p.message}" for p in problems)  # fmt: skip
        why = f"has errors:\n{shown}" if problems else "is missing (cuda-llm bench drafts one)"
        return _error(f"the test spec of {kernel.name} {why}", EXIT_USAGE, as_json)
    if spec.tunables is None:
        message = (f"{kernel.name}'s spec declares no tunables: add tune.NAME = [values] and "
                   "use NAME in grid/block/smem and the kernel")  # fmt: skip
        return _error(message, EXIT_USAGE, as_json)
    options = TuneOptions(max_points=args.max_points, budget_s=args.budget, workers=args.workers,
                          finalists=args.finalists, seed=args.seed)  # fmt: skip
    request = TuneRequest(text, kernel.name, spec, Settings(), path.resolve())
    evaluator = make_evaluator()
    try:
        try:
            facts = evaluator.device_facts()
        except NoGpuError as exc:
            return _error(no_gpu_message(exc), EXIT_NO_GPU, as_json)
        if not as_json:
            print(f"tuning {kernel.name} on {facts.name}: default {describe(spec.tunables.default)}"
                  f", {spec.tunables.space_size} configurations before restrictions",
                  file=sys.stderr)  # fmt: skip
        outcome = _run_cancellable(request, evaluator, options, as_json)
    finally:
        evaluator.close()
    if isinstance(outcome, Exception):
        code = EXIT_USAGE if isinstance(outcome, InputError) else EXIT_FAIL
        if isinstance(outcome, NoGpuError):
            return _error(no_gpu_message(outcome), EXIT_NO_GPU, as_json)
        return _error(str(outcome), code, as_json)
    result, interrupted = outcome
    new_text = text
    notes: tuple[str, ...] = ()
    if result.best is not None and result.best.config != result.default:
        edit = tuned_text(text, kernel, spec, result.best.config)
        new_text, notes = edit.text, edit.notes
    diff = unified_diff(text, new_text, str(path)) if new_text != text else ""
    if as_json:
        print(json.dumps(_json(result, diff, notes), indent=2))
    else:
        sys.stdout.write(_table(result))
        sys.stdout.write(diff)
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
    if interrupted:
        return EXIT_INTERRUPTED
    if result.best is None:
        return EXIT_FAIL
    if args.write and diff:
        return write_back("tune", path, original, new_text)
    return EXIT_OK


def _run_cancellable(
    request: TuneRequest, evaluator: Any, options: TuneOptions, quiet: bool
) -> tuple[TuneResult, bool] | Exception:
    """The run in a thread, so Ctrl-C here cancels it and still gets what was measured."""
    cancel = threading.Event()
    done = threading.Event()  # not Thread.is_alive: a join cut by Ctrl-C can leave it wrong
    box: dict[str, Any] = {}

    def progress(p: TuneProgress) -> None:
        if not quiet:
            print(f"  [{p.done}/{p.planned}] {_one_line(p.latest)}", file=sys.stderr)

    def work() -> None:
        try:
            box["result"] = tune_kernel(request, evaluator, options, on_progress=progress,
                                        cancel=cancel)  # fmt: skip
        except (TuneError, BaselineFailed, InputError, NoGpuError) as exc:
            box["error"] = exc
        except Exception as exc:  # a bug of ours: one message, never a silent thread death
            box["error"] = RuntimeError(f"{type(exc).__name__}: {exc}")
        finally:
            done.set()

    thread = threading.Thread(target=work, name="cuda-llm-tune", daemon=True)
    thread.start()
    interrupted = False
    while not done.is_set():
        try:
            done.wait(0.2)
        except KeyboardInterrupt:
            interrupted = True
            cancel.set()
            print("cuda-llm tune: interrupted; stopping", file=sys.stderr)
        if interrupted:  # again each time: a call that started just after is cancelled too
            evaluator.cancel()
    if "error" in box:
        return box["error"]  # type: ignore[no-any-return]
    return box["result"], interrupted


def _one_line(m: Measured) -> str:
    if m.status != "ok":
        return f"{describe(m.config)}: {m.status}: {m.message.splitlines()[0] if m.message else ''}"
    return f"{describe(m.config)}: ok {m.ms:.4g} ms ({m.speedup or 0:.2f}x)"


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
    lines.append(f"{len(result.measured)} configurations ({result.strategy}), {correct} correct"
                 f"{spread}, {result.elapsed_s:.1f} s{stopped}")  # fmt: skip
    return "\n".join(lines) + "\n"


def _json(result: TuneResult, diff: str, notes: tuple[str, ...]) -> dict[str, Any]:
    def one(m: Measured) -> dict[str, Any]:
        return {"config": m.config, "status": m.status, "ms": m.ms, "spread_pct": m.spread_pct,
                "speedup": m.speedup, "finalist": m.finalist, "message": m.message}  # fmt: skip

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
