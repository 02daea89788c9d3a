"""What `cuda-llm` prints holds no secret and keeps each problem on its line (issue 36, item 7).

Real `python -m cuda_llm_lsp.cli check` processes: a kernel named like a credential of the
environment reached stdout as is (only the writers to disk redacted), and a file name with a
line break split its `FILE:LINE:COLUMN:` lines and put NVRTC's problems on the wrong line.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_llm_lsp.compile.nvcc import nvcc_missing
from cuda_llm_lsp.redact import MARK

ROOT = Path(__file__).resolve().parents[2]
SECRET = "kern_secret_ABCDEFGH"
KERNEL = "__global__ void k(float* x) {\n  x[0] = 1.0f;\n  undefined_thing = 3;\n}\n"


def check(cwd: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.update(extra)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["CUDA_LLM_CACHE_DIR"] = str(cwd / "cache")
    return subprocess.run(
        [sys.executable, "-m", "cuda_llm_lsp.cli", "check", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_redacts_a_credential_of_the_environment_from_stdout(tmp_path: Path) -> None:
    source = tmp_path / f"{SECRET}.cu"
    source.write_text(KERNEL.replace("void k(", f"void {SECRET}("))
    done = check(tmp_path, source.name, CUDA_LLM_TEST_TOKEN=SECRET)
    assert done.returncode == 1, done.stderr
    assert SECRET not in done.stdout + done.stderr
    assert f"{MARK}.cu:3:3: error: " in done.stdout
    assert f"kernel {MARK}" in done.stdout


@pytest.mark.parametrize("name", ["a\nb.cu", "a(1): error: b.cu", "tab\there.cu", "cr\rb.cu"])
def test_check_puts_problems_on_their_line_whatever_the_file_name(
    tmp_path: Path, name: str
) -> None:
    (tmp_path / name).write_text(KERNEL)
    done = check(tmp_path, name)
    assert done.returncode == 1, done.stderr
    shown = name.replace("\n", "<U+000A>").replace("\t", "<U+0009>").replace("\r", "<U+000D>")
    lines = done.stdout.splitlines()
    # where nvcc is found `check` runs it too (the arbiter): one summary line, the same errors
    summary = re.compile(re.escape(shown) + r": nvcc: 1 error \(\d+\.\d s\)")
    verdicts = [line for line in lines if summary.fullmatch(line)]
    assert len(verdicts) == (0 if nvcc_missing() else 1), lines
    assert [line for line in lines if line not in verdicts] == [
        f'{shown}:3:3: error: identifier "undefined_thing" is undefined',
        f"{shown}:1: kernel k: resources unknown (the file did not compile)",
    ]
