"""Precompiled headers kept across sessions (issue 38, `cudaLlm.persistentPch`): a PCH written
by one pool's compile processes (without address-space randomization) is read by a later pool's
new processes; a file NVRTC turns down is deleted and the check compiled plainly; off, nothing
is written and every process keeps randomization; code generation never runs without it.

Real NVRTC in real compile processes, with a small header (`<cuda_fp16.h>`) so that a PCH is
quick to make; `benchmarks/lsp_heavy_headers.py --persistent-pch` measures the heavy ones. That
a PCH was read is NVRTC's own word (its "using precompiled header file" line: `stored_uses`),
never a time.
"""

from __future__ import annotations

import os
import signal
import stat
import sys
import time
from pathlib import Path

import pytest

from cuda_llm_lsp.compile import isolated, pch_store
from cuda_llm_lsp.compile.device_unit import build_device_unit
from cuda_llm_lsp.compile.isolated import pch_key
from cuda_llm_lsp.compile.types import CompileOptions

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux personality")

OPTIONS = CompileOptions(arch="sm_90")
HEAD = "#include <cuda_fp16.h>\n#define N 4\n"
BODY = "__global__ void k(__half* x) {{ x[threadIdx.x] = __float2half({value}); }}\n"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CUDA_LLM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CUDA_LLM_PCH", raising=False)
    monkeypatch.setattr(isolated, "PRIME_MIN_CPU_S", 0.0)  # <cuda_fp16.h>: too light but here
    return tmp_path / "cache"


def unit(text: str):
    return build_device_unit(text, Path("/tmp/k.cu"), ())


def server_pool(persistent: bool, size: int = 2) -> isolated.CompilePool:
    """A pool as the server sets it up (`engine.analysis.open_analysis(editor=True)`)."""
    pool = isolated.CompilePool(size=size)
    pool.background_nice = isolated.CompilePool.BACKGROUND_NICE
    pool.use_pch(persistent=persistent)
    return pool


def wait_primed(pool: isolated.CompilePool, count: int) -> None:
    deadline = time.monotonic() + 120
    while pool.primed < count or pool._priming:
        assert time.monotonic() < deadline, "no PCH was created"
        time.sleep(0.02)


def kept(cache: Path) -> list[Path]:
    return sorted((cache / "pch").glob("*.pch"))


def randomized(pid: int) -> bool:
    flags = int(Path(f"/proc/{pid}/personality").read_text().strip(), 16)
    return not flags & isolated.ADDR_NO_RANDOMIZE


def check(pool: isolated.CompilePool, text: str):
    return pool.compile(unit(text), OPTIONS, [], syntax_only=True)


def plain_check(text: str):
    pool = isolated.CompilePool(size=1)  # the CLI's: no PCH at all
    try:
        return check(pool, text)
    finally:
        pool.close()


def test_a_new_sessions_processes_read_the_pch_the_last_session_kept(
    _private_cache: Path,
) -> None:
    first = server_pool(persistent=True)
    try:
        assert check(first, HEAD + BODY.format(value="1.0f")).ok
        assert first.stored_uses == 0  # none kept yet: plain, then its PCH is written
        wait_primed(first, 1)
        assert len(kept(_private_cache)) == 1
        folder = _private_cache / "pch"
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        assert not list(folder.glob("*.tmp"))
        # the same session's next check reads it too, in whichever process
        assert check(first, HEAD + BODY.format(value="2.0f")).ok
        assert first.stored_uses == 1
        pids = {w.proc.pid for w in first._idle}
    finally:
        first.close()
    second = server_pool(persistent=True)
    try:
        broken = HEAD + BODY.format(value="undeclared_name")
        result = check(second, broken)
        assert second.stored_uses == 1 and second.primed == 0
        assert not pids & {w.proc.pid for w in second._idle}  # new processes
        assert result.diagnostics == plain_check(broken).diagnostics
        assert [(d.line, d.severity) for d in result.errors] == [(3, "error")]
        assert "precompiled" not in result.log
        time.sleep(0.3)
        assert second.primed == 0 and len(kept(_private_cache)) == 1  # nothing made again
    finally:
        second.close()


def test_a_corrupt_kept_pch_is_deleted_and_the_check_is_right(_private_cache: Path) -> None:
    text = HEAD + BODY.format(value="undeclared_name")
    folder = _private_cache / "pch"
    folder.mkdir(parents=True, mode=0o700)
    planted = folder / pch_store.file_name(pch_key(unit(text), OPTIONS), isolated.PCH_HEAP_MB)
    corrupt = b"CPCH" + os.urandom(4096)
    planted.write_bytes(corrupt)
    pool = server_pool(persistent=True)
    try:
        result = check(pool, text)
        assert pool.refusals == 1 and pool.stored_uses == 0
        assert result.diagnostics == plain_check(text).diagnostics
        assert [(d.line, d.severity) for d in result.errors] == [(3, "error")]
        wait_primed(pool, 1)  # deleted, and made again from the headers
        assert planted.read_bytes()[: len(corrupt)] != corrupt
        assert check(pool, HEAD + BODY.format(value="2.0f")).ok
        assert pool.stored_uses == 1
    finally:
        pool.close()


def test_a_process_dying_with_a_kept_pch_costs_the_pch_not_the_diagnostics(
    _private_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A PCH file that crashes NVRTC (here: the process killed by SIGSEGV as it gets one) must
    not show as "the compiler crashed on this file" (cached until the text changes): the file
    is deleted and the text compiled plainly."""
    text = HEAD + BODY.format(value="undeclared_name")
    folder = _private_cache / "pch"
    folder.mkdir(parents=True, mode=0o700)
    planted = folder / pch_store.file_name(pch_key(unit(text), OPTIONS), isolated.PCH_HEAP_MB)
    corrupt = b"CPCH" + os.urandom(4096)
    planted.write_bytes(corrupt)
    real = isolated._Worker.call

    def crash(worker: isolated._Worker, request: isolated.Request, timeout_s: float):
        if request.pch_file and not request.create_pch:
            os.kill(worker.proc.pid, signal.SIGSEGV)
        return real(worker, request, timeout_s)

    monkeypatch.setattr(isolated._Worker, "call", crash)
    pool = server_pool(persistent=True)
    try:
        result = check(pool, text)
        assert not any(d.code == isolated.CRASH_CODE for d in result.diagnostics)
        assert result.diagnostics == plain_check(text).diagnostics
        assert pool.refusals == 1
        wait_primed(pool, 1)  # deleted, then made again from the headers
        assert planted.read_bytes()[: len(corrupt)] != corrupt
    finally:
        pool.close()


def test_a_stale_kept_pch_is_deleted_and_primed_again(_private_cache: Path) -> None:
    """A PCH of other headers under this prefix's name (headers changed since): NVRTC turns it
    down; the check is plain and right, and a PCH of the headers as they are replaces it."""
    first = server_pool(persistent=True)
    try:
        check(first, "#include <cuda_bf16.h>\n" + BODY.format(value="1.0f"))
        wait_primed(first, 1)
    finally:
        first.close()
    (other,) = kept(_private_cache)
    text = HEAD + BODY.format(value="undeclared_name")
    name = pch_store.file_name(pch_key(unit(text), OPTIONS), isolated.PCH_HEAP_MB)
    stale = other.rename(other.with_name(name))
    made = stale.stat().st_mtime_ns
    pool = server_pool(persistent=True)
    try:
        result = check(pool, text)
        assert pool.refusals == 1 and pool.stored_uses == 0
        assert result.diagnostics == plain_check(text).diagnostics
        wait_primed(pool, 1)
        assert stale.exists() and stale.stat().st_mtime_ns != made  # written anew
        check(pool, HEAD + BODY.format(value="2.0f"))
        assert pool.stored_uses == 1
    finally:
        pool.close()


def test_off_nothing_is_written_and_every_process_keeps_randomization(
    _private_cache: Path,
) -> None:
    pool = server_pool(persistent=False)
    try:
        check(pool, HEAD + BODY.format(value="1.0f"))
        wait_primed(pool, 1)  # the in-session PCH, as before
        assert check(pool, HEAD + BODY.format(value="2.0f")).ok
        assert pool.pch_compiles == 1 and pool.stored_uses == 0
        assert pool.compile(unit(HEAD + BODY.format(value="3.0f")), OPTIONS, ["k"]).ok
        workers = [*pool._idle, *pool._busy]
        assert len(workers) == 2 and all(randomized(w.proc.pid) for w in workers)
    finally:
        pool.close()
    assert not (_private_cache / "pch").exists()


def test_only_the_front_end_processes_run_without_randomization() -> None:
    pool = server_pool(persistent=True)
    try:
        pool.warm()
        assert check(pool, HEAD + BODY.format(value="1.0f")).ok
        assert pool.compile(unit(HEAD + BODY.format(value="2.0f")), OPTIONS, ["k"]).ok
        workers = [*pool._idle, *pool._busy]
        assert len(workers) == 2
        for worker in workers:
            assert worker.fixed == (worker.nice == 0)
            assert randomized(worker.proc.pid) == (not worker.fixed)
    finally:
        pool.close()


def test_a_candidate_compile_never_gets_a_process_without_randomization(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The optimize loop's candidates (model-written code) compile through `candidate._compile`:
    with kept PCHs on in the shared pool, not one of them reaches a fixed-address process."""
    from cuda_llm_lsp.compile import cache
    from cuda_llm_lsp.config import Settings
    from cuda_llm_lsp.evaluate import candidate

    isolated.close_shared_pool()
    pool = isolated.shared_pool()
    pool.background_nice = isolated.CompilePool.BACKGROUND_NICE
    pool.use_pch(persistent=True)
    monkeypatch.setattr(cache, "_shared", cache.CompileCache(use_disk=False))
    seen: list[tuple[bool, bool, int]] = []
    real = isolated._Worker.call

    def spy(worker: isolated._Worker, request: isolated.Request, timeout_s: float):
        seen.append((request.syntax_only, worker.fixed, worker.proc.pid))
        return real(worker, request, timeout_s)

    monkeypatch.setattr(isolated._Worker, "call", spy)
    try:
        pool.warm()
        assert check(pool, HEAD + BODY.format(value="1.0f")).ok  # a fixed process exists
        text = HEAD + BODY.format(value="3.0f")
        result = candidate._compile(text, Path("/tmp/k.cu"), Settings(), "sm_90", "k")
        assert result.ok
        generated = [(fixed, pid) for syntax_only, fixed, pid in seen if not syntax_only]
        assert generated and not any(fixed for fixed, _ in generated)
        assert all(randomized(pid) for _, pid in generated)
        assert any(fixed for syntax_only, fixed, _ in seen if syntax_only)
    finally:
        isolated.close_shared_pool()


def test_turned_off_the_next_check_runs_with_randomization(
    _private_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A settings change (or trust withdrawn) turns kept PCHs off: the next front-end check
    goes to a process with randomization, and the cache is not read."""
    pool = server_pool(persistent=True)
    seen: list[tuple[bool, int]] = []
    real = isolated._Worker.call

    def spy(worker: isolated._Worker, request: isolated.Request, timeout_s: float):
        seen.append((worker.fixed, worker.proc.pid))
        return real(worker, request, timeout_s)

    monkeypatch.setattr(isolated._Worker, "call", spy)
    try:
        check(pool, HEAD + BODY.format(value="1.0f"))
        wait_primed(pool, 1)
        assert seen[0][0] and len(kept(_private_cache)) == 1
        pool.set_persistent(False)
        seen.clear()
        assert check(pool, HEAD + BODY.format(value="2.0f")).ok
        ((fixed, pid),) = seen
        assert not fixed and randomized(pid) and pool.stored_uses == 0
    finally:
        pool.close()


def test_where_randomization_stays_on_no_pch_is_kept(
    _private_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A container refusing `personality` (here: the compile process started without
    `compile.fixed_addresses`, as if its call had failed): the process says so, and the pool
    falls back to the in-session PCH; no check fails for it."""
    plain = isolated._command(False)
    monkeypatch.setattr(isolated, "_command", lambda fixed: plain)
    pool = server_pool(persistent=True)
    try:
        assert check(pool, HEAD + BODY.format(value="1.0f")).ok
        deadline = time.monotonic() + 60
        while pool.persistent or pool._priming:
            assert time.monotonic() < deadline, "kept PCHs stayed on"
            time.sleep(0.05)
        assert check(pool, HEAD + BODY.format(value="2.0f")).ok
        wait_primed(pool, 1)  # the in-session PCH, in a process with randomization
        assert check(pool, HEAD + BODY.format(value="3.0f")).ok
        assert pool.pch_compiles == 1 and pool.stored_uses == 0
        assert not kept(_private_cache)
        assert all(randomized(w.proc.pid) for w in pool._idle if not w.fixed)
    finally:
        pool.close()


def test_only_nvrtcs_own_words_about_the_pch_file_count() -> None:
    """Its line of using the file is dropped from the log; any other of its words about a PCH
    means it was turned down (but a located `PCH`: a user's identifier)."""
    from cuda_llm_lsp.compile import nvrtc

    used = '"k.cu": using precompiled header file "/c/x.pch"\n'
    located = 'k.cu(3): error: identifier "PCH" is undefined\n'
    run = nvrtc._Run(False, used + located, None, {})
    assert nvrtc._pch_checked(run, "/c/x.pch", create=False).log == located
    refused = (
        "Warning #20282-D: incompatible precompiled header (PCH) heap allocation address from PCH "
        'file "/c/x.pch".\n'
    )
    small = (
        "cooperative_groups/reduce.h(63): warning #639-D: insufficient preallocated memory for "
        "generation of precompiled header file (300163072 bytes required)\n"
    )
    for log in (
        refused + used,
        located,
        "Catastrophic error: invalid precompiled header file\n",
        used + small,
    ):
        with pytest.raises(nvrtc.PchRefused):
            nvrtc._pch_checked(nvrtc._Run(False, log, None, {}), "/c/x.pch", create=False)
    made = '"k.cu": creating precompiled header file "/c/t.tmp"\n'
    assert nvrtc._pch_checked(nvrtc._Run(True, made, None, {}), "/c/t.tmp", create=True).log == ""


def test_eviction_keeps_the_newest_used_within_the_caps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pch_store, "MAX_FILES", 3)
    monkeypatch.setattr(pch_store, "MAX_BYTES", 2500)
    files = []
    for age, size in enumerate([1000, 1000, 1000, 1000]):
        path = tmp_path / f"{age}.pch"
        path.write_bytes(b"x" * size)
        os.utime(path, (1000 - age * 10, 1000 - age * 10))  # 0.pch used last
        files.append(path)
    left = tmp_path / ".a.pch.123.tmp"
    left.write_bytes(b"x")
    os.utime(left, (1, 1))
    pch_store.evict(tmp_path, keep=files[3])
    assert [p.exists() for p in files] == [True, False, False, True]  # 2.5 KB: two of them
    assert not left.exists()  # a dead writer's
    pch_store.touch(files[3])
    pch_store.evict(tmp_path)
    assert [p.exists() for p in files] == [True, False, False, True]
