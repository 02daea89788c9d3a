"""Record a run against a scripted endpoint, then replay it with no endpoint: same result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cuda_llm_lsp.engine import make_llm
from cuda_llm_lsp.evaluate.recorded import RecordedEvaluator
from cuda_llm_lsp.fsr.client import Prompt
from cuda_llm_lsp.fsr.endpoint import OpenAiLlm
from cuda_llm_lsp.fsr.loop import optimize
from cuda_llm_lsp.fsr.replay import RecordingLlm, ReplayLlm, recorded_shape
from cuda_llm_lsp.fsr.types import OptimizeConfig, OptimizeRequest, OptimizeResult
from tests.support.fsr_fakes import SAXPY_FILE, FakeToolchain, saxpy_candidate
from tests.support.scripted_llm import ScriptedLlmServer, kernel_reply, reply

CANDIDATES = {
    (1, 1): saxpy_candidate("fast"),
    (1, 2): saxpy_candidate("COMPILE_ERROR"),
    (2, 1): saxpy_candidate("faster"),
    (2, 2): saxpy_candidate("wrong"),
}


def outcomes(baseline_ms: float) -> dict[str, Any]:
    return {
        "baseline": {"ms": baseline_ms},
        "candidates": [
            {"contains": "variant: fast\n", "status": "ok", "ms": baseline_ms / 1.5},
            {"contains": "variant: faster", "status": "ok", "ms": baseline_ms / 2},
            {"contains": "variant: wrong", "status": "wrong_output", "message": "y[3] differs"},
        ],
    }


async def run(llm: Any, baseline_ms: float) -> OptimizeResult:
    config = OptimizeConfig(rounds=2, candidates=2, profile=False, patience=5, repairs=0)
    request = OptimizeRequest(file_text=SAXPY_FILE, kernel="saxpy", seed=3)
    return await optimize(
        request, config, RecordedEvaluator(outcomes(baseline_ms)), llm, toolchain=FakeToolchain()
    )


async def test_record_then_replay_gives_the_same_result(tmp_path: Path) -> None:
    recording = tmp_path / "rec"
    with ScriptedLlmServer() as server:
        for (round_, index), code in CANDIDATES.items():
            server.add(reply(kernel_reply(code), match=f"round {round_}, candidate {index} of"))
        config = OptimizeConfig(base_url=server.base_url, api_key="k", model="m")
        recorded = await run(RecordingLlm(OpenAiLlm(config), recording), 1.0)
        assert len(server.chat_requests()) == 4
    assert recorded.accepted and "variant: faster" in (recorded.best_source or "")

    files = sorted(p.name for p in recording.glob("*.json"))
    assert [name[:13] for name in files] == [
        "saxpy-r01-c01",
        "saxpy-r01-c02",
        "saxpy-r02-c01",
        "saxpy-r02-c02",
    ]
    record = json.loads((recording / files[0]).read_text())
    assert record["messages"][1]["role"] == "user" and "saxpy" in record["messages"][1]["content"]
    assert "variant: fast" in record["reply"]["text"] and record["reply"]["completion_tokens"] > 0

    # the server is gone; timings differ (so do the prompts): answers still match by position
    replay = ReplayLlm(recording)
    replayed = await run(replay, 2.0)
    assert len(replay.requests) == 4
    assert replay.requests[0].text != Prompt("saxpy", 1, 1, tuple(record["messages"])).text
    assert [(c.round, c.index, c.status, c.source) for c in replayed.candidates] == [
        (c.round, c.index, c.status, c.source) for c in recorded.candidates
    ]
    assert replayed.best_source == recorded.best_source
    assert replayed.speedup == recorded.speedup == 2.0
    assert replayed.tokens == recorded.tokens


async def test_missing_entry_is_an_llm_error(tmp_path: Path) -> None:
    (tmp_path / "rec").mkdir()
    answer = await ReplayLlm(tmp_path / "rec").complete(
        Prompt("saxpy", 1, 1, ({"role": "user", "content": "x"},))
    )
    assert answer.code is None and answer.error is not None
    assert answer.error.startswith("not in recording: round 1 candidate 1 of saxpy")


async def test_missing_recording_directory_is_fatal(tmp_path: Path) -> None:
    answer = await ReplayLlm(tmp_path / "nowhere").complete(Prompt("saxpy", 1, 1, ()))
    assert answer.fatal and answer.error is not None and "not found" in answer.error


async def test_recorded_errors_replay_as_errors(tmp_path: Path) -> None:
    with ScriptedLlmServer() as server:
        server.add(reply("no code here, sorry"))
        config = OptimizeConfig(base_url=server.base_url, api_key="k", record_dir=str(tmp_path))
        llm = make_llm(config)
        assert isinstance(llm, RecordingLlm)
        first = await llm.complete(Prompt("saxpy", 1, 1, ({"role": "user", "content": "go"},)))
        await llm.close()
    again = await make_llm(OptimizeConfig(replay_dir=str(tmp_path))).complete(
        Prompt("saxpy", 1, 1, ({"role": "user", "content": "different"},))
    )
    assert first.error is not None and again.error == first.error


def test_recorded_shape_reads_rounds_and_candidates_from_the_file_names(tmp_path: Path) -> None:
    for name in ("k_x-r01-c01-ab.json", "k_x-r02-c03-cd.json", "other-r09-c09-ef.json"):
        (tmp_path / name).write_text("{}")
    (tmp_path / "k_x-r05-c05-notes.txt").write_text("")
    assert recorded_shape(tmp_path, "k.x") == (2, 3)  # names are made safe as when recording
    assert recorded_shape(tmp_path, "absent") is None
    assert recorded_shape(tmp_path / "missing", "k.x") is None
