"""`cuda-llm suite DIR [--optimize] [--replay DIR] [--launch auto|keep|free] [--format json]
[--out REPORT_DIR] [--kernel NAME ...] [--time-budget S]`: bench every kernel of every `.cu` file
in DIR (and the FSR loop with --optimize), then write report.md, report.json and chart.png.

Exit codes: 0 every kernel is correct; 1 some kernel failed; 2 bad usage; 3 no CUDA GPU.
`CUDA_LLM_EVALUATOR=recorded:PATH` replaces the GPU by recorded outcomes (tests and demos only,
as for `cuda-llm optimize`: `engine.make_evaluator`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import sys
from pathlib import Path
from typing import TextIO

from cuda_llm_lsp.cli.common import add_gpu_arguments, error, setting_help, setting_value
from cuda_llm_lsp.config import LAUNCH_POLICIES, Settings
from cuda_llm_lsp.engine import make_evaluator
from cuda_llm_lsp.engine.build import TimingPlan
from cuda_llm_lsp.evaluate.types import NoGpuError, no_gpu_message
from cuda_llm_lsp.suite.report import FAST_P, fast_p, to_json, write_report
from cuda_llm_lsp.suite.runner import Progress, SuiteOptions, SuiteRunner, discover
from cuda_llm_lsp.tune.types import TuneOptions

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_NO_GPU = 0, 1, 2, 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", type=Path, help="directory of .cu files with test specs")
    parser.add_argument(
        "--optimize",
        action="store_true",
        help="run the FSR loop (Feature Search and Reinforcement: `cuda-llm optimize`'s rounds of "
        "LLM candidates) on each kernel",
    )
    parser.add_argument(
        "--replay",
        type=Path,
        metavar="DIR",
        help="answer the FSR loop from a recording (DIR/<kernel>/ or DIR); "
        "implies --optimize; kernels without a recording are only benched",
    )
    parser.add_argument(
        "--kernel",
        action="extend",
        type=_names,  # one value per flag: `--kernel a DIR` must leave DIR positional
        default=[],
        metavar="NAME[,NAME...]",
        help="only these kernels (repeatable, or comma-separated)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("suite-report"),
        metavar="REPORT_DIR",
        help="where report.md, report.json and chart.png go",
    )
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument(
        "--rounds",
        type=setting_value("rounds"),
        help=setting_help("rounds", "FSR rounds (live endpoint)"),
    )
    parser.add_argument(
        "--launch",
        choices=LAUNCH_POLICIES,
        help="may candidates choose their own grid/block/smem: auto (default: "
        "only if every launch site of the kernel can be rewritten), keep, "
        "free (the suite writes nothing back, so free is safe)",
    )
    parser.add_argument(
        "--candidates",
        type=setting_value("candidates"),
        help=setting_help("candidates", "FSR candidates per round (live endpoint)"),
    )
    parser.add_argument(
        "--time-budget",
        type=float,
        metavar="S",
        help="timing budget per timed kernel in seconds (default: evaluator's)",
    )
    parser.add_argument(
        "--sanitize",
        action="store_true",
        help="run each winner under compute-sanitizer (slow on large cases)",
    )
    parser.add_argument("--no-vendor", action="store_true", help="skip cuBLAS/cuSPARSE timings")
    parser.add_argument(
        "--deadline",
        type=float,
        metavar="S",
        help="start no kernel after S seconds; the rest are reported as skipped",
    )
    add_gpu_arguments(parser, "the kernels are spread over")
    parser.add_argument(
        "--tune",
        type=int,
        metavar="N",
        nargs="?",
        const=TuneOptions().max_points,
        help="tune kernels whose spec declares tunables (up to N configurations each, default "
        f"{TuneOptions().max_points}): the report shows tuned against untuned",
    )
    parser.epilog = "exit codes: 0 all kernels correct, 1 a kernel fails, 2 usage, 3 no GPU"


def _names(value: str) -> list[str]:
    return [name.strip() for name in value.split(",") if name.strip()]


def _error(message: str, code: int, as_json: bool) -> int:
    return error("suite", message, code, as_json)


class _ProgressView:
    """A one-line bar on a terminal; plain lines otherwise (CI logs, pipes)."""

    def __init__(self, stream: TextIO, quiet: bool) -> None:
        self.stream = stream
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.quiet = quiet

    def __call__(self, p: Progress) -> None:
        if self.quiet:
            return
        out = self.stream
        if p.stage in ("peaks", "vendor"):
            self._line(f"measuring {p.kernel} ...")
            return
        if p.stage == "done" and p.row is not None:
            r = p.row
            ms = f"{r.best_ms:.4g} ms" if r.best_ms else "-"
            speed = f" {r.speedup:.2f}x" if r.optimized and r.speedup else ""
            state = "ok" if r.correct else r.status
            text = f"[{p.index}/{p.total}] {r.kernel}: {state}, {ms}{speed}"
            if self.tty:
                print("\r\033[K" + text, file=out, flush=True)
            else:
                print(text, file=out, flush=True)
            return
        if p.stage.startswith("candidate") and not self.tty:
            print(f"  {p.kernel} {p.stage}", file=out, flush=True)
            return
        if self.tty:
            width = 30
            filled = int(width * (p.index - 1) / max(p.total, 1))
            bar = "#" * filled + "-" * (width - filled)
            print(
                f"\r\033[K[{bar}] {p.index}/{p.total} {p.stage} {p.kernel}",
                end="",
                file=out,
                flush=True,
            )

    def _line(self, text: str) -> None:
        if self.tty:
            print("\r\033[K" + text, end="", file=self.stream, flush=True)
        else:
            print(text, file=self.stream, flush=True)


def run(args: argparse.Namespace) -> int:
    as_json = args.format == "json"
    directory: Path = args.directory
    if not directory.is_dir():
        return _error(f"{directory} is not a directory", EXIT_USAGE, as_json)
    if args.replay is not None and not args.replay.is_dir():
        return _error(f"recording {args.replay} is not a directory", EXIT_USAGE, as_json)
    if args.deadline is not None and args.deadline <= 0:
        return _error("--deadline must be positive", EXIT_USAGE, as_json)
    if args.time_budget is not None and args.time_budget <= 0:
        return _error("--time-budget must be positive", EXIT_USAGE, as_json)
    names = tuple(args.kernel)
    found = discover(directory, names)
    if not found:
        what = f" named {', '.join(names)}" if names else ""
        return _error(f"no kernels{what} in {directory}/*.cu", EXIT_USAGE, as_json)
    if names:
        missing = sorted(set(names) - {k.kernel.name for k in found})
        if missing:
            return _error(f"no kernel {', '.join(missing)} in {directory}", EXIT_USAGE, as_json)

    argv = sys.argv[1:]
    shown = argv[argv.index("suite") + 1 :] if "suite" in argv else [str(directory)]
    command = "cuda-llm suite " + " ".join(shlex.quote(a) for a in shown)
    settings = Settings()
    if args.launch:  # the FSR loop's launch policy (`OptimizeConfig.launch`), as for optimize
        settings = dataclasses.replace(settings, launch=args.launch)
    options = SuiteOptions(
        directory=directory,
        kernels=names,
        optimize=bool(args.optimize or args.replay is not None),
        replay_dir=args.replay,
        rounds=args.rounds,
        candidates=args.candidates,
        sanitize=args.sanitize,
        vendor=not args.no_vendor,
        command=command,
        deadline_s=args.deadline,
        tune=TuneOptions(max_points=args.tune) if args.tune else None,
        settings=settings,
    )
    plan = TimingPlan(budget_s=args.time_budget) if args.time_budget else None
    try:
        evaluator = make_evaluator(plan=plan, gpus=args.gpus, cluster=args.cluster)
    except (OSError, ValueError) as exc:
        return _error(str(exc), EXIT_USAGE, as_json)
    progress = _ProgressView(sys.stderr, quiet=False)
    try:
        try:
            report = SuiteRunner(options, evaluator, progress).run(found)
        except NoGpuError as exc:
            return _error(no_gpu_message(exc), EXIT_NO_GPU, as_json)
    finally:
        evaluator.close()
    if progress.tty:
        print(file=sys.stderr)
    paths = write_report(report, args.out)
    failed = [r for r in report.rows if not r.correct]
    if as_json:
        data = to_json(report)
        data["files"] = {k: str(v) for k, v in paths.items()}
        print(json.dumps(data, indent=2))
    else:
        ok = len(report.rows) - len(failed)
        print(
            f"{ok}/{len(report.rows)} kernels correct; "
            + ", ".join(f"fast_{p:g} {fast_p(report.rows, p):.2f}" for p in FAST_P)
        )
        for name, path in paths.items():
            print(f"{name}: {path}")
    return EXIT_FAIL if failed else EXIT_OK
