"""Precompiled headers in the compile processes (issue 38): the headers of a file being typed in
are parsed once per process, and what the user sees does not change.

Real NVRTC in real compile processes, with a small header (`<cuda_fp16.h>`) so that creating
a PCH is quick; the benchmark (`benchmarks/lsp_heavy_headers.py`) measures the heavy ones.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from cuda_llm_lsp.compile import isolated
from cuda_llm_lsp.compile.device_unit import build_device_unit
from cuda_llm_lsp.compile.isolated import pch_key
from cuda_llm_lsp.compile.types import CompileOptions

OPTIONS = CompileOptions(arch="sm_90")
HEAD = "#include <cuda_fp16.h>\n// a comment\n#define N 4\n"
BODY = "__global__ void k(__half* x) {{ x[threadIdx.x] = __float2half({value}); }}\n"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_LLM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CUDA_LLM_PCH", raising=False)
    # <cuda_fp16.h> parses in ~0.1 s: too light to be worth a PCH but for these tests
    monkeypatch.setattr(isolated, "PRIME_MIN_CPU_S", 0.0)


def unit(text: str):
    return build_device_unit(text, Path("/tmp/k.cu"), ())


def server_pool(size: int) -> isolated.CompilePool:
    """A pool as the server sets it up: PCHs for front-end checks."""
    pool = isolated.CompilePool(size=size)
    pool.use_pch()
    return pool


def wait_primed(pool: isolated.CompilePool, count: int) -> None:
    deadline = time.monotonic() + 60
    while pool.primed < count:
        assert time.monotonic() < deadline, "no PCH was created"
        time.sleep(0.02)
    while pool._priming:  # the process is given back just after `primed` counts
        time.sleep(0.01)


def pch_files(pool: isolated.CompilePool) -> list[Path]:
    workers = [*pool._idle, *pool._busy]
    return [p for w in workers for p in Path(w.home).glob("__nvrtc_auto_pch_*/*.pch")]


def test_the_headers_are_precompiled_once_and_the_next_checks_use_them() -> None:
    pool = server_pool(size=2)
    try:
        first = pool.compile(unit(HEAD + BODY.format(value="1.0f")), OPTIONS, [], syntax_only=True)
        assert first.ok and pool.pch_compiles == 0  # the first check does not wait for a PCH
        wait_primed(pool, 1)
        assert len(pch_files(pool)) == 1
        for value in ("2.0f", "3.0f"):
            again = pool.compile(
                unit(HEAD + BODY.format(value=value)), OPTIONS, [], syntax_only=True
            )
            assert again.ok
        assert pool.pch_compiles == 2
        assert pool.primed == 1
    finally:
        pool.close()


def test_an_error_typed_with_the_pch_in_use_is_found_at_its_line() -> None:
    pool = server_pool(size=1)
    try:
        pool.compile(unit(HEAD + BODY.format(value="1.0f")), OPTIONS, [], syntax_only=True)
        wait_primed(pool, 1)
        broken = HEAD + BODY.format(value="undeclared_name")
        result = pool.compile(unit(broken), OPTIONS, [], syntax_only=True)
        assert pool.pch_compiles == 1
        plain = isolated.CompilePool(size=1)  # the CLI's: no PCH
        try:
            expected = plain.compile(unit(broken), OPTIONS, [], syntax_only=True)
        finally:
            plain.close()
        assert not result.ok
        assert [(d.line, d.severity) for d in result.errors] == [(4, "error")]
        assert result.diagnostics == expected.diagnostics  # the same with or without the PCH
    finally:
        pool.close()


def test_a_changed_include_gets_a_new_pch_and_one_per_process_is_kept() -> None:
    pool = server_pool(size=1)
    try:
        pool.compile(unit(HEAD + BODY.format(value="1.0f")), OPTIONS, [], syntax_only=True)
        wait_primed(pool, 1)
        other = "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n"
        text = other + BODY.format(value="1.0f")
        assert pch_key(unit(text), OPTIONS) != pch_key(unit(HEAD + BODY), OPTIONS)
        assert pool.compile(unit(text), OPTIONS, [], syntax_only=True).ok
        assert pool.pch_compiles == 0  # a new prefix: plain, then its PCH
        wait_primed(pool, 2)
        assert len(pch_files(pool)) == 1
        homes = [Path(w.home) for w in pool._idle]
    finally:
        pool.close()
    assert homes and not any(h.exists() for h in homes)  # the process's folder goes with it


def test_code_generation_keeps_off_the_warm_process() -> None:
    pool = server_pool(size=2)
    try:
        pool.compile(unit(HEAD + BODY.format(value="1.0f")), OPTIONS, [], syntax_only=True)
        wait_primed(pool, 1)
        pool.warm()
        warm = next(w for w in pool._idle if w.prefixes)
        taken = pool._take(None, syntax_only=False)
        assert taken is not warm
        pool._give_back(taken)
    finally:
        pool.close()


def test_no_pch_when_switched_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_LLM_PCH", "0")
    pool = server_pool(size=1)
    try:
        for value in ("1.0f", "2.0f"):
            pool.compile(unit(HEAD + BODY.format(value=value)), OPTIONS, [], syntax_only=True)
        time.sleep(0.3)
        assert pool.primed == 0 and pool.pch_compiles == 0 and not pch_files(pool)
    finally:
        pool.close()


def test_the_editor_starts_one_process_then_the_rest_at_its_first_check() -> None:
    """Three Pythons importing and loading NVRTC at once, on two cores, held the first check
    up by a third of a second: the editor starts the front-end process its first check takes,
    the others (a second check, code generation) while that check runs."""
    pool = server_pool(size=3)
    pool.background_nice = isolated.CompilePool.BACKGROUND_NICE
    own = os.getpriority(os.PRIO_PROCESS, 0)
    try:
        pool.warm(first=True)
        (first,) = pool._idle
        assert os.getpriority(os.PRIO_PROCESS, first.proc.pid) == own
        pool.warm(first=True)  # asked again (a second `open_analysis`): nothing more
        assert pool._idle == [first]
        assert pool.compile(unit(HEAD + BODY.format(value="1.0f")), OPTIONS, [], syntax_only=True)
        workers = [*pool._idle, *pool._busy]
        assert first in workers and len(workers) == 3
        niceness = sorted(os.getpriority(os.PRIO_PROCESS, w.proc.pid) - own for w in workers)
        assert niceness == [0, 0, isolated.CompilePool.BACKGROUND_NICE]
    finally:
        pool.close()


def test_the_servers_code_generation_runs_niced_and_its_checks_do_not() -> None:
    pool = server_pool(size=2)
    pool.background_nice = isolated.CompilePool.BACKGROUND_NICE
    own = os.getpriority(os.PRIO_PROCESS, 0)
    try:
        pool.warm()
        niceness = sorted(os.getpriority(os.PRIO_PROCESS, w.proc.pid) - own for w in pool._idle)
        assert niceness == [0, isolated.CompilePool.BACKGROUND_NICE]
        assert pool.compile(unit(HEAD + BODY.format(value="1.0f")), OPTIONS, ["k"]).ok
        check = pool._take(None, syntax_only=True)
        generate = pool._take(None, syntax_only=False)
        assert os.getpriority(os.PRIO_PROCESS, check.proc.pid) == own
        assert os.getpriority(os.PRIO_PROCESS, generate.proc.pid) == own + 10
        assert len(pool._idle) + len(pool._busy) == 2  # no process past the size
    finally:
        pool.close()


def test_a_prefix_is_primed_once_and_again_after_its_process_is_gone() -> None:
    pool = server_pool(size=1)
    try:
        text = HEAD + BODY.format(value="1.0f")
        pool.compile(unit(text), OPTIONS, [], syntax_only=True)
        wait_primed(pool, 1)
        (worker,) = pool._idle
        worker.prefixes = set()  # as if NVRTC had made no PCH: not tried at every check
        pool.compile(unit(text.replace("1.0f", "2.0f")), OPTIONS, [], syntax_only=True)
        time.sleep(0.3)
        assert pool.primed == 1 and not pool._priming
        worker.prefixes = {pch_key(unit(text), OPTIONS)}
        pool._take(None, syntax_only=True)
        pool._drop(worker)  # a crash or a time limit: the PCH went with the process
        pool.compile(unit(text.replace("1.0f", "3.0f")), OPTIONS, [], syntax_only=True)
        wait_primed(pool, 2)
    finally:
        pool.close()


def test_headers_that_say_something_are_never_precompiled(tmp_path: Path) -> None:
    """A PCH would not repeat its headers' warnings: the file's next check would lose them."""
    (tmp_path / "noisy.cuh").write_text("__device__ int noisy() { int unused; return 1; }\n")
    text = '#include "noisy.cuh"\n' + BODY.format(value="1.0f")
    pool = server_pool(size=1)
    try:
        noisy = build_device_unit(text, tmp_path / "k.cu", ())
        first = pool.compile(noisy, OPTIONS, [], syntax_only=True)
        assert any(d.message.startswith("in included file") for d in first.diagnostics)
        time.sleep(0.5)
        assert pool.primed == 0 and not pool._priming
        again = pool.compile(noisy, OPTIONS, [], syntax_only=True)
        assert again.diagnostics == first.diagnostics
    finally:
        pool.close()


def test_a_cli_run_creates_no_pch() -> None:
    """`check` compiles each file once: a PCH would cost half a check more and serve nothing."""
    pool = isolated.CompilePool(size=1)
    try:
        for value in ("1.0f", "2.0f"):
            pool.compile(unit(HEAD + BODY.format(value=value)), OPTIONS, [], syntax_only=True)
        time.sleep(0.3)
        assert pool.primed == 0 and pool.pch_compiles == 0
    finally:
        pool.close()


def test_light_headers_get_no_pch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading a PCH costs ~0.1 s: headers that parse faster are compiled plainly."""
    monkeypatch.setattr(isolated, "PRIME_MIN_CPU_S", isolated.PRIME_MIN_CPU_S)
    monkeypatch.setattr(isolated, "PRIME_MIN_CPU_S", 0.5)
    pool = server_pool(size=1)
    try:
        pool.compile(unit(HEAD + BODY.format(value="1.0f")), OPTIONS, [], syntax_only=True)
        deadline = time.monotonic() + 60
        while not pool._tried or pool._priming:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        pool.compile(unit(HEAD + BODY.format(value="2.0f")), OPTIONS, [], syntax_only=True)
        assert pool.primed == 0 and pool.pch_compiles == 0
    finally:
        pool.close()


def test_the_pch_is_made_from_the_header_prefix_alone() -> None:
    """Creating it costs the headers, not the file: a large file is not compiled twice."""
    assert isolated.prefix_end(HEAD + BODY) == len(HEAD)
    assert isolated.prefix_end("/* a\n b */\n#include <x>\n\nint y;\n") == len(
        "/* a\n b */\n#include <x>\n\n"
    )
    pool = server_pool(size=1)
    seen: list[str] = []
    real = isolated._Worker.call

    def spy(worker: isolated._Worker, request: isolated.Request, timeout_s: float):
        seen.append(request.unit.text if request.pch else "")
        return real(worker, request, timeout_s)

    try:
        isolated._Worker.call = spy  # type: ignore[method-assign]
        pool.compile(unit(HEAD + BODY.format(value="1.0f")), OPTIONS, [], syntax_only=True)
        wait_primed(pool, 1)
        assert seen[-1].startswith(HEAD) and "__global__" not in seen[-1]
    finally:
        isolated._Worker.call = real  # type: ignore[method-assign]
        pool.close()


def test_the_folders_a_dead_pool_left_are_removed(tmp_path: Path) -> None:
    """A server killed outright leaves its processes' folders (a PCH is ~300 MB each)."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    left = Path(tempfile.mkdtemp(prefix=f"cuda-llm-compile-{dead.pid}-"))
    (left / "__nvrtc_auto_pch_1_0").mkdir()
    (left / "__nvrtc_auto_pch_1_0" / "k_0.pch").write_bytes(b"x")
    alive = Path(tempfile.mkdtemp(prefix=f"cuda-llm-compile-{os.getppid()}-"))
    try:
        server_pool(size=1).close()
        assert not left.exists()
        assert alive.exists()  # a running process's: kept
    finally:
        shutil.rmtree(left, ignore_errors=True)
        shutil.rmtree(alive, ignore_errors=True)
