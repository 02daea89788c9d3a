"""`cuda-llm optimize` end to end on the CPU: replayed model, real NVRTC, recorded outcomes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_llm_lsp.cli import optimize as cli_optimize
from cuda_llm_lsp.cli.common import write_back
from tests.support.fsr_fakes import make_recording

ROOT = Path(__file__).resolve().parents[2]

SAXPY = """\
// y = a * x + y
#include <cstdio>

/* @cuda-llm
sizes.n = [1, 1000, 65536]
grid = "cdiv(n, 256)"
block = 256
args.a = "2"
args.x = "float32[n]"
args.y = "inout float32[n]"
args.n = "n"
*/
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    y[i] = a * x[i] + y[i];
  }
}

int main() {
  saxpy<<<1, 256>>>(2.0f, nullptr, nullptr, 0);
  return 0;
}
"""

FAST = """\
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  // variant: fast
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = fmaf(a, x[i], y[i]);
}"""
BROKEN = FAST.replace("variant: fast", "variant: broken").replace("fmaf(a, x[i], y[i])", "oops")
RENAMED = FAST.replace("int n)", "long n)").replace("variant: fast", "variant: renamed")


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "saxpy.cu").write_text(SAXPY)
    make_recording(tmp_path / "rec", "saxpy", {(1, 1): FAST, (1, 2): BROKEN, (1, 3): RENAMED})
    outcomes = {
        "baseline": {"ms": 1.0, "spread_pct": 0.4},
        "candidates": [{"contains": "variant: fast", "status": "ok", "ms": 0.4}],
    }
    (tmp_path / "outcomes.json").write_text(json.dumps(outcomes))
    return tmp_path


def cli(workdir: Path, *args: str, evaluator: bool = True) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, CUDA_LLM_DATA_DIR=str(workdir / "data"))
    env.pop("CUDA_LLM_EVALUATOR", None)
    if evaluator:
        env["CUDA_LLM_EVALUATOR"] = f"recorded:{workdir / 'outcomes.json'}"
    return subprocess.run(
        [sys.executable, "-m", "cuda_llm_lsp.cli", "optimize", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


def replay_args(workdir: Path, *extra: str) -> list[str]:
    return [
        str(workdir / "saxpy.cu"),
        "--kernel",
        "saxpy",
        "--replay",
        str(workdir / "rec"),
        "--rounds",
        "1",
        "--candidates",
        "3",
        *extra,
    ]


def test_json_output_is_exactly_the_contract(workdir: Path) -> None:
    done = cli(workdir, *replay_args(workdir, "--format", "json"))
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)  # nothing else on stdout
    assert list(data) == [
        "kernel",
        "baseline_ms",
        "best_ms",
        "speedup",
        "accepted",
        "candidates",
        "best_source",
        "launch",
        "launch_fixed",
        "profile_lines",  # ncu's top lines where ncu ran ([profile])
        "builder",  # which compiler built the kernels: NVRTC, else nvcc ([arbiter])
    ]
    assert data["builder"] == "nvrtc"
    assert data["accepted"] is True and data["speedup"] == 2.5 and data["best_ms"] == 0.4
    assert all(len(c["reply_hash"]) == 12 for c in data["candidates"])
    assert [c["status"] for c in data["candidates"]] == [
        "ok",
        "compile_error",
        "signature_mismatch",
    ]
    assert "oops" in data["candidates"][1]["message"]
    assert "variant: fast" in data["best_source"]
    assert "Traceback" not in done.stderr
    assert (workdir / "saxpy.cu").read_text() == SAXPY  # not written without --write


def test_text_output_is_progress_then_a_unified_diff(workdir: Path) -> None:
    done = cli(workdir, *replay_args(workdir))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("--- a/") and "+++ b/" in done.stdout
    assert "+  if (i < n) y[i] = fmaf(a, x[i], y[i]);" in done.stdout
    assert "-    y[i] = a * x[i] + y[i];" in done.stdout
    assert "round 1/1" in done.stderr and "2.50x faster" in done.stderr
    assert "1.2 compile_error" in done.stderr


def test_a_fixed_launch_is_said_at_the_start_in_text_and_json(workdir: Path) -> None:
    done = cli(workdir, *replay_args(workdir, "--launch", "keep"))
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("launch: "))
    assert at <= 2, lines[:4]  # right after the baseline line
    assert lines[at].startswith("launch: fixed to the original (grid=cdiv(n, 256) block=256")
    assert "the launch policy is `keep`" in lines[at]
    data = json.loads(
        cli(workdir, *replay_args(workdir, "--launch", "keep", "--format", "json")).stdout
    )
    assert "the launch policy is `keep`" in data["launch_fixed"]


def test_write_replaces_only_the_kernel(workdir: Path) -> None:
    done = cli(workdir, *replay_args(workdir, "--write"))
    assert done.returncode == 0, done.stderr
    text = (workdir / "saxpy.cu").read_text()
    head, tail = SAXPY.split('extern "C" __global__')[0], SAXPY.split("\n}\n", 1)[1]
    assert text == head + FAST + "\n" + tail


def test_write_is_refused_when_the_file_changed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "k.cu"
    path.write_text(SAXPY + "// edited meanwhile\n")
    code = write_back("optimize", path, SAXPY.encode(), "new text")
    assert code == 1 and path.read_text().endswith("// edited meanwhile\n")
    assert "changed while the run was going" in capsys.readouterr().err


def test_no_improvement_exits_zero_and_says_so(workdir: Path) -> None:
    (workdir / "outcomes.json").write_text(
        json.dumps(
            {
                "baseline": {"ms": 1.0},
                "candidates": [{"contains": "variant: fast", "status": "ok", "ms": 1.2}],
            }
        )
    )
    done = cli(workdir, *replay_args(workdir, "--write"))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and "no improvement" in done.stderr
    assert (workdir / "saxpy.cu").read_text() == SAXPY


def test_kernel_without_spec_prints_the_draft(workdir: Path) -> None:
    (workdir / "plain.cu").write_text(
        'extern "C" __global__ void twice(float* y, int n) {\n'
        "  int i = threadIdx.x;\n  if (i < n) y[i] *= 2.0f;\n}\n"
    )
    done = cli(
        workdir, str(workdir / "plain.cu"), "--kernel", "twice", "--replay", str(workdir / "rec")
    )
    assert done.returncode == 1
    assert "no test spec for twice" in done.stderr and "/* @cuda-llm" in done.stderr
    assert "Traceback" not in done.stderr


def test_unknown_kernel_and_missing_file_are_usage_errors(workdir: Path) -> None:
    done = cli(
        workdir,
        str(workdir / "saxpy.cu"),
        "--kernel",
        "nope",
        "--replay",
        str(workdir / "rec"),
        "--format",
        "json",
    )
    assert done.returncode == 2 and json.loads(done.stdout)["accepted"] is False
    assert "no kernel 'nope' in" in done.stderr and "(kernels: saxpy)" in done.stderr
    done = cli(workdir, str(workdir / "missing.cu"), "--kernel", "saxpy")
    assert done.returncode == 2 and "cannot read" in done.stderr and "Traceback" not in done.stderr


def test_without_a_gpu_the_exit_code_is_3(workdir: Path) -> None:
    from cuda_llm_lsp.evaluate.gpu import GpuEvaluator
    from cuda_llm_lsp.evaluate.types import NoGpuError

    try:
        GpuEvaluator().device_facts()
    except NoGpuError:
        pass
    else:
        pytest.skip("a GPU is present: the no-GPU path cannot be exercised here")
    done = cli(workdir, *replay_args(workdir), evaluator=False)
    assert done.returncode == 3
    assert "no CUDA GPU" in done.stderr and "Traceback" not in done.stderr


def test_history_lists_the_run(workdir: Path) -> None:
    assert cli(workdir, *replay_args(workdir)).returncode == 0
    env = dict(os.environ, CUDA_LLM_DATA_DIR=str(workdir / "data"))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cuda_llm_lsp.cli",
            "history",
            str(workdir / "saxpy.cu"),
            "--format",
            "json",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    [run] = json.loads(done.stdout)["runs"]
    assert run["kernel"] == "saxpy" and run["accepted"] is True and run["candidates"] == 3
    done = subprocess.run(
        [sys.executable, "-m", "cuda_llm_lsp.cli", "history"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "saxpy" in done.stdout and "2.50x" in done.stdout
    history = [sys.executable, "-m", "cuda_llm_lsp.cli", "history", "--format", "json"]
    one = subprocess.run(
        [*history, "--run", str(run["id"])],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    [shown] = json.loads(one.stdout)["runs"]
    assert shown["id"] == run["id"] and len(shown["candidate_list"]) == 3
    missing = subprocess.run(
        [*history, "--run", str(run["id"] + 1)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 1 and f"no run {run['id'] + 1}" in missing.stderr


def test_live_table_redraws_in_place() -> None:
    import io

    from cuda_llm_lsp.evaluate.types import EvalResult, Timing
    from cuda_llm_lsp.fsr.types import (
        CandidateEvaluated,
        CandidateOutcome,
        CandidateStage,
        RoundStarted,
        RunStarted,
    )

    stream = io.StringIO()
    display = cli_optimize.Display(stream, live=True)
    baseline = EvalResult("ok", "", 1, baseline=Timing(1.0, 0.5, 1, 1, 10))
    display(RunStarted("saxpy", baseline, 2, 2))
    display(RoundStarted(1, 2))
    display(CandidateStage(1, 1, "requested"))
    outcome = CandidateOutcome(1, 2, "ok", 0.5, "", "src", speedup=2.0)
    display(CandidateEvaluated(outcome, outcome))
    text = stream.getvalue()
    assert "\x1b[" in text and "F\x1b[J" in text
    last = text.rsplit("\x1b[J", 1)[1]
    assert "writing" in last and "ok 2.00x" in last and "best: 2.00x" in last


def test_record_with_an_endpoint_then_replay_without_it(workdir: Path) -> None:
    from tests.support.scripted_llm import ScriptedLlmServer, kernel_reply

    steps = [
        {"text": kernel_reply(code), "match": f"candidate {i} of 3."}
        for i, code in ((1, FAST), (2, BROKEN), (3, RENAMED))
    ]
    record = workdir / "recorded"
    with ScriptedLlmServer(steps) as server:
        live = cli(
            workdir,
            str(workdir / "saxpy.cu"),
            "--kernel",
            "saxpy",
            "--rounds",
            "1",
            "--candidates",
            "3",
            "--base-url",
            server.base_url,
            "--model",
            "scripted",
            "--record",
            str(record),
            "--format",
            "json",
        )
        # 2 and 3 fail: each goes to the debugger once (unscripted: answered 400, recorded too)
        assert len(server.chat_requests()) == 5
    assert live.returncode == 0, live.stderr
    assert len(list(record.glob("saxpy-r01-c0*.json"))) == 5
    assert len(list(record.glob("saxpy-r01-c0?-debugger1-*.json"))) == 2
    replayed = cli(
        workdir,
        str(workdir / "saxpy.cu"),
        "--kernel",
        "saxpy",
        "--rounds",
        "1",
        "--candidates",
        "3",
        "--replay",
        str(record),
        "--format",
        "json",
    )
    assert replayed.returncode == 0, replayed.stderr
    assert json.loads(replayed.stdout) == json.loads(live.stdout)


def test_unreachable_endpoint_is_a_clear_error(workdir: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    done = cli(
        workdir,
        str(workdir / "saxpy.cu"),
        "--kernel",
        "saxpy",
        "--rounds",
        "2",
        "--candidates",
        "2",
        "--base-url",
        f"http://127.0.0.1:{port}/v1",
    )
    assert done.returncode == 1 and done.stdout == ""
    assert "cannot reach the endpoint" in done.stderr and "Traceback" not in done.stderr


def test_planted_gpu_scenario_on_cpu(tmp_path: Path) -> None:
    """The GPU test's scenario with recorded outcomes: routing, builds and statuses hold."""
    import shutil

    from tests.support.planted import CONVERGE
    from tests.support.scripted_llm import ScriptedLlmServer

    source = tmp_path / "converge.cu"
    shutil.copy(CONVERGE.file, source)
    outcomes = {
        "baseline": {"ms": 0.3},
        "candidates": [
            {"contains": "variant: triple", "status": "wrong_output", "message": "y[0]: 3 vs 2"},
            {"contains": "variant: slow", "status": "ok", "ms": 1.2},
            {"contains": "variant: good", "status": "ok", "ms": 0.03},
            {
                "contains": "variant: short",
                "status": "unwritten_output",
                "message": "y[0] unwritten",
            },
            {"contains": "variant: past", "status": "out_of_bounds", "message": "y[1] written"},
        ],
    }
    (tmp_path / "outcomes.json").write_text(json.dumps(outcomes))
    with ScriptedLlmServer(CONVERGE.steps()) as server:
        done = cli(
            tmp_path,
            str(source),
            "--kernel",
            "converge",
            "--rounds",
            "2",
            "--candidates",
            "4",
            "--base-url",
            server.base_url,
            "--format",
            "json",
            "--write",
        )
        asked = [r["body"]["messages"][-1]["content"] for r in server.chat_requests()]
    # every repairable failure went to the debugger once, answered 400: the planted status stands
    assert len([a for a in asked if ", repair 1 of 3." in a]) == 5 and len(asked) == 13
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert CONVERGE.mismatches(result["candidates"]) == []
    assert result["accepted"] and CONVERGE.winner in result["best_source"]
    assert CONVERGE.winner in source.read_text()


def test_make_evaluator_hands_the_timing_plan_to_the_gpu_evaluator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from cuda_llm_lsp.engine import make_evaluator
    from cuda_llm_lsp.evaluate import gpu, timing

    made: list[object] = []
    monkeypatch.setattr(gpu, "GpuEvaluator", lambda **kw: made.append(kw.get("plan")) or "gpu")
    monkeypatch.setenv("CUDA_LLM_EVALUATOR", "gpu")
    plan = timing.Plan(budget_s=0.5)
    assert make_evaluator(plan=plan) == "gpu" and made == [plan]
    monkeypatch.setenv("CUDA_LLM_EVALUATOR", "tpu")
    with pytest.raises(ValueError, match="must be 'gpu' or 'recorded:PATH'"):
        make_evaluator(plan=plan)
