"""`cuda-llm optimize FILE --kernel NAME`: the FSR loop from the terminal (CLI contract,
docs/design.md).

Progress goes to stderr (a rounds x candidates table redrawn in place on a terminal, plain lines
otherwise); stdout gets the unified diff of the winner, or with `--format json` exactly the
contract's JSON object and nothing else. `--write` writes the winner as `fsr.apply.winner_text`
makes it (the kernel, its helpers above the spec, and for its own launch the spec and every launch
site), and only if the file is byte-identical to what the run started from.

Exit codes: 0 the run completed (improvement or plainly none); 1 error (no or bad test spec,
endpoint failure, refused write); 2 usage (a missing or unreadable FILE, no such kernel: checked
before the GPU, as `bench` and `suite` do); 3 no CUDA GPU; 130 interrupted. With
`--format json` a failure's object carries `error` (the message) and `exit_code`, as `bench`'s.

`CUDA_LLM_EVALUATOR=recorded:PATH` replaces the GPU by recorded outcomes
(`engine.make_evaluator`, `evaluate.recorded.RecordedEvaluator`): for tests and demos only.
`--demo` runs a session shipped in the package (`cuda_llm_lsp.demo`: recorded replies, recorded
outcomes) with no GPU and no endpoint, labelled as a demo on stderr, in the diff's first line and
in the JSON (`"demo": true`); it never writes the file and records no history.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from cuda_llm_lsp.cli.common import add_gpu_arguments, no_kernel, read_source_bytes, write_back
from cuda_llm_lsp.config import (
    DEFAULT_MAX_TOKENS,
    LAUNCH_POLICIES,
    REASONING_EFFORTS,
    STRATEGIES,
    Settings,
)
from cuda_llm_lsp.demo import demos
from cuda_llm_lsp.engine import history_for_run, make_evaluator, run_fsr
from cuda_llm_lsp.evaluate.recorded import RecordedEvaluator, RecordingError
from cuda_llm_lsp.evaluate.types import Evaluator, NoGpuError, no_gpu_message
from cuda_llm_lsp.fsr.apply import NotApplicable, winner_text, write_check
from cuda_llm_lsp.fsr.edit import unified_diff
from cuda_llm_lsp.fsr.history import RunHistory
from cuda_llm_lsp.fsr.replay import recorded_shape
from cuda_llm_lsp.fsr.types import (
    CandidateEvaluated,
    CandidateOutcome,
    CandidateStage,
    OptimizeConfig,
    OptimizeRequest,
    OptimizeResult,
    ProgressEvent,
    RoundStarted,
    RunFinished,
    RunStarted,
    config_from_settings,
)
from cuda_llm_lsp.source.kernels import find_kernels

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_NO_GPU, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, metavar="FILE", help=".cu file")
    parser.add_argument("--kernel", required=True, metavar="NAME", help="the kernel to optimize")
    parser.add_argument("--rounds", type=_positive, default=None, metavar="R",
                        help="rounds of candidates (default 4)")  # fmt: skip
    parser.add_argument("--candidates", type=_positive, default=None, metavar="N",
                        help="candidates per round (default 4)")  # fmt: skip
    parser.add_argument("--write", action="store_true",
                        help="apply the winner to FILE (kernel, helpers; its own launch in the "
                             "spec and launch sites)")  # fmt: skip
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--record", metavar="DIR", help="save every prompt and reply in DIR")
    parser.add_argument("--replay", metavar="DIR", help="answer from a recording, no endpoint")
    parser.add_argument("--model", help="model name (default: CUDA_LLM_MODEL or gpt-4o-mini)")
    parser.add_argument("--base-url", help="OpenAI-compatible endpoint (default: OPENAI_BASE_URL)")
    parser.add_argument("--max-tokens", type=_positive, metavar="T",
                        help=f"output tokens per request, reasoning included "
                             f"(default {DEFAULT_MAX_TOKENS})")  # fmt: skip
    parser.add_argument(
        "--temperature",
        type=_temperature,
        metavar="X",
        help="sampling temperature 0-2 (default: not sent, the model's own)",
    )
    parser.add_argument("--reasoning-effort", choices=REASONING_EFFORTS,
                        help="reasoning models' effort (default: not sent)")  # fmt: skip
    parser.add_argument("--strategy", choices=STRATEGIES,
                        help="fsr (default): rounds of candidates; plan: a planner's K plans, a "
                             "coder per plan, failing ones repaired by a debugger")  # fmt: skip
    parser.add_argument("--launch", choices=LAUNCH_POLICIES,
                        help="may candidates choose their own grid/block/smem: auto (default: "
                             "only if every launch site of the kernel can be rewritten), keep, "
                             "free")  # fmt: skip
    parser.add_argument(
        "--repairs",
        type=_repairs,
        metavar="D",
        help="repair attempts per failing candidate, both strategies (0-10, default 3)",
    )
    parser.add_argument("--tune-points", type=_tune_points, metavar="P",
                        help="configurations tried per correct candidate whose launch block "
                             "declares tune.NAME (0-1000, default "
                             f"{OptimizeConfig().tune_points}; 0: its default only)")  # fmt: skip
    parser.add_argument("--compile-timeout", type=_positive, metavar="S",
                        help="seconds one candidate's compile may take (default "
                             f"{Settings().compile_timeout_s})")  # fmt: skip
    parser.add_argument("--seed", type=int, help="input seed (default: a fresh one)")
    parser.add_argument("--time-budget", type=float, metavar="S", help="stop after S seconds")
    parser.add_argument("--token-budget", type=int, metavar="T", help="stop after T tokens")
    parser.add_argument("--no-history", action="store_true", help="do not record the run")
    add_gpu_arguments(parser, "judging candidates in parallel")
    parser.add_argument("--demo", action="store_true",
                        help="replay a recorded session shipped with the package: no GPU, no "
                             "endpoint (examples/softmax.cu --kernel softmax_rows)")  # fmt: skip
    parser.epilog = (
        "exit codes: 0 done (improved or not), 1 error, 2 usage (no such file or kernel), "
        "3 no GPU, 130 interrupted. "
        "The API key comes from OPENAI_API_KEY."
    )


def _temperature(value: str) -> float:
    number = float(value)
    if not 0.0 <= number <= 2.0:
        raise argparse.ArgumentTypeError("must be between 0 and 2")
    return number


def _repairs(value: str) -> int:
    number = int(value)
    if not 0 <= number <= 10:
        raise argparse.ArgumentTypeError("must be between 0 and 10")
    return number


def _tune_points(value: str) -> int:
    number = int(value)
    if not 0 <= number <= 1000:
        raise argparse.ArgumentTypeError("must be between 0 and 1000")
    return number


def _positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return number


# ---------------------------------------------------------------------------------------------
# Progress display


_SHORT = {
    "ok": "ok", "compile_error": "compile", "signature_mismatch": "signature",
    "bad_launch": "bad-launch", "wrong_output": "wrong", "unwritten_output": "unwritten",
    "out_of_bounds": "oob",
    "input_modified": "input-mod", "nondeterministic": "nondet", "stale_after_timing": "stale",
    "timeout": "timeout", "fault": "fault", "launch_error": "launch", "sanitizer": "sanitizer",
    "llm_error": "llm-error", "slower": "slower",
}  # fmt: skip


@dataclass
class Display:
    """Shows progress events on `stream`: a redrawn table on a terminal, else plain lines."""

    stream: TextIO
    live: bool
    rounds: int = 0
    candidates: int = 0
    cells: dict[tuple[int, int], str] = field(default_factory=dict)
    header: str = ""
    best: CandidateOutcome | None = None
    round: int = 0
    _drawn: int = 0

    def __call__(self, event: ProgressEvent) -> None:
        if isinstance(event, RunStarted):
            self.rounds, self.candidates = event.rounds, event.candidates
            timing = event.baseline.timing
            figure = f"{timing.median_ms:.4f} ms (±{timing.spread_pct:.1f}%)" if timing else "?"
            self.header = (
                f"{event.kernel}: baseline {figure}, {len(event.baseline.cases)} cases; "
                f"{_plural(event.rounds, 'round')} x {_plural(event.candidates, 'candidate')}"
            )
            self._line(self.header)
            if event.launch:
                self._line(event.launch)
        elif isinstance(event, RoundStarted):
            self.round = event.round
            if not self.live:
                self._line(f"round {event.round}/{event.rounds}")
        elif isinstance(event, CandidateStage):
            if event.role == "planner":
                if not self.live and event.stage == "requested":
                    self._line(f"  round {event.round}: planning")
                return
            if event.stage == "tuning":
                cell = f"tuning {event.done}/{event.configurations}"
                if not self.live and event.done == 0:
                    self._line(f"  {event.round}.{event.index} tuning "
                               f"({_plural(event.configurations, 'configuration')})")  # fmt: skip
                self.cells[(event.round, event.index)] = cell
                if self.live:
                    self._redraw()
                return
            self.cells[(event.round, event.index)] = {
                "requested": "writing", "generated": "building", "evaluating": "timing",
            }[event.stage] if event.role != "debugger" else "repairing"  # fmt: skip
            if event.role == "debugger" and event.stage == "requested" and not self.live:
                self._line(f"  {event.round}.{event.index} repairing (attempt {event.attempt})")
            if event.gpu:  # several GPUs: which one judges it
                self.cells[(event.round, event.index)] += f" {event.gpu}"
                self._line(f"  {event.round}.{event.index} on {event.gpu}")
        elif isinstance(event, CandidateEvaluated):
            o = event.outcome
            self.best = event.best
            cell = _SHORT.get(o.status, o.status)
            if o.status in ("ok", "slower") and o.speedup is not None:
                cell += f" {o.speedup:.2f}x"
            self.cells[(o.round, o.index)] = cell
            if not self.live:
                self._line(f"  {o.round}.{o.index} {self._plain(o)}")
        elif isinstance(event, RunFinished):
            if self.live and self._drawn:
                self._redraw()
                for o in event.result.candidates:  # the table has no room for the reasons
                    if o.status not in ("ok", "slower") and o.message.strip():
                        reason = o.message.strip().splitlines()[0][:160]
                        print(f"  {o.round}.{o.index} {o.status}: {reason}", file=self.stream)
            return
        if self.live:
            self._redraw()

    def _plain(self, o: CandidateOutcome) -> str:
        text: str = o.status
        if o.ms is not None:
            text += f" {o.ms:.4f} ms"
        if o.speedup is not None:
            text += f" {o.speedup:.2f}x"
        if o.tuning is not None and o.tuning.best is not None:
            text += " with " + " ".join(f"{k}={v}" for k, v in o.tuning.best.items())
        if o.status not in ("ok", "slower") and o.message:
            text += ": " + o.message.strip().splitlines()[0][:160]
        if self.best is not None and self.best.speedup is not None:
            text += f"  (best {self.best.speedup:.2f}x)"
        return text

    def _line(self, text: str) -> None:
        if self.live:
            return
        print(text, file=self.stream, flush=True)

    def _redraw(self) -> None:
        width = 14
        lines = [self.header]
        lines.append(
            "round  " + "".join(f"{f'#{i}':<{width}}" for i in range(1, self.candidates + 1))
        )
        for r in range(1, self.round + 1):
            row = [self.cells.get((r, i), "") for i in range(1, self.candidates + 1)]
            lines.append(f"{r:<7}" + "".join(f"{c[: width - 1]:<{width}}" for c in row))
        if self.best is not None and self.best.speedup is not None:
            lines.append(f"best: {self.best.speedup:.2f}x (round {self.best.round} "
                         f"candidate {self.best.index})")  # fmt: skip
        out = ""
        if self._drawn:
            out += f"\x1b[{self._drawn}F\x1b[J"
        out += "\n".join(lines) + "\n"
        self.stream.write(out)
        self.stream.flush()
        self._drawn = len(lines)


# ---------------------------------------------------------------------------------------------
# Wiring


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _fail(message: str, code: int, as_json: bool, kernel: str) -> int:
    print(f"cuda-llm optimize: {message}", file=sys.stderr)
    if as_json:
        empty = OptimizeResult(kernel=kernel, baseline_ms=None, best_ms=None, speedup=None,
                               accepted=False, candidates=(), best_source=None, message=message,
                               error=message)  # fmt: skip
        print(json.dumps(_json(empty, code), indent=2))
    return code


def _json(result: OptimizeResult, code: int) -> dict[str, object]:
    """The contract's object; a failed run adds `error` and `exit_code` (as `bench` does)."""
    data: dict[str, object] = result.to_json()
    if result.error:
        data.update(error=result.error, exit_code=code)
    return data


def run(args: argparse.Namespace) -> int:
    as_json = args.format == "json"
    path: Path = args.file
    if args.record and args.replay:
        return _fail("--record and --replay exclude each other", EXIT_USAGE, as_json, args.kernel)
    original_bytes, problem = read_source_bytes(path)  # a FIFO or /dev/zero would never end
    if problem is not None:
        return _fail(f"{path}: {problem}", EXIT_USAGE, as_json, args.kernel)
    try:
        text = original_bytes.decode("utf-8")
    except UnicodeDecodeError:
        return _fail(f"{path} is not UTF-8 text", EXIT_ERROR, as_json, args.kernel)
    names = [k.name for k in find_kernels(text)]
    if args.kernel not in names:
        return _fail(no_kernel(args.kernel, path, names), EXIT_USAGE, as_json, args.kernel)
    if args.demo:
        return _demo(args, text, path)

    settings = Settings()
    if args.model:
        settings = dataclasses.replace(settings, model=args.model)
    if args.base_url:
        settings = dataclasses.replace(settings, base_url=args.base_url)
    sampling = {"max_tokens": args.max_tokens, "temperature": args.temperature,
                "reasoning_effort": args.reasoning_effort,
                "compile_timeout_s": args.compile_timeout and min(600, args.compile_timeout),
                "strategy": args.strategy, "launch": args.launch,
                }  # fmt: skip
    settings = dataclasses.replace(settings, **{k: v for k, v in sampling.items() if v is not None})
    config = config_from_settings(
        settings, rounds=args.rounds, candidates=args.candidates, record_dir=args.record,
        replay_dir=args.replay, time_budget_s=args.time_budget, token_budget=args.token_budget,
        repairs=args.repairs, tune_points=args.tune_points,
    )  # fmt: skip
    try:
        evaluator = make_evaluator(gpus=args.gpus, cluster=args.cluster)
        evaluator.device_facts()
    except NoGpuError as exc:
        return _fail(no_gpu_message(exc), EXIT_NO_GPU, as_json, args.kernel)
    except ImportError as exc:
        return _fail(f"cannot load the GPU evaluator: {exc}", EXIT_NO_GPU, as_json, args.kernel)
    except (ValueError, RecordingError) as exc:
        return _fail(str(exc), EXIT_USAGE, as_json, args.kernel)
    return _finish(args, text, original_bytes, settings, config, evaluator)


def _finish(
    args: argparse.Namespace, text: str, original_bytes: bytes, settings: Settings,
    config: OptimizeConfig, evaluator: Evaluator, demo: str | None = None,
) -> int:  # fmt: skip
    """Run the loop on `evaluator`, then print the result and apply `--write`.

    `demo`: the closing note of a `--demo` run (its output is labelled throughout)."""
    as_json, path = args.format == "json", args.file
    try:
        result = asyncio.run(_optimize(args, text, settings, config, evaluator))
    finally:
        evaluator.close()

    if as_json:
        data = _json(result, EXIT_ERROR)
        if demo:
            data["demo"] = True
        print(json.dumps(data, indent=2))
    if result.error:
        print(f"cuda-llm optimize: {result.message}", file=sys.stderr)
        return EXIT_ERROR
    if result.cancelled:
        print(f"cuda-llm optimize: {result.message}", file=sys.stderr)
        return EXIT_INTERRUPTED
    print(result.message, file=sys.stderr)
    if demo:
        print(f"cuda-llm optimize: {demo}", file=sys.stderr)
    if not result.accepted or result.best_source is None:
        return EXIT_OK
    try:  # kernel, helpers above the spec, host code dropped; its launch in the spec and sites
        applied = winner_text(text, args.kernel, result.best_source, result.best_launch)
    except NotApplicable as exc:
        return _fail(f"the winner cannot be applied to {path}: {exc}", EXIT_ERROR, False, "")
    new_text = applied.text
    for note in applied.notes:  # launch sites that could not be rewritten: by hand
        print(f"cuda-llm optimize: change by hand: {note}", file=sys.stderr)
    if not as_json:
        if demo:
            print(f"# {DEMO_LABEL}: not checked on your GPU")
        sys.stdout.write(unified_diff(text, new_text, str(path)))
    if args.write:
        checked = write_check(new_text, text, path, settings.include_paths)
        if checked.refused is not None:
            print(f"cuda-llm optimize: not written: {checked.refused}", file=sys.stderr)
            return EXIT_ERROR
        if checked.note:
            print(f"cuda-llm optimize: {checked.note}", file=sys.stderr)
        return write_back("optimize", path, original_bytes, new_text)
    return EXIT_OK


DEMO_LABEL = "DEMO (a recorded session shipped with cuda-llm-lsp)"


def _demo(args: argparse.Namespace, text: str, path: Path) -> int:
    """The loop on a shipped recording: recorded replies and outcomes, labelled as a demo."""
    as_json = args.format == "json"
    shipped = demos()
    demo = shipped.get(args.kernel)
    if demo is None:
        listed = ", ".join(f"{d.example} --kernel {d.kernel}" for d in shipped.values())
        return _fail(f"no demo recording for kernel {args.kernel!r}; demos: {listed}",
                     EXIT_USAGE, as_json, args.kernel)  # fmt: skip
    clashes = [flag for flag in ("write", "record", "replay", "base_url", "model")
               if getattr(args, flag)]  # fmt: skip
    if clashes:
        flags = ", ".join("--" + flag.replace("_", "-") for flag in clashes)
        return _fail(f"--demo replays a recorded session: {flags} cannot go with it (its "
                     "kernels were never checked on your GPU)", EXIT_USAGE, as_json,
                     args.kernel)  # fmt: skip
    shape = recorded_shape(demo.llm_dir, demo.kernel) or (1, 1)
    settings = Settings()
    config = config_from_settings(
        settings, rounds=min(args.rounds or shape[0], shape[0]),
        candidates=min(args.candidates or shape[1], shape[1]), replay_dir=str(demo.llm_dir),
        profile=False,  # Nsight Compute would run the kernel on a real GPU
    )  # fmt: skip
    try:
        evaluator = RecordedEvaluator(demo.outcomes)
    except RecordingError as exc:  # a broken installation
        return _fail(str(exc), EXIT_ERROR, as_json, args.kernel)
    print(f"cuda-llm optimize: {DEMO_LABEL}: the model's replies and the GPU's results are "
          "recorded (illustrative figures, not measurements); no model is called and nothing "
          "runs on a GPU.", file=sys.stderr)  # fmt: skip
    args.no_history = True  # a demo is not a run of yours
    note = (f"{DEMO_LABEL}: the figures above are recorded, not measured. On a GPU, "
            f"`cuda-llm optimize {path} --kernel {demo.kernel} --replay {demo.llm_dir}` checks "
            "and times the same candidates for real.")  # fmt: skip
    return _finish(args, text, text.encode("utf-8"), settings, config, evaluator, demo=note)


async def _optimize(
    args: argparse.Namespace, text: str, settings: Settings, config: OptimizeConfig,
    evaluator: Evaluator,
) -> OptimizeResult:  # fmt: skip
    history: RunHistory | None = None
    if not args.no_history:  # the run matters more than its record
        history = await history_for_run(
            lambda exc: print(f"cuda-llm optimize: history not recorded: {exc}", file=sys.stderr)
        )
    display = Display(sys.stderr, live=sys.stderr.isatty())
    request = OptimizeRequest(file_text=text, kernel=args.kernel, path=args.file.resolve(),
                              settings=settings, seed=args.seed)  # fmt: skip
    return await run_fsr(request, config, evaluator, on_event=display, history=history)
