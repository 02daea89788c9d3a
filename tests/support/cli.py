"""`cuda-llm check --format json` on a small project written for a test, as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def check_json(cwd: Path, files: dict[str, str], *flags: str) -> tuple[int, dict[str, Any]]:
    """Write `files` under `cwd`, run `cuda-llm check --format json FLAGS main.cu` there in a
    child with its own compile cache; its exit status and report. No traceback allowed."""
    for name, text in files.items():
        (cwd / name).parent.mkdir(parents=True, exist_ok=True)
        (cwd / name).write_text(text, encoding="utf-8")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["CUDA_LLM_CACHE_DIR"] = str(cwd / "cache")
    done = subprocess.run(
        [sys.executable, "-m", "cuda_llm_lsp.cli", "check", "--format", "json",
         "--compile-timeout", "300", *flags, "main.cu"],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, json.loads(done.stdout)
