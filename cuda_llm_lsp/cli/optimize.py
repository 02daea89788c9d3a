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
from pathlib import Path

from cuda_llm_lsp.cli.common import (
    add_gpu_arguments,
    add_setting_flag,
    no_kernel,
    read_source_bytes,
    write_back,
)
from cuda_llm_lsp.cli.progress import Display, interrupt_cancels
from cuda_llm_lsp.config import (
    LAUNCH_POLICIES,
    REASONING_EFFORTS,
    STRATEGIES,
    Settings,
)
from cuda_llm_lsp.demo import demos
from cuda_llm_lsp.engine import (
    DEMO_LABEL,
    CancelToken,
    GpuService,
    OptimizeOutcome,
    Refusal,
    demo_pace,
    endpoint_key_missing,
    gpu_missing,
    gpus_problem,
    history_for_run,
    make_evaluator,
    optimize_in_file,
)
from cuda_llm_lsp.engine.accept import check_write, show_diff
from cuda_llm_lsp.engine.build import RecordedEvaluator, RecordingError, RunHistory, recorded_shape
from cuda_llm_lsp.evaluate.types import no_gpu_message
from cuda_llm_lsp.fsr.types import (
    OptimizeConfig,
    OptimizeResult,
    config_from_settings,
)
from cuda_llm_lsp.source.kernels import find_kernels

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_NO_GPU, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


#: The flags that set a setting for one run: (its `Settings` field, metavar, help); their
#: ranges and defaults come from `config.SCHEMA`, as the server's.
SETTING_FLAGS = (
    ("rounds", "R", "rounds of candidates"),
    ("candidates", "N", "candidates per round"),
    ("max_tokens", "T", "output tokens per request, reasoning included"),
    ("temperature", "X", "sampling temperature; not sent: the model's own"),
    ("repairs", "D", "repair attempts per failing candidate, both strategies"),
    ("compile_timeout_s", "S", "seconds one candidate's compile may take"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, metavar="FILE", help=".cu file")
    parser.add_argument("--kernel", required=True, metavar="NAME", help="the kernel to optimize")
    for name, metavar, text in SETTING_FLAGS:
        add_setting_flag(parser, name, metavar, text)
    parser.add_argument(
        "--write",
        action="store_true",
        help="apply the winner to FILE (kernel, helpers; its own launch in the spec and launch "
        "sites)",
    )
    parser.add_argument(
        "--write-unproven",
        action="store_true",
        help="with --write: write a winner that adds more than the kernel's body even when no "
        "nvcc build could prove it adds no host code (no nvcc, or the original does not build)",
    )
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--record", metavar="DIR", help="save every prompt and reply in DIR")
    parser.add_argument("--replay", metavar="DIR", help="answer from a recording, no endpoint")
    parser.add_argument("--model", help="model name (default: CUDA_LLM_MODEL or gpt-4o-mini)")
    parser.add_argument("--base-url", help="OpenAI-compatible endpoint (default: OPENAI_BASE_URL)")
    effort = "reasoning models' effort (default: not sent)"
    parser.add_argument("--reasoning-effort", choices=REASONING_EFFORTS, help=effort)
    strategy = (
        "fsr (default): rounds of candidates; plan: a planner's K plans, a coder per plan, "
        "failing ones repaired by a debugger"
    )
    parser.add_argument("--strategy", choices=STRATEGIES, help=strategy)
    launch = (
        "may candidates choose their own grid/block/smem: auto (default: only if every launch "
        "site of the kernel can be rewritten), keep, free"
    )
    parser.add_argument("--launch", choices=LAUNCH_POLICIES, help=launch)
    points = (
        "configurations tried per correct candidate whose launch block declares tune.NAME "
        f"(0-1000, default {OptimizeConfig().tune_points}; 0: its default only)"
    )
    parser.add_argument("--tune-points", type=_tune_points, metavar="P", help=points)
    parser.add_argument("--seed", type=int, help="input seed (default: a fresh one)")
    parser.add_argument("--time-budget", type=float, metavar="S", help="stop after S seconds")
    parser.add_argument("--token-budget", type=int, metavar="T", help="stop after T tokens")
    parser.add_argument("--no-history", action="store_true", help="do not record the run")
    add_gpu_arguments(parser, "judging candidates in parallel")
    demo = (
        "replay a recorded session shipped with the package: no GPU, no endpoint "
        "(examples/softmax.cu --kernel softmax_rows)"
    )
    parser.add_argument("--demo", action="store_true", help=demo)
    parser.epilog = (
        "exit codes: 0 done (improved or not), 1 error, 2 usage (no such file or kernel), "
        "3 no GPU, 130 interrupted. "
        "The API key comes from OPENAI_API_KEY."
    )


def _tune_points(value: str) -> int:
    number = int(value)
    if not 0 <= number <= 1000:
        raise argparse.ArgumentTypeError("must be between 0 and 1000")
    return number


# ---------------------------------------------------------------------------------------------
# Wiring


def _no_usable_spec(refusal: Refusal) -> str:
    """No spec, or one with errors: what to do about it, with the draft to start from."""
    if refusal.kind == "spec_errors":
        shown = refusal.problems[:5]
        listed = "; ".join(f"line {p.span.start.line + 1}: {p.message}" for p in shown)
        return f"the test spec of {refusal.kernel} has errors: {listed}"
    return (
        f"no test spec for {refusal.kernel}: add a /* @cuda-llm */ block above the kernel so "
        f"candidates can be checked. A draft to review:\n{(refusal.draft or '').rstrip()}"
    )


def _fail(message: str, code: int, as_json: bool, kernel: str) -> int:
    print(f"cuda-llm optimize: {message}", file=sys.stderr)
    if as_json:
        empty = OptimizeResult(
            kernel=kernel,
            baseline_ms=None,
            best_ms=None,
            speedup=None,
            accepted=False,
            candidates=(),
            best_source=None,
            message=message,
            error=message,
        )
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
    sampling = {
        "max_tokens": args.max_tokens,
        "temperature": args.temperature,
        "reasoning_effort": args.reasoning_effort,
        "compile_timeout_s": args.compile_timeout and min(600, args.compile_timeout),
        "strategy": args.strategy,
        "launch": args.launch,
    }
    settings = dataclasses.replace(settings, **{k: v for k, v in sampling.items() if v is not None})
    bad_gpus = None if args.cluster else gpus_problem(args.gpus)
    if bad_gpus is not None:  # a usage error first: what is missing matters only after it
        return _fail(bad_gpus, EXIT_USAGE, as_json, args.kernel)
    missing = _missing_pieces(args, settings, path)
    if missing is not None:
        return _fail(missing[0], missing[1], as_json, args.kernel)
    config = config_from_settings(
        settings,
        rounds=args.rounds,
        candidates=args.candidates,
        record_dir=args.record,
        replay_dir=args.replay,
        time_budget_s=args.time_budget,
        token_budget=args.token_budget,
        repairs=args.repairs,
        tune_points=args.tune_points,
    )
    gpus = GpuService(lambda: make_evaluator(gpus=args.gpus, cluster=args.cluster))
    return _finish(args, text, original_bytes, settings, config, gpus)


def _missing_pieces(
    args: argparse.Namespace, settings: Settings, path: Path
) -> tuple[str, int] | None:
    """Every piece a real run lacks (a GPU, a key for OpenAI's API), each with what brings it,
    and the exit code; None when nothing is known missing. Checked before any compile."""
    pieces: list[str] = []
    code = EXIT_USAGE
    problem = None if args.cluster else gpu_missing()
    if problem is not None:
        found = no_gpu_message(problem).split(": ", 1)[0]
        pieces.append(
            f"a CUDA GPU: {found}; on a machine with one, install the NVIDIA driver (your "
            "distribution's nvidia-driver package), then `nvidia-smi` lists the GPU"
        )
        code = EXIT_NO_GPU
    if not args.replay and endpoint_key_missing(settings):
        pieces.append(
            "an API key for the model: `export OPENAI_API_KEY=...` (or `--base-url "
            "http://127.0.0.1:8000/v1` for a local OpenAI-compatible server, which needs none)"
        )
    if not pieces:
        return None
    listed = "; ".join(f"({i}) {piece}" for i, piece in enumerate(pieces, 1))
    return (
        f"a real run needs what this machine lacks: {listed}. Meanwhile `cuda-llm optimize "
        f"{path} --kernel {args.kernel} --demo` replays a recorded run, and `cuda-llm check "
        f"{path}` works without either",
        code,
    )


def _finish(
    args: argparse.Namespace,
    text: str,
    original_bytes: bytes,
    settings: Settings,
    config: OptimizeConfig,
    gpus: GpuService,
    demo: str | None = None,
) -> int:
    """Run the loop on `gpus` (Ctrl-C cancels it), then print the result and apply `--write`.

    `demo`: the closing note of a `--demo` run (its output is labelled throughout)."""
    as_json, path = args.format == "json", args.file
    token = CancelToken()
    try:
        with interrupt_cancels(token, "optimize"):
            outcome = asyncio.run(_optimize(args, text, settings, config, gpus, token))
    finally:
        gpus.close()
    if isinstance(outcome, Refusal):
        if outcome.kind == "no_gpu":
            return _fail(no_gpu_message(outcome.message), EXIT_NO_GPU, as_json, args.kernel)
        if outcome.kind in ("no_spec", "spec_errors"):
            return _fail(_no_usable_spec(outcome), EXIT_ERROR, as_json, args.kernel)
        return _fail(outcome.message, EXIT_USAGE, as_json, args.kernel)
    result = outcome.result
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
    if outcome.not_applicable is not None:
        message = f"the winner cannot be applied to {path}: {outcome.not_applicable}"
        return _fail(message, EXIT_ERROR, False, "")
    if outcome.edit is None:
        return EXIT_OK
    # the kernel, helpers above the spec, host code dropped; its launch in the spec and sites
    new_text = outcome.edit.text
    for note in outcome.edit.notes:  # launch sites that could not be rewritten: by hand
        print(f"cuda-llm optimize: change by hand: {note}", file=sys.stderr)
    if not as_json:
        if demo:
            print(f"# {DEMO_LABEL}: not checked on your GPU")
        sys.stdout.write(show_diff(text, new_text, str(path)))
    if args.write:
        checked = check_write(new_text, text, path, settings)
        if checked.refused is not None:
            print(f"cuda-llm optimize: not written: {checked.refused}", file=sys.stderr)
            return EXIT_ERROR
        if checked.unproven and not args.write_unproven:
            print(
                f"cuda-llm optimize: not written: {checked.unproven}; pass --write-unproven "
                "to write it anyway",
                file=sys.stderr,
            )
            return EXIT_ERROR
        if checked.note:
            print(f"cuda-llm optimize: {checked.note}", file=sys.stderr)
        return write_back("optimize", path, original_bytes, new_text)
    return EXIT_OK


def _demo(args: argparse.Namespace, text: str, path: Path) -> int:
    """The loop on a shipped recording: recorded replies and outcomes, labelled as a demo."""
    as_json = args.format == "json"
    shipped = demos()
    demo = shipped.get(args.kernel)
    if demo is None:
        listed = ", ".join(f"{d.example} --kernel {d.kernel}" for d in shipped.values())
        return _fail(
            f"no demo recording for kernel {args.kernel!r}; demos: {listed}",
            EXIT_USAGE,
            as_json,
            args.kernel,
        )
    clashes = [
        flag for flag in ("write", "record", "replay", "base_url", "model") if getattr(args, flag)
    ]
    if clashes:
        flags = ", ".join("--" + flag.replace("_", "-") for flag in clashes)
        return _fail(
            f"--demo replays a recorded session: {flags} cannot go with it (its "
            "kernels were never checked on your GPU)",
            EXIT_USAGE,
            as_json,
            args.kernel,
        )
    shape = recorded_shape(demo.llm_dir, demo.kernel) or (1, 1)
    settings = Settings()
    config = config_from_settings(
        settings,
        rounds=min(args.rounds or shape[0], shape[0]),
        candidates=min(args.candidates or shape[1], shape[1]),
        replay_dir=str(demo.llm_dir),
        # at the recording's pace, so the rounds can be followed (CUDA_LLM_DEMO_PACE=0: at once)
        replay_pace=demo_pace(),
        profile=False,  # Nsight Compute would run the kernel on a real GPU
    )
    try:
        recorded = RecordedEvaluator(demo.outcomes)
    except RecordingError as exc:  # a broken installation
        return _fail(str(exc), EXIT_ERROR, as_json, args.kernel)
    print(
        f"cuda-llm optimize: {DEMO_LABEL}: a session shipped with cuda-llm-lsp; the model's "
        "replies and the GPU's results are recorded (illustrative figures), replayed at the "
        "recording's pace; no model is called and nothing runs on a GPU.",
        file=sys.stderr,
    )
    args.no_history = True  # a demo is not a run of yours
    note = (
        "DEMO: the figures above are recorded, not measured. On a GPU, "
        f"`cuda-llm optimize {path} --kernel {demo.kernel} --replay {demo.llm_dir}` checks "
        "and times the same candidates for real."
    )
    gpus = GpuService(lambda: recorded)
    return _finish(args, text, text.encode("utf-8"), settings, config, gpus, demo=note)


async def _optimize(
    args: argparse.Namespace,
    text: str,
    settings: Settings,
    config: OptimizeConfig,
    gpus: GpuService,
    token: CancelToken,
) -> OptimizeOutcome | Refusal:
    history: RunHistory | None = None
    if not args.no_history:  # the run matters more than its record
        history = await history_for_run(
            lambda exc: print(f"cuda-llm optimize: history not recorded: {exc}", file=sys.stderr)
        )
    display = Display(sys.stderr, live=sys.stderr.isatty())
    return await optimize_in_file(
        text,
        args.file.resolve(),
        args.kernel,
        settings,
        config,
        gpus,
        history=history,
        seed=args.seed,
        cancel=token,
        on_event=display,
    )
