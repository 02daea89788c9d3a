"""`cudaLlm.persistentPch` on the real server over stdio (issue 38): in a trusted workspace the
compile processes that front-end check the user's files start without address-space
randomization (a PCH kept across sessions records its heap's address), the code generation
process keeps it, and the cache gets its PCH folder; in an untrusted workspace the server
refuses the setting and every process keeps randomization.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from cuda_llm_lsp.compile.isolated import ADDR_NO_RANDOMIZE
from tests.lsp.hardening import DIAGNOSTICS_S, KERNEL, initialize, messages
from tests.support.raw_lsp import RawServer, server_env

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux personality")


def compile_processes(parent: int) -> list[int]:
    """The running `compile.isolated` children of process `parent`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent and b"cuda_llm_lsp.compile.isolated" in command:
            found.append(int(entry.name))
    return found


def randomized(pid: int) -> bool:
    return not int(Path(f"/proc/{pid}/personality").read_text().strip(), 16) & ADDR_NO_RANDOMIZE


@pytest.mark.parametrize("trusted", [True, False])
def test_the_setting_reaches_the_compile_processes_of_a_trusted_workspace(
    tmp_path: Path, trusted: bool
) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    kept = tmp_path / "kept"
    server = RawServer(server_env(tmp_path, CUDA_LLM_CACHE_DIR=str(kept)))
    try:
        options = {"cudaLlm": {"persistentPch": True}, "workspaceTrusted": trusted}
        initialize(server, options, root)
        uri = server.open(root / "k.cu", KERNEL)
        server.diagnostics(uri, 1, timeout=DIAGNOSTICS_S)  # a front-end check has run
        deadline = time.monotonic() + 30
        while len(children := compile_processes(server.process.pid)) < 2:
            assert time.monotonic() < deadline, "the compile processes did not start"
            time.sleep(0.1)
        own = os.getpriority(os.PRIO_PROCESS, server.process.pid)
        kinds = {(os.getpriority(os.PRIO_PROCESS, pid) > own, randomized(pid)) for pid in children}
        if trusted:
            assert (False, False) in kinds  # a front-end check's process: not randomized
            assert (True, False) not in kinds  # code generation (niced) never
            assert (kept / "pch").is_dir()
        else:
            assert all(random for _, random in kinds)
            assert not (kept / "pch").exists()
            assert any("cudaLlm.persistentPch left out" in m for m in messages(server))
    finally:
        server.close()
