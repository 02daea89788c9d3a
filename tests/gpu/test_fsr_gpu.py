"""The FSR loop end to end on a GPU: a scripted model serves planted candidates to
`cuda-llm optimize`; the good one wins, every bad one gets its status, and the reported speedup
agrees with `cuda-llm bench` run separately on the original and on the written result.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.planted import CONVERGE, ROOT
from tests.support.scripted_llm import ScriptedLlmServer

pytestmark = pytest.mark.gpu


@pytest.fixture
def server() -> Iterator[ScriptedLlmServer]:
    with ScriptedLlmServer(CONVERGE.steps()) as s:
        yield s


def _cli(*args: str, env: dict[str, str], timeout: float = 540) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cuda_llm_lsp.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _bench_ms(path: Path, kernel: str, env: dict[str, str]) -> float:
    done = _cli("bench", str(path), "--kernel", kernel, "--format", "json", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    [report] = json.loads(done.stdout)["kernels"]
    assert report["status"] == "ok", report
    return float(report["median_ms"])


@pytest.mark.timeout(900)
def test_planted_candidates_end_to_end(server: ScriptedLlmServer, tmp_path: Path) -> None:
    source = tmp_path / CONVERGE.file.name
    shutil.copy(CONVERGE.file, source)
    original = source.read_text()
    env = dict(os.environ, OPENAI_API_KEY="scripted", CUDA_LLM_DATA_DIR=str(tmp_path / "data"))
    env.pop("CUDA_LLM_EVALUATOR", None)
    done = _cli(
        "optimize",
        str(source),
        "--kernel",
        CONVERGE.kernel,
        "--rounds",
        str(CONVERGE.rounds),
        "--candidates",
        str(CONVERGE.candidates),
        "--base-url",
        server.base_url,
        "--model",
        "scripted",
        "--format",
        "json",
        "--write",
        "--seed",
        "1234",
        env=env,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert CONVERGE.mismatches(result["candidates"]) == [], result["candidates"]
    assert result["accepted"] is True, done.stderr
    assert CONVERGE.winner in result["best_source"]
    assert result["speedup"] > 3.0
    asked = [str(r["body"]["messages"][-1]["content"]) for r in server.chat_requests()]
    repairs = [a for a in asked if ", repair 1 of 3." in a]  # unscripted: answered 400
    assert len(asked) - len(repairs) == CONVERGE.rounds * CONVERGE.candidates
    assert len(repairs) == 5  # 1.1-1.3, 2.2, 2.3: each failure went to the debugger once
    # round 2's prompts carried round 1's feedback
    round2 = [r for r in server.chat_requests() if "This is round 2," in str(r["body"])]
    assert round2 and "fmadd" in str(round2[0]["body"]) and "wrong_output" in str(round2[0]["body"])

    written = source.read_text()
    assert written != original and CONVERGE.winner in written
    before, after = original.split("extern", 1)[0], original.split("\n}\n", 1)[1]
    assert written.startswith(before) and written.endswith(after)

    baseline_file = tmp_path / "baseline.cu"
    baseline_file.write_text(original)
    bench_speedup = _bench_ms(baseline_file, CONVERGE.kernel, env) / _bench_ms(
        source, CONVERGE.kernel, env
    )
    assert abs(result["speedup"] / bench_speedup - 1) < 0.05, (result["speedup"], bench_speedup)

    history = _cli("history", str(source), "--format", "json", env=env)
    [run] = json.loads(history.stdout)["runs"]
    assert run["accepted"] is True and run["candidates"] == 8
