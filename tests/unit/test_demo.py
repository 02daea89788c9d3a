"""`cuda-llm optimize ... --demo`: the shipped recorded session runs with no GPU and no endpoint,
labelled as a demo everywhere it prints, and never writes the file (README's command)."""

from __future__ import annotations

import fnmatch
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_llm_lsp.demo import DEMO_DIR, demos

ROOT = Path(__file__).resolve().parents[2]
COMMAND = ["optimize", "examples/softmax.cu", "--kernel", "softmax_rows", "--demo"]


def cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """No GPU driver, no endpoint, no API key: what a newcomer without a GPU has."""
    env = dict(
        os.environ,
        CUDA_LLM_LSP_DRIVER="no_such_driver_module",
        CUDA_LLM_DATA_DIR=str(tmp_path / "data"),
        CUDA_LLM_CACHE_DIR=str(tmp_path / "cache"),
        OPENAI_BASE_URL="http://127.0.0.1:9/v1",
    )
    for name in ("CUDA_LLM_EVALUATOR", "OPENAI_API_KEY"):
        env.pop(name, None)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", "cuda_llm_lsp.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


def test_the_readme_command_runs_the_recorded_session_labelled_as_a_demo(tmp_path: Path) -> None:
    assert " ".join(["cuda-llm", *COMMAND]) in (ROOT / "README.md").read_text(encoding="utf-8")
    before = (ROOT / "examples" / "softmax.cu").read_bytes()
    done = cli(tmp_path, *COMMAND)
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("cuda-llm optimize: DEMO: recorded, not measured: a session")
    assert "no model is called and nothing runs on a GPU" in done.stderr
    assert "1.1 ok" in done.stderr and "1.2 unwritten_output" in done.stderr
    assert "2.2 out_of_bounds" in done.stderr
    assert "1.97x faster" in done.stderr
    assert "the figures above are recorded, not measured" in done.stderr.splitlines()[-1]
    assert done.stdout.startswith("# DEMO: recorded, not measured: not checked on your GPU")
    assert "+  // variant: online softmax" in done.stdout
    assert (ROOT / "examples" / "softmax.cu").read_bytes() == before
    assert not (tmp_path / "data").exists()  # no history for a demo


def test_the_demo_json_says_demo(tmp_path: Path) -> None:
    done = cli(tmp_path, *COMMAND, "--format", "json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["demo"] is True and data["accepted"] is True
    assert [c["status"] for c in data["candidates"]] == [
        "ok",
        "unwritten_output",
        "ok",
        "out_of_bounds",
    ]


def test_a_demo_refuses_write_and_other_kernels(tmp_path: Path) -> None:
    done = cli(tmp_path, *COMMAND, "--write")
    assert done.returncode == 2 and "--write cannot go with it" in done.stderr
    done = cli(tmp_path, "optimize", "examples/saxpy.cu", "--kernel", "saxpy", "--demo")
    assert done.returncode == 2
    assert "demos: examples/softmax.cu --kernel softmax_rows" in done.stderr


def test_the_recording_ships_in_the_wheel() -> None:
    """Every demo file matches the package-data globs, so an installed package has the demo."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    globs = config["tool"]["setuptools"]["package-data"]["cuda_llm_lsp"]
    files = [p for p in DEMO_DIR.rglob("*.json")]
    assert files and set(demos()) == {"softmax_rows"}
    package = DEMO_DIR.parent
    for path in files:
        name = path.relative_to(package).as_posix()
        depth = name.count("/")
        assert any(fnmatch.fnmatch(name, g) and depth == g.count("/") for g in globs), name


def test_the_editor_demo_replays_the_recording_and_runs_nothing_on_a_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`cudaLlm.demo`'s engine: the shipped example (kept identical to examples/softmax.cu),
    written afresh to the data directory; the recording's rounds, replayed, no profiling."""
    from cuda_llm_lsp.config import Settings
    from cuda_llm_lsp.engine import demo_config, demo_example, demo_for, job_label

    shipped = demos()["softmax_rows"]
    assert shipped.source is not None
    assert shipped.source.read_bytes() == (ROOT / "examples" / "softmax.cu").read_bytes()
    monkeypatch.setenv("CUDA_LLM_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("CUDA_LLM_EVALUATOR", raising=False)
    path, kernel = demo_example()
    path.write_text("edited by a previous demo", encoding="utf-8")
    path, kernel = demo_example()  # a fresh copy every time
    assert (path, kernel) == (tmp_path / "demo" / "softmax.cu", "softmax_rows")
    assert path.read_bytes() == shipped.source.read_bytes()
    config = demo_config(demo_for(kernel), Settings(model="my-model", rounds=9))
    assert (config.rounds, config.candidates) == (2, 2)
    assert config.replay_dir == str(shipped.llm_dir) and config.profile is False
    assert config.model != "my-model"
    assert job_label(Settings(demo=True)) == "DEMO: recorded, not measured"
    assert job_label(Settings()) is None
    monkeypatch.delenv("CUDA_LLM_DEMO_PACE")
    assert demo_config(demo_for(kernel), Settings()).replay_pace == 1.0  # a person watching
    monkeypatch.setenv("CUDA_LLM_DEMO_PACE", "0")
    assert demo_config(demo_for(kernel), Settings()).replay_pace == 0.0  # the tests
    with pytest.raises(ValueError, match="no recording for saxpy; it has softmax_rows"):
        demo_for("saxpy")


def test_the_packaged_demo_example_is_the_repositorys_example() -> None:
    """The package ships its own copy (examples/ is not installed); the two must not drift, or
    the editor's demo and `optimize examples/softmax.cu --demo` would show different kernels."""
    packaged = ROOT / "cuda_llm_lsp" / "demo" / "softmax_rows" / "softmax.cu"
    assert packaged.read_bytes() == (ROOT / "examples" / "softmax.cu").read_bytes()


def test_the_demo_is_paced_by_its_recording_so_the_rounds_can_be_watched() -> None:
    """At pace 1 the shipped recording's replies take their recorded time (the rounds' slowest
    replies add up to at least 5 s; was: the whole run in 0.2 s, nothing to watch)."""
    from cuda_llm_lsp.fsr.replay import recorded_seconds, replay_seconds

    shipped = demos()["softmax_rows"]
    records = [json.loads(p.read_text(encoding="utf-8")) for p in shipped.llm_dir.glob("*.json")]
    assert all("elapsed_s" in r for r in records)  # its own timing, not the default
    assert replay_seconds(shipped.llm_dir, "softmax_rows") >= 5.0
    assert replay_seconds(shipped.llm_dir, "softmax_rows") < 20.0  # and not tedious
    assert recorded_seconds({}) > 0  # a reply recorded without its time still paces


def test_a_paced_replay_waits_the_recorded_time_and_an_unpaced_one_does_not() -> None:
    import asyncio
    import time

    from cuda_llm_lsp.fsr.client import Prompt
    from cuda_llm_lsp.fsr.replay import ReplayLlm, recorded_seconds

    shipped = demos()["softmax_rows"]
    (path,) = shipped.llm_dir.glob("softmax_rows-r01-c01-*.json")
    recorded = recorded_seconds(json.loads(path.read_text(encoding="utf-8")))
    prompt = Prompt("softmax_rows", 1, 1, ({"role": "user", "content": "x"},))

    async def timed(pace: float) -> float:
        started = time.monotonic()
        reply = await ReplayLlm(shipped.llm_dir, pace=pace).complete(prompt)
        assert reply.code and "variant: warp-shuffle" in reply.code
        return time.monotonic() - started

    assert asyncio.run(timed(0.25)) >= 0.25 * recorded  # a lower bound: load only adds to it
    assert asyncio.run(timed(0.0)) < 0.25 * recorded


def test_the_cli_demo_is_paced_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--demo` replays at the recording's pace, scaled by CUDA_LLM_DEMO_PACE."""
    from cuda_llm_lsp.cli import main
    from cuda_llm_lsp.cli import optimize as cli_optimize

    seen: list[float] = []
    monkeypatch.setattr(
        cli_optimize, "_finish", lambda *args, **kw: seen.append(args[4].replay_pace) or 0
    )
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("CUDA_LLM_DEMO_PACE")
    assert main(COMMAND) == 0
    monkeypatch.setenv("CUDA_LLM_DEMO_PACE", "0.5")
    assert main(COMMAND) == 0
    assert seen == [1.0, 0.5]
