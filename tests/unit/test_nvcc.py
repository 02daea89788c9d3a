"""The whole-file `nvcc` check that proves an edit still builds: found in the toolkit wheels,
errors placed on their lines, a timeout and a missing nvcc reported, never raised as a crash."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from cuda_llm_lsp.compile.nvcc import NVCC_ENV, NvccUnavailable, compile_file, find_nvcc

needs_nvcc = pytest.mark.skipif(
    find_nvcc() is None,
    reason="nvcc not installed (the test extra installs it: cuda-toolkit[nvcc,cudart,crt,cccl])",
)

PROGRAM = """\
#include <cstdio>
__global__ void twice(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= 2.0f;
}
int main() {
    float* d = nullptr;
    cudaMalloc(&d, 100 * sizeof(float));
    twice<<<1, 128>>>(d, 100);
    return cudaDeviceSynchronize() == cudaSuccess ? 0 : 1;
}
"""


@needs_nvcc
def test_a_whole_program_builds() -> None:
    result = compile_file(PROGRAM)
    assert result.ok and result.errors == (), result.log


@needs_nvcc
def test_host_errors_are_placed_on_their_line() -> None:
    result = compile_file(PROGRAM + "int main() { return 2; }\n", Path("/src/prog.cu"))
    assert not result.ok
    (error,) = result.errors
    assert error.line == 12 and 'function "main" has already been defined' in error.message
    assert error.file is None and "prog.cu" in result.log
    assert result.message().startswith('line 12: function "main"')


@needs_nvcc
def test_a_local_include_is_found_next_to_the_file(tmp_path: Path) -> None:
    (tmp_path / "n.h").write_text("#define COUNT 100\n")
    source = '#include "n.h"\n' + PROGRAM.replace("(d, 100)", "(d, COUNT)")
    assert compile_file(source, tmp_path / "prog.cu").ok


@needs_nvcc
def test_a_compile_that_takes_too_long_is_a_result() -> None:
    result = compile_file(PROGRAM, timeout=0.01)
    assert result.timed_out and not result.ok and "did not finish" in result.message()


def test_no_nvcc_is_reported(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(NVCC_ENV, str(tmp_path / "missing-nvcc"))
    assert find_nvcc() is None
    with pytest.raises(NvccUnavailable, match="nvcc extra"):
        compile_file(PROGRAM)


@pytest.mark.skipif(not hasattr(os, "killpg"), reason="process groups are POSIX")
def test_a_timeout_kills_what_nvcc_started_too(tmp_path: Path) -> None:
    """Killing nvcc alone left cicc, ptxas or the host compiler running."""
    pid_file = tmp_path / "child.pid"
    fake = tmp_path / "nvcc"
    fake.write_text(f"#!/bin/sh\nsleep 60 &\necho $! > '{pid_file}'\nwait\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    started = time.monotonic()
    result = compile_file("int x;\n", timeout=1.0, nvcc=fake)
    assert result.timed_out and time.monotonic() - started < 10
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "nvcc's child outlived the timeout"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"  # a zombie is dead (its parent, the killed shell, is gone)
