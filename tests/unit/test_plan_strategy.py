"""The `plan` strategy (CUDAMaster's planner -> coders -> debugger) through `cuda-llm optimize`
against the scripted endpoint (real HTTP, the real openai SDK), real NVRTC, recorded outcomes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from cuda_llm_lsp.fsr import prompts
from tests.support.scripted_llm import ScriptedLlmServer, kernel_reply

ROOT = Path(__file__).resolve().parents[2]
ORIGINAL = ROOT / "tests" / "data" / "replies" / "originals" / "saxpy.cu"
PLANS = [
    {"technique": "Vectorize with float4 loads", "why": "memory-bound at 40% of the floor",
     "expected": "close to the copy bandwidth"},
    {"technique": "Grid-stride loop with fmaf", "why": "fewer blocks to schedule",
     "expected": "a few percent"},
]  # fmt: skip


def saxpy(variant: str, body: str = "  if (i < n) y[i] = fmaf(a, x[i], y[i]);") -> str:
    return (
        'extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {\n'
        f"  // variant: {variant}\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n{body}\n}}"
    )


def steps() -> list[dict[str, Any]]:
    plan = "Here are the plans.\n```json\n" + json.dumps(PLANS, indent=1) + "\n```\n"
    return [
        {"text": plan, "match": "Propose 2 distinct plans"},
        {
            "text": kernel_reply(saxpy("broken", "  if (i < n) y[i] = fmaf(a, x[i], y[i])")),
            "match": "candidate 1 of 2. Implement this plan: Vectorize with float4 loads.",
        },
        {
            "text": kernel_reply(saxpy("steady")),
            "match": "candidate 2 of 2. Implement this plan: Grid-stride loop with fmaf.",
        },
        {"text": kernel_reply(saxpy("fixed")), "match": "round 1, candidate 1, repair 1 of 3."},
    ]


def optimize(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    source = tmp_path / "saxpy.cu"
    if not source.exists():
        source.write_text(ORIGINAL.read_text())
    outcomes = {
        "baseline": {"ms": 1.0, "spread_pct": 0.5},
        "candidates": [
            {"contains": "variant: fixed", "status": "ok", "ms": 0.4},
            {"contains": "variant: steady", "status": "ok", "ms": 0.9},
        ],
    }
    (tmp_path / "outcomes.json").write_text(json.dumps(outcomes))
    env = dict(
        os.environ,
        CUDA_LLM_DATA_DIR=str(tmp_path / "data"),
        CUDA_LLM_EVALUATOR=f"recorded:{tmp_path / 'outcomes.json'}",
    )
    args = [
        str(source),
        "--kernel",
        "saxpy",
        "--strategy",
        "plan",
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


def test_a_repair_turns_a_compile_error_into_the_winner_and_plans_differ(tmp_path: Path) -> None:
    with ScriptedLlmServer(steps()) as server:
        done = optimize(tmp_path, "--base-url", server.base_url, "--record", str(tmp_path / "rec"))
        requests = [r["body"]["messages"] for r in server.chat_requests()]
        left = server.remaining
    assert done.returncode == 0, done.stderr
    assert left == 0 and len(requests) == 4  # planner, two coders, one repair
    result = json.loads(done.stdout)
    first, second = sorted(result["candidates"], key=lambda c: c["index"])
    assert first["status"] == "ok" and first["message"].startswith("after 1 repair(s)")
    assert second["status"] == "ok"
    assert result["accepted"] and "variant: fixed" in result["best_source"]
    repair = next(m[-1]["content"] for m in requests if "repair 1 of 3" in m[-1]["content"])
    assert "variant: broken" in repair and 'expected a ";"' in repair  # its own code and error
    files = (tmp_path / "rec").iterdir()
    names = sorted(p.name.removeprefix("saxpy-r01-").rsplit("-", 1)[0] for p in files)
    assert names == ["c00-planner", "c01", "c01-debugger1", "c02"]
    replayed = optimize(tmp_path, "--replay", str(tmp_path / "rec"))
    assert replayed.returncode == 0, replayed.stderr
    assert json.loads(replayed.stdout) == result


def test_the_token_budget_stops_the_run_after_the_planner(tmp_path: Path) -> None:
    with ScriptedLlmServer(steps()) as server:
        done = optimize(tmp_path, "--base-url", server.base_url, "--token-budget", "5")
        requests = server.chat_requests()
    assert done.returncode == 0, done.stderr
    assert len(requests) == 1 and "token budget of 5 reached" in done.stderr
    assert json.loads(done.stdout)["candidates"] == []


def test_plans_are_read_from_what_planners_write() -> None:
    fenced = "Plans:\n```json\n" + json.dumps([*PLANS, PLANS[0]]) + "\n```"
    assert [p.technique for p in prompts.parse_plans(fenced, 4)] == [
        "Vectorize with float4 loads",
        "Grid-stride loop with fmaf",
    ]
    bare = "I suggest: " + json.dumps(PLANS[:1]).replace("\n", "\r\n")
    assert prompts.parse_plans(bare, 4)[0].why == "memory-bound at 40% of the floor"
    assert prompts.parse_plans("no plans today", 2) == []
    assert prompts.parse_plans('```json\n{"technique": "x"}\n```', 2) == []
    filled = prompts.parse_plans(fenced, 1) + prompts.fallback_plans(3, 1)
    assert len(filled) == 3 and len({p.technique for p in filled}) == 3


def test_planted_scenario_with_the_plan_strategy_on_cpu(tmp_path: Path) -> None:
    """benchmarks/fsr_planted.py --strategy plan, with recorded outcomes: the planted compile
    error is repaired into a winner, every other candidate keeps its planted status."""
    import shutil

    from tests.support.planted import CONVERGE

    source = tmp_path / "converge.cu"
    shutil.copy(CONVERGE.file, source)
    outcomes = {
        "baseline": {"ms": 0.3},
        "candidates": [
            {"contains": "variant: triple", "status": "wrong_output", "message": "y[0]: 3 vs 2"},
            {"contains": "variant: slow", "status": "ok", "ms": 1.2},
            {"contains": "variant: good", "status": "ok", "ms": 0.03},
            {"contains": "variant: repaired", "status": "ok", "ms": 0.02},
            {"contains": "variant: short", "status": "unwritten_output", "message": "y[0]"},
            {"contains": "variant: past", "status": "out_of_bounds", "message": "y[1] written"},
        ],
    }
    (tmp_path / "outcomes.json").write_text(json.dumps(outcomes))
    env = dict(
        os.environ,
        CUDA_LLM_DATA_DIR=str(tmp_path / "data"),
        CUDA_LLM_EVALUATOR=f"recorded:{tmp_path / 'outcomes.json'}",
    )
    with ScriptedLlmServer(CONVERGE.plan_steps()) as server:
        args = [
            str(source),
            "--kernel",
            "converge",
            "--strategy",
            "plan",
            "--rounds",
            "2",
            "--candidates",
            "4",
            "--format",
            "json",
            "--compile-timeout",
            "300",
            "--base-url",
            server.base_url,
        ]
        command = [sys.executable, "-m", "cuda_llm_lsp.cli", "optimize", *args]
        done = subprocess.run(
            command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
        )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert CONVERGE.mismatches(result["candidates"], "plan") == []
    assert result["accepted"] and CONVERGE.won(result["best_source"], "plan")
    assert "variant: repaired" in result["best_source"]
    assert "round 1: planning" in done.stderr and "round 2: planning" in done.stderr


def test_replay_keys_on_the_role_and_keeps_hand_named_recordings(tmp_path: Path) -> None:
    """A candidate's file (any name after its key, as the hand-written recordings have) is never
    taken for its debugger's, nor the other way round."""
    import asyncio

    from cuda_llm_lsp.fsr.client import Prompt
    from cuda_llm_lsp.fsr.replay import ReplayLlm

    def record(name: str, variant: str) -> None:
        reply = {"text": kernel_reply(saxpy(variant)), "finish_reason": "stop"}
        (tmp_path / name).write_text(json.dumps({"format": 1, "reply": reply}))

    record("saxpy-r01-c01-handwritten.json", "coder")
    record("saxpy-r01-c01-debugger1-0123456789ab.json", "debugger")
    messages = ({"role": "user", "content": "x"},)
    coder = Prompt("saxpy", 1, 1, messages)
    debugger = Prompt("saxpy", 1, 1, messages, role="debugger", attempt=1)
    second = Prompt("saxpy", 1, 1, messages, role="debugger", attempt=2)
    replay = ReplayLlm(tmp_path)
    answers = [asyncio.run(replay.complete(p)) for p in (coder, debugger, second)]
    assert "variant: coder" in (answers[0].code or "")
    assert "variant: debugger" in (answers[1].code or "")
    assert answers[2].code is None and "(debugger)" in (answers[2].error or "")
