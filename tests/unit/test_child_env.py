"""Processes that compile or run model-written code never see the API key (issue [integrity] 10).

The real worker on the CPU double of the CUDA driver, the real compile pool, and the sanitizer
and profiler with a stand-in `compute-sanitizer` / `ncu` on PATH that writes down what it got.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from cuda_llm_lsp.compile.child_env import child_env, is_kept
from cuda_llm_lsp.compile.isolated import _Worker
from cuda_llm_lsp.compile.nvcc import compile_file
from cuda_llm_lsp.evaluate.line_profile import NcuProfiler, ProfileError
from cuda_llm_lsp.evaluate.process import WorkerProcess
from cuda_llm_lsp.evaluate.sanitizer import run_sanitizer
from cuda_llm_lsp.source.kernels import find_kernels
from cuda_llm_lsp.source.spec import parse_spec
from tests.unit.test_evaluator_rules import BASE, SOURCE

CANARY = "sk-canary-7f3a9c1e5b2d4e6f8a0b"
SECRETS = {
    "OPENAI_API_KEY": CANARY,
    "CUDA_LLM_API_KEY": CANARY,  # an allowed prefix does not let a secret-looking name through
    "AWS_SECRET_ACCESS_KEY": CANARY,
    "GITHUB_TOKEN": CANARY,
    "SOME_UNRELATED_SETTING": CANARY,
}


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("CUDA_LLM_LSP_DRIVER", "tests.unit.fake_cuda_driver")


def _environ_of(pid: int) -> dict[str, str]:
    deadline = time.monotonic() + 10
    while True:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
        if raw or time.monotonic() > deadline:  # empty while the exec is under way
            break
        time.sleep(0.05)
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(): v.decode(errors="replace") for k, v in pairs}


def _assert_clean(env: dict[str, str]) -> None:
    leaked = sorted(name for name, value in env.items() if CANARY in value)
    assert leaked == [], f"the child got {leaked}"


def test_allow_list_keeps_what_cuda_needs_and_drops_secrets() -> None:
    environ = {
        "PATH": "/usr/bin",
        "HOME": "/home/u",
        "LD_LIBRARY_PATH": "/usr/local/cuda/lib64",
        "CUDA_VISIBLE_DEVICES": "0",
        "NVIDIA_DRIVER_CAPABILITIES": "compute",
        "CUDA_LLM_LSP_DRIVER": "x",
        "PYTHONPATH": "/src",
        **SECRETS,
    }
    env = child_env({"PYTHONUNBUFFERED": "1"}, environ)
    assert env == {
        "PATH": "/usr/bin",
        "HOME": "/home/u",
        "LD_LIBRARY_PATH": "/usr/local/cuda/lib64",
        "CUDA_VISIBLE_DEVICES": "0",
        "NVIDIA_DRIVER_CAPABILITIES": "compute",
        "CUDA_LLM_LSP_DRIVER": "x",
        "PYTHONPATH": "/src",
        "PYTHONUNBUFFERED": "1",
    }
    assert not is_kept("OPENAI_BASE_URL")  # not needed by CUDA either


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc (Linux)")
def test_the_real_worker_on_the_fake_driver_lacks_the_key(secret_env: None) -> None:
    worker = WorkerProcess(0)
    try:
        env = _environ_of(worker.pid)
    finally:
        worker.kill()
    assert env.get("CUDA_LLM_LSP_DRIVER") == "tests.unit.fake_cuda_driver"  # switches still pass
    _assert_clean(env)


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc (Linux)")
def test_a_compile_process_lacks_the_key(secret_env: None) -> None:
    worker = _Worker(512)
    try:
        env = _environ_of(worker.proc.pid)
    finally:
        worker.kill()
    assert "PATH" in env
    _assert_clean(env)


def _recording_tool(directory: Path, name: str, out: Path) -> None:
    """An executable `name` that writes its environment to `out` and exits 0."""
    script = directory / name
    script.write_text(f"#!/bin/sh\nenv > '{out}'\nexit 0\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


def test_sanitizer_and_profiler_lack_the_key(
    secret_env: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    _recording_tool(tmp_path, "compute-sanitizer", tmp_path / "sanitizer.env")
    _recording_tool(tmp_path, "ncu", tmp_path / "ncu.env")
    spec, _ = parse_spec(find_kernels(SOURCE)[0], SOURCE)
    assert spec is not None
    run_sanitizer(BASE, spec, tools=("memcheck",))
    with pytest.raises(ProfileError):  # the recording ncu leaves no report
        NcuProfiler().capture(BASE, spec, None)
    for name in ("sanitizer.env", "ncu.env"):
        text = (tmp_path / name).read_text()
        assert "PATH=" in text
        assert CANARY not in text, f"{name}: the key reached the child"


def test_nvcc_lacks_the_key(secret_env: None, tmp_path: Path) -> None:
    """The whole-file nvcc check compiles a file holding model-written code."""
    _recording_tool(tmp_path, "nvcc", tmp_path / "nvcc.env")
    assert compile_file("int x;\n", nvcc=tmp_path / "nvcc").ok
    text = (tmp_path / "nvcc.env").read_text()
    assert "PATH=" in text
    assert CANARY not in text, "the key reached nvcc"
