"""The LLM's sampling settings: `cudaLlm.maxTokens` / `temperature` / `reasoningEffort` and the
CLI flags, from the settings to the request body the endpoint receives."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from cuda_llm_lsp.config import DEFAULT_MAX_TOKENS, Settings, settings_from_mapping
from cuda_llm_lsp.fsr.types import config_from_settings
from tests.support.scripted_llm import ScriptedLlmServer, kernel_reply

ROOT = Path(__file__).resolve().parents[2]
ORIGINAL = ROOT / "tests" / "data" / "replies" / "originals" / "saxpy.cu"


def test_defaults_send_no_temperature_and_leave_room_for_reasoning() -> None:
    config = config_from_settings(Settings())
    assert config.temperature is None and config.reasoning_effort is None
    assert config.max_output_tokens == DEFAULT_MAX_TOKENS >= 32768


def test_settings_are_read_and_bad_values_keep_the_defaults() -> None:
    settings, problems = settings_from_mapping(
        {"cudaLlm": {"maxTokens": 4096, "temperature": 0.3, "reasoningEffort": "High"}}
    )
    assert problems == []
    config = config_from_settings(settings)
    assert (config.max_output_tokens, config.temperature, config.reasoning_effort) == (
        4096,
        0.3,
        "high",
    )
    settings, problems = settings_from_mapping(
        {"cudaLlm": {"maxTokens": 10, "temperature": 5, "reasoningEffort": "max"}}
    )
    assert len(problems) == 3 and all("using the default" in p for p in problems)
    assert settings.max_tokens == DEFAULT_MAX_TOKENS and settings.temperature is None
    assert settings.reasoning_effort is None


def test_the_strategy_setting_reaches_the_run_config() -> None:
    settings, problems = settings_from_mapping({"cudaLlm": {"strategy": "Plan"}})
    assert problems == [] and config_from_settings(settings).strategy == "plan"
    settings, problems = settings_from_mapping({"cudaLlm": {"strategy": "genetic"}})
    assert settings.strategy == "fsr" and "one of fsr, plan" in problems[0]


def _optimize(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "outcomes.json").write_text(json.dumps({"baseline": {"ms": 1.0}}))
    env = dict(
        os.environ,
        CUDA_LLM_DATA_DIR=str(tmp_path / "data"),
        CUDA_LLM_EVALUATOR=f"recorded:{tmp_path / 'outcomes.json'}",
    )
    args = [str(ORIGINAL), "--kernel", "saxpy", "--rounds", "1", "--candidates", "1", *flags]
    command = [sys.executable, "-m", "cuda_llm_lsp.cli", "optimize", *args]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)


def test_cli_flags_reach_the_endpoint(tmp_path: Path) -> None:
    code = ORIGINAL.read_text().split("*/\n", 1)[1]
    with ScriptedLlmServer([{"text": kernel_reply(code)}]) as server:
        done = _optimize(
            tmp_path,
            "--base-url",
            server.base_url,
            "--max-tokens",
            "2048",
            "--temperature",
            "0.25",
            "--reasoning-effort",
            "medium",
        )
        requests = server.chat_requests()  # the candidate's, then its debugger's (unscripted)
    assert done.returncode == 0, done.stderr
    assert len(requests) == 2
    for request in requests:
        body = request["body"]
        assert body["max_tokens"] == 2048 and body["temperature"] == 0.25
        assert body["reasoning_effort"] == "medium"


def test_cli_refuses_a_temperature_out_of_range(tmp_path: Path) -> None:
    done = _optimize(tmp_path, "--temperature", "3")
    assert done.returncode == 2 and "between 0 and 2" in done.stderr
