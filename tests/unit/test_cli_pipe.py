"""`cuda-llm check ... | head`: a reader that closes the pipe early ends the command quietly
(was: a BrokenPipeError traceback on stderr, issue 41)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_pipe_closed_before_the_output_ends_the_command_without_a_traceback(
    tmp_path: Path,
) -> None:
    env = dict(os.environ, CUDA_LLM_CACHE_DIR=str(tmp_path / "cache"))
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen(
        [sys.executable, "-m", "cuda_llm_lsp.cli", "check", "examples/saxpy.cu"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first line (as `head` after its lines)
    err = proc.stderr.read().decode("utf-8", "replace")
    assert proc.wait(timeout=240) == 141, err  # 128 + SIGPIPE, as a shell reports it
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
