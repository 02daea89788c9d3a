"""FSR's repair step: a failing candidate goes to the same debugger as the `plan` strategy's, up to
`--repairs D` times, before it counts as failed. Against the scripted endpoint (real HTTP, the
real openai SDK); through `cuda-llm optimize` with real NVRTC and recorded outcomes, or in
process with the fake build where only the timing of a cancel matters."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from cuda_llm_lsp.cancel import CancelToken
from cuda_llm_lsp.evaluate.recorded import RecordedEvaluator
from cuda_llm_lsp.fsr.endpoint import OpenAiLlm
from cuda_llm_lsp.fsr.history import RunHistory
from cuda_llm_lsp.fsr.loop import optimize as run_loop
from cuda_llm_lsp.fsr.types import (
    CandidateStage,
    OptimizeConfig,
    OptimizeRequest,
    ProgressEvent,
)
from tests.support.fsr_fakes import SAXPY_FILE, FakeToolchain, saxpy_candidate
from tests.support.scripted_llm import ScriptedLlmServer, kernel_reply

ROOT = Path(__file__).resolve().parents[2]
ORIGINAL = ROOT / "tests" / "data" / "replies" / "originals" / "saxpy.cu"
OUTCOMES = {
    "baseline": {"ms": 1.0, "spread_pct": 0.5},
    "candidates": [
        {"contains": "variant: fixed", "status": "ok", "ms": 0.4},
        {"contains": "variant: steady", "status": "ok", "ms": 0.9},
    ],
}


def saxpy(variant: str, body: str = "  if (i < n) y[i] = fmaf(a, x[i], y[i]);") -> str:
    return (
        'extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {\n'
        f"  // variant: {variant}\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n{body}\n}}"
    )


BROKEN = saxpy("broken", "  if (i < n) y[i] = fmaf(a, x[i], y[i])")  # a missing ';'


def coders() -> list[dict[str, Any]]:
    return [
        {"text": kernel_reply(BROKEN), "match": "This is round 1, candidate 1 of 2."},
        {"text": kernel_reply(saxpy("steady")), "match": "This is round 1, candidate 2 of 2."},
    ]


def optimize(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    source = tmp_path / "saxpy.cu"
    if not source.exists():
        source.write_text(ORIGINAL.read_text())
    (tmp_path / "outcomes.json").write_text(json.dumps(OUTCOMES))
    env = dict(
        os.environ,
        CUDA_LLM_DATA_DIR=str(tmp_path / "data"),
        CUDA_LLM_EVALUATOR=f"recorded:{tmp_path / 'outcomes.json'}",
    )
    args = [
        str(source),
        "--kernel",
        "saxpy",
        "--rounds",
        "1",
        "--candidates",
        "2",
        "--format",
        "json",
        "--compile-timeout",
        "300",
        *flags,
    ]
    command = [sys.executable, "-m", "cuda_llm_lsp.cli", "optimize", *args]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_fsr_repairs_a_compile_error_into_the_winner_and_replays_it(tmp_path: Path) -> None:
    steps = [
        *coders(),
        {"text": kernel_reply(BROKEN), "match": "round 1, candidate 1, repair 1 of 3."},
        {"text": kernel_reply(saxpy("fixed")), "match": "round 1, candidate 1, repair 2 of 3."},
    ]
    with ScriptedLlmServer(steps) as server:
        done = optimize(tmp_path, "--base-url", server.base_url, "--record", str(tmp_path / "rec"))
        requests = [r["body"]["messages"][-1]["content"] for r in server.chat_requests()]
        left = server.remaining
    assert done.returncode == 0, done.stderr
    assert left == 0 and len(requests) == 4  # two coders, two repairs of candidate 1
    result = json.loads(done.stdout)
    first, second = sorted(result["candidates"], key=lambda c: c["index"])
    assert first["status"] == "ok" and first["message"].startswith("after 2 repair(s)")
    assert second["status"] == "ok" and "repair" not in second["message"]
    assert result["accepted"] and "variant: fixed" in result["best_source"]
    repair = next(r for r in requests if "repair 1 of 3" in r)
    assert "variant: broken" in repair and 'expected a ";"' in repair  # its own code and error
    assert "implements this plan" not in repair  # FSR has no plans
    assert "1.1 repairing (attempt 1)" in done.stderr and "1.1 repairing (attempt 2)" in done.stderr

    names = sorted(
        p.name.removeprefix("saxpy-r01-").rsplit("-", 1)[0] for p in (tmp_path / "rec").iterdir()
    )
    assert names == ["c01", "c01-debugger1", "c01-debugger2", "c02"]
    history = RunHistory(tmp_path / "data" / "history.sqlite3")
    (run,) = history.runs()
    kept = {c.index: c for c in history.candidates(run.id)}
    assert kept[1].status == "ok" and kept[1].message.startswith("after 2 repair(s)")
    assert "variant: fixed" in kept[1].source

    replayed = optimize(tmp_path, "--replay", str(tmp_path / "rec"))
    assert replayed.returncode == 0, replayed.stderr
    assert json.loads(replayed.stdout) == result


def test_repairs_are_bounded_by_d_and_zero_turns_them_off(tmp_path: Path) -> None:
    still_broken = {
        "text": kernel_reply(BROKEN),
        "match": "round 1, candidate 1, repair",
        "repeat": -1,
    }
    with ScriptedLlmServer([*coders(), still_broken]) as server:
        done = optimize(tmp_path, "--base-url", server.base_url, "--repairs", "2")
        repairs = [
            r for r in server.chat_requests() if "repair" in r["body"]["messages"][-1]["content"]
        ]
    assert done.returncode == 0, done.stderr
    assert len(repairs) == 2
    assert "repair 2 of 2." in repairs[-1]["body"]["messages"][-1]["content"]
    first = min(json.loads(done.stdout)["candidates"], key=lambda c: c["index"])
    assert first["status"] == "compile_error" and first["message"].startswith("after 2 repair(s)")

    with ScriptedLlmServer([*coders(), still_broken]) as server:
        done = optimize(tmp_path, "--base-url", server.base_url, "--repairs", "0")
        assert len(server.chat_requests()) == 2
    assert done.returncode == 0, done.stderr
    first = min(json.loads(done.stdout)["candidates"], key=lambda c: c["index"])
    assert first["status"] == "compile_error" and "repair" not in first["message"]


def test_a_bad_repairs_value_is_refused_before_anything_runs(tmp_path: Path) -> None:
    done = optimize(tmp_path, "--base-url", "http://127.0.0.1:9/v1", "--repairs", "-1")
    assert done.returncode != 0 and "--repairs" in done.stderr
    assert not (tmp_path / "data").exists()


async def test_cancel_during_a_repair_stops_at_once() -> None:
    wrong = {"contains": "variant: wrong", "status": "wrong_output", "message": "y[3] differs"}
    evaluator = RecordedEvaluator({"baseline": {"ms": 1.0}, "candidates": [wrong]})
    steps = [
        {"text": kernel_reply(saxpy_candidate("wrong")), "match": "candidate 1 of 1."},
        {"text": kernel_reply(saxpy_candidate("late")), "match": "repair 1 of 3.", "delay_s": 60},
    ]
    events: list[ProgressEvent] = []
    cancel = CancelToken()

    def seen(event: ProgressEvent) -> None:
        events.append(event)
        if isinstance(event, CandidateStage) and event.role == "debugger":
            asyncio.get_running_loop().call_later(0.2, cancel.cancel)  # the repair is in flight

    with ScriptedLlmServer(steps) as server:
        config = OptimizeConfig(
            rounds=1, candidates=1, profile=False, base_url=server.base_url, api_key="k", model="m"
        )
        llm = OpenAiLlm(config)
        request = OptimizeRequest(file_text=SAXPY_FILE, kernel="saxpy", seed=1)
        started = time.monotonic()
        result = await run_loop(
            request, config, evaluator, llm, on_event=seen, cancel=cancel, toolchain=FakeToolchain()
        )
        elapsed = time.monotonic() - started
        await llm.close()
        sent = len(server.chat_requests())
    assert result.cancelled and not result.accepted and elapsed < 10
    assert sent == 2  # the coder and the one repair: nothing after the cancel
    repairing = [e for e in events if isinstance(e, CandidateStage) and e.role == "debugger"]
    assert [(e.stage, e.attempt) for e in repairing] == [("requested", 1)]


def test_the_repairs_setting_reaches_the_run_config() -> None:
    from cuda_llm_lsp.config import settings_from_mapping
    from cuda_llm_lsp.fsr.types import config_from_settings

    settings, problems = settings_from_mapping({"cudaLlm": {"repairs": 1}})
    assert problems == [] and config_from_settings(settings).repairs == 1
    settings, problems = settings_from_mapping({"cudaLlm": {"repairs": 11}})
    assert config_from_settings(settings).repairs == 3 and "between 0 and 10" in problems[0]
