"""Tuning inside the FSR loop ([tune]): a correct candidate whose launch block declares
`tune.NAME` is tuned before it is ranked, ranks (and wins) with its best configuration written
in as its defaults, the next prompt tells the model the best configuration and the spread, the
JSON and the history carry `tuning`; malformed tunables are `bad_launch`; configurations that
fail are counted; a fast configuration that fails on new inputs never wins.

The model is the scripted OpenAI-compatible HTTP server (real openai SDK); the GPU is the recorded
evaluator, whose entries match a configuration by the binary's `-D` defines and the pinned text
(the best values written in, built without `-D`) by its `#define`. The CLI test builds with the
real NVRTC.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from cuda_llm_lsp.evaluate.recorded import RecordedEvaluator
from cuda_llm_lsp.fsr.endpoint import OpenAiLlm
from cuda_llm_lsp.fsr.history import RunHistory
from cuda_llm_lsp.fsr.loop import optimize
from cuda_llm_lsp.fsr.tuning import MIN_TUNE_S, options_for
from cuda_llm_lsp.fsr.types import (
    CandidateStage,
    OptimizeConfig,
    OptimizeRequest,
    OptimizeResult,
    ProgressEvent,
)
from cuda_llm_lsp.source.spec.launch import LaunchConfig
from cuda_llm_lsp.tune.search import TuneOptions
from tests.support.fsr_fakes import SAXPY_FILE, FakeToolchain, saxpy_candidate
from tests.support.scripted_llm import ScriptedLlmServer, kernel_reply
from tests.support.tuned_softmax import tune_in_loop

ROOT = Path(__file__).resolve().parents[2]
ORIGINAL = ROOT / "tests" / "data" / "replies" / "originals" / "saxpy.cu"

BLOCK = """\
/* @cuda-llm launch
tune.THREADS = [128, 256, 512, 1024]
grid = "cdiv(n, THREADS)"
block = "THREADS"
*/
"""


def tuned_reply(marker: str = "tuned", block: str = BLOCK) -> str:
    """A saxpy whose block size is a tunable with no `#define` (its default: the first, 128)."""
    return block + saxpy_candidate(marker).replace(
        "blockIdx.x * blockDim.x", "blockIdx.x * THREADS"
    )


def per_config(marker: str, times: dict[int, float], **fields: Any) -> list[dict[str, Any]]:
    return [
        {
            "defines": {"THREADS": t},
            "contains": f"variant: {marker}",
            "status": "ok",
            "ms": ms,
            **fields.get(str(t), {}),
        }
        for t, ms in times.items()
    ]


def pinned(threads: int, ms: float, status: str = "ok") -> dict[str, Any]:
    """The winner's text with THREADS written in, built without -D (its re-validation)."""
    return {"contains": f"#define THREADS {threads}\n", "status": status, "ms": ms}


TIMES = {128: 0.8, 256: 0.5, 512: 0.3, 1024: 0.4}


def step(round_: int, code: str) -> dict[str, Any]:
    return {"text": kernel_reply(code), "match": f"This is round {round_}, candidate 1 of 1."}


Ran = tuple[OptimizeResult, list[str], RecordedEvaluator, list[ProgressEvent]]


async def run(
    steps: list[dict[str, Any]],
    outcomes: dict[str, Any],
    *,
    rounds: int = 1,
    history: RunHistory | None = None,
    **config: Any,
) -> Ran:
    evaluator = RecordedEvaluator(outcomes)
    events: list[ProgressEvent] = []
    with ScriptedLlmServer(steps) as server:
        settings = {
            "rounds": rounds,
            "candidates": 1,
            "profile": False,
            "repairs": 0,
            "patience": 5,
            "base_url": server.base_url,
            "api_key": "k",
            "model": "m",
        } | config
        result = await optimize(
            OptimizeRequest(file_text=SAXPY_FILE, kernel="saxpy", seed=11),
            OptimizeConfig(**settings),
            evaluator,
            OpenAiLlm(OptimizeConfig(**settings)),
            toolchain=FakeToolchain(),
            history=history,
            on_event=events.append,
        )
        prompts = [r["body"]["messages"][-1]["content"] for r in server.chat_requests()]
    return result, prompts, evaluator, events


async def test_a_tuned_candidate_wins_with_its_best_configuration(tmp_path: Path) -> None:
    outcomes = {
        "baseline": {"ms": 1.0, "spread_pct": 0.5},
        "candidates": [
            *per_config("tuned", TIMES),
            pinned(512, 0.3),
            {"contains": "variant: plain", "status": "ok", "ms": 0.45},
        ],
    }
    history = RunHistory(tmp_path / "h.sqlite3")
    steps = [step(1, tuned_reply()), step(2, saxpy_candidate("plain"))]
    result, prompts, evaluator, events = await run(steps, outcomes, rounds=2, history=history)

    assert result.accepted, result.message
    first = next(c for c in result.candidates if c.round == 1)
    assert first.status == "ok" and first.ms == 0.3 and first.tuning is not None
    assert first.tuning.best == {"THREADS": 512} and first.tuning.default == {"THREADS": 128}
    # it ranks and wins with THREADS=512 (0.3 ms), not its default (0.8 ms): the plain 0.45 ms
    # of round 2 would beat the default
    assert result.best_ms == 0.3 and "variant: tuned" in (result.best_source or "")
    assert result.best_launch == LaunchConfig(("cdiv(n, 512)",), ("512",), "0")
    assert "#ifndef THREADS\n#define THREADS 512\n#endif\n" in (result.best_source or "")
    assert "@cuda-llm" not in (result.best_source or "")
    # every configuration was built with its -D and run with its own launch
    configs = {s.cases()[-1].block[0] for s in evaluator.launched}
    assert configs >= {128, 256, 512, 1024}
    # the winner's re-validation ran the pinned text (no -D) with the resolved launch
    assert evaluator.calls[-1][1].startswith("#ifndef THREADS\n#define THREADS 512")
    assert evaluator.launched[-1].cases()[-1].block == (512, 1, 1)

    launch_rule = prompts[0]
    assert "tune.NAME = [64, 128, 256]" in launch_rule and "-DNAME=value" in launch_rule
    round2 = prompts[1]
    assert "Tuned 4 configuration(s) of your tunables (exhaustive search of 4); 4 correct" in round2
    assert "Best: THREADS=512, 0.3 ms (3.33x the original)" in round2
    assert "your default THREADS=128: 0.8 ms" in round2
    assert "slowest correct / fastest: 2.67x" in round2
    assert "Its launch: grid=cdiv(n, 512) block=512 smem=0." in round2

    tuning = result.to_json()["candidates"][0]["tuning"]  # type: ignore[index]
    assert tuning == {
        "strategy": "exhaustive",
        "points": 4,
        "failed": 0,
        "space_size": 4,
        "best": {"THREADS": 512},
        "best_ms": 0.3,
        "default": {"THREADS": 128},
        "default_ms": 0.8,
        "spread": 0.8 / 0.3,
        "stopped": None,
    }
    assert result.to_json()["candidates"][1]["tuning"] is None  # type: ignore[index]
    assert result.run_id is not None
    recorded = {c.round: c for c in history.candidates(result.run_id)}
    assert recorded[1].tuning == tuning and recorded[2].tuning is None
    assert recorded[1].launch == "grid=cdiv(n, 512) block=512 smem=0"

    tuning_stages = [e for e in events if isinstance(e, CandidateStage) and e.stage == "tuning"]
    assert tuning_stages[0].configurations == 4 and tuning_stages[0].done == 0
    assert [e.done for e in tuning_stages[1:]] == [1, 2, 3, 4]


async def test_malformed_tunables_are_bad_launch_with_the_parsers_words() -> None:
    twice = BLOCK.replace("[128, 256, 512, 1024]", "[128, 256, 256]")
    steps = [step(1, tuned_reply(block=twice)), step(2, saxpy_candidate("plain"))]
    outcomes = {"candidates": [{"contains": "variant: plain", "status": "ok", "ms": 0.5}]}
    result, prompts, evaluator, _ = await run(steps, outcomes, rounds=2)
    first = next(c for c in result.candidates if c.round == 1)
    assert first.status == "bad_launch" and "tune.THREADS lists 256 twice" in first.message
    assert not any("variant: tuned" in source for _, source in evaluator.calls)  # never run
    assert "bad_launch" in prompts[1] and "tune.THREADS lists 256 twice" in prompts[1]

    unknown = BLOCK.replace("*/", 'restrict = ["THREADS * ITEMS <= 64"]\n*/')
    result, _, _, _ = await run([step(1, tuned_reply(block=unknown))], outcomes)
    (only,) = result.candidates
    assert only.status == "bad_launch" and "unknown name 'ITEMS'" in only.message


async def test_failing_configurations_are_counted_and_a_correct_one_ranks() -> None:
    times = {128: 0.8, 256: 0.5, 512: 0.3, 1024: 0.1}  # the fastest is wrong
    wrong = {"1024": {"status": "wrong_output", "message": "case 2 (n=1048576): y[5] wrong"}}
    outcomes = {
        "baseline": {"ms": 1.0},
        "candidates": [*per_config("tuned", times, **wrong), pinned(512, 0.3)],
    }
    result, _, _, _ = await run([step(1, tuned_reply())], outcomes)
    (only,) = result.candidates
    assert only.status == "ok" and only.tuning is not None and only.tuning.best == {"THREADS": 512}
    assert only.tuning.failed == 1
    assert "4 configuration(s)" in only.tuning.feedback
    assert "3 correct, 1 not (wrong_output)" in only.tuning.feedback
    assert result.accepted and "#define THREADS 512\n" in (result.best_source or "")


async def test_a_fast_configuration_that_fails_on_new_inputs_never_wins() -> None:
    """The attack: the default is correct, the fastest configuration passes the screening but
    not its finalist re-check (new inputs, every case, hidden ones included). The search keeps
    the next finalist; the loop ranks with it and re-validates its pinned text."""
    times = {128: 0.8, 256: 0.5, 512: 0.3, 1024: 0.05}
    later = {"1024": {"later": {"status": "wrong_output", "message": "hidden case: n=1000003"}}}
    outcomes = {
        "baseline": {"ms": 1.0},
        "candidates": [
            *per_config("tuned", times, **later),
            pinned(512, 0.3),
            pinned(1024, 0.05, "wrong_output"),
        ],
    }
    result, _, evaluator, _ = await run([step(1, tuned_reply())], outcomes)
    (only,) = result.candidates
    assert only.tuning is not None and only.tuning.best == {"THREADS": 512}
    assert only.tuning.failed == 1 and "1 not (wrong_output)" in only.tuning.feedback
    assert result.accepted and result.best_ms == 0.3
    assert "#define THREADS 512\n" in (result.best_source or "")
    assert result.best_launch is not None and result.best_launch.block == ("512",)
    fast = [s for s in evaluator.launched if s.cases()[-1].block[0] == 1024]
    assert len(fast) == 2  # screened, then re-checked as a finalist (where it failed)


async def test_no_configuration_passing_again_ranks_the_candidate_as_failed() -> None:
    block = BLOCK.replace("[128, 256, 512, 1024]", "[128, 256]")
    flaky = {"status": "ok", "later": {"status": "nondeterministic", "message": "runs differ"}}
    outcomes = {
        "baseline": {"ms": 1.0},
        "candidates": per_config("tuned", {128: 0.5, 256: 0.4}, **{"128": flaky, "256": flaky}),
    }
    result, _, _, _ = await run([step(1, tuned_reply(block=block))], outcomes)
    (only,) = result.candidates
    assert only.status == "nondeterministic" and not result.accepted
    assert "None passed again on new inputs: it is ranked as failed." in only.message
    assert only.tuning is not None and only.tuning.best is None


async def test_with_tuning_off_the_default_is_written_in_and_ranks() -> None:
    outcomes = {
        "baseline": {"ms": 1.0},
        "candidates": [*per_config("tuned", TIMES), pinned(128, 0.8)],
    }
    result, _, evaluator, events = await run([step(1, tuned_reply())], outcomes, tune_points=0)
    (only,) = result.candidates
    assert only.status == "ok" and only.ms == 0.8 and only.tuning is None
    assert "#define THREADS 128\n" in only.source
    assert only.launch == LaunchConfig(("cdiv(n, 128)",), ("128",), "0")
    assert not any(isinstance(e, CandidateStage) and e.stage == "tuning" for e in events)
    assert {s.cases()[-1].block[0] for s in evaluator.launched} == {128}


async def test_tuning_cut_off_by_the_time_budget_ranks_the_default_configuration() -> None:
    """A search the budget stops before it measured anything (here `tune_budget_s` 0; in a run
    also the run's own time running out) is no failure: the candidate, correct with its default
    configuration, ranks with that configuration's figures, written in."""
    outcomes = {
        "baseline": {"ms": 1.0},
        "candidates": [*per_config("tuned", TIMES), pinned(128, 0.8)],
    }
    result, _, _, _ = await run([step(1, tuned_reply())], outcomes, tune_budget_s=0.0)
    (only,) = result.candidates
    assert only.status == "ok", only.message
    assert only.ms == 0.8 and only.speedup == 1.0 / 0.8
    assert only.tuning is not None and only.tuning.stopped == "budget"
    assert only.tuning.measured == 0 and only.tuning.best is None
    assert "It ranks with its default configuration" in only.tuning.feedback
    assert "#define THREADS 128\n" in only.source
    assert only.launch == LaunchConfig(("cdiv(n, 128)",), ("128",), "0")
    assert result.accepted and result.best_ms == 0.8


def test_too_little_time_left_skips_tuning() -> None:
    config = OptimizeConfig(tune_points=16, tune_budget_s=60.0)
    assert options_for(config, 1, None) == TuneOptions(16, 60.0, finalists=2, seed=1)
    assert options_for(config, 1, 30.0) == TuneOptions(16, 30.0, finalists=2, seed=1)
    assert options_for(config, 1, MIN_TUNE_S - 0.1) is None  # the default ranks, untuned
    assert options_for(config, 1, -5.0) is None
    assert options_for(dataclasses.replace(config, tune_points=0), 1, None) is None


def test_optimize_json_carries_tuning_with_real_nvrtc(tmp_path: Path) -> None:
    """`cuda-llm optimize --format json` end to end: the scripted endpoint, real NVRTC builds
    (every configuration with its -D; the winner's text, THREADS written in, without), the
    recorded GPU."""
    source = tmp_path / "saxpy.cu"
    source.write_text(ORIGINAL.read_text())
    reply = (
        BLOCK + 'extern "C" __global__ void saxpy(float a, const float* x, float* y, '
        "int n) {\n  // variant: tuned\n  int i = blockIdx.x * THREADS + threadIdx.x;\n"
        "  if (i < n) y[i] = fmaf(a, x[i], y[i]);\n}"
    )
    outcomes = {
        "baseline": {"ms": 1.0},
        "candidates": [*per_config("tuned", TIMES), pinned(512, 0.3)],
    }
    (tmp_path / "outcomes.json").write_text(json.dumps(outcomes))
    env = dict(
        os.environ,
        CUDA_LLM_DATA_DIR=str(tmp_path / "data"),
        CUDA_LLM_EVALUATOR=f"recorded:{tmp_path / 'outcomes.json'}",
    )
    with ScriptedLlmServer([{"text": kernel_reply(reply)}]) as server:
        args = [
            str(source),
            "--kernel",
            "saxpy",
            "--rounds",
            "1",
            "--candidates",
            "1",
            "--format",
            "json",
            "--launch",
            "free",
            "--base-url",
            server.base_url,
            "--compile-timeout",
            "300",
            "--tune-points",
            "8",
        ]
        done = subprocess.run(
            [sys.executable, "-m", "cuda_llm_lsp.cli", "optimize", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    (candidate,) = data["candidates"]
    assert candidate["status"] == "ok", candidate["message"]
    assert candidate["tuning"]["best"] == {"THREADS": 512}
    assert candidate["tuning"]["points"] == 4 and candidate["tuning"]["default_ms"] == 0.8
    assert data["accepted"] and data["best_ms"] == 0.3
    assert data["launch"] == {"grid": ["cdiv(n, 512)"], "block": ["512"], "smem": "0"}
    assert "#define THREADS 512" in data["best_source"]
    assert "1.1 tuning (4 configurations)" in done.stderr


async def test_the_gpu_tests_loop_runs_on_the_recorded_evaluator() -> None:
    """tests/gpu/test_tune_gpu.py's loop (real NVRTC, the scripted endpoint) dry-run on the CPU:
    per-configuration times from the recording, the winner's text THREADS=256 written in."""
    times = {64: 0.243, 128: 0.17, 256: 0.142, 512: 0.15}
    outcomes = {
        "baseline": {"ms": 0.2},
        "candidates": [
            *[
                {
                    "defines": {"THREADS": t},
                    "contains": "variant: tuned-rows",
                    "status": "ok",
                    "ms": ms,
                }
                for t, ms in times.items()
            ],
            pinned(256, 0.142),
        ],
    }
    result = await tune_in_loop(RecordedEvaluator(outcomes))
    (outcome,) = result.candidates
    assert outcome.tuning is not None and outcome.tuning.best == {"THREADS": 256}, outcome.message
    assert outcome.tuning.default == {"THREADS": 64} and outcome.ms == 0.142
    assert "#define THREADS 256\n" in outcome.source and result.accepted
    assert outcome.launch is not None and outcome.launch.block == ("256",)
