"""A compile-cache entry with valid JSON and wrong-typed fields is a miss (issue 25,
finding 7), over real stdio: after a restart the file's diagnostics are right, not "could not
analyse" on every edit."""

from __future__ import annotations

import json
from pathlib import Path

from tests.lsp.hardening import DIAGNOSTICS_S, KERNEL, initialize, messages, on_line
from tests.support.raw_lsp import RawServer, server_env


def _diagnostics_once(workspace: Path, env: dict[str, str]) -> tuple[list[dict], list[str]]:
    server = RawServer(env=env)
    try:
        initialize(server, {}, workspace)
        uri = server.open(workspace / "k.cu", KERNEL)
        diagnostics = server.diagnostics(uri, 1, DIAGNOSTICS_S)
        return diagnostics, messages(server)
    finally:
        server.close()


def _corrupt(entry: Path) -> bool:
    """Wrong types in valid JSON: line numbers as text, a severity that is no severity."""
    data = json.loads(entry.read_text())
    result = data.get("result", {})
    for diagnostic in result.get("diagnostics", []):
        diagnostic["line"] = str(diagnostic["line"])
        diagnostic["end_column"] = None
    result["ok"] = "no"
    entry.write_text(json.dumps(data))
    return bool(result.get("diagnostics"))


def test_corrupt_cache_entries_are_misses(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    cache = tmp_path / "compile-cache"
    env = server_env(tmp_path / "scratch", CUDA_LLM_CACHE_DIR=str(cache))
    first, _ = _diagnostics_once(workspace, env)
    assert any("undefined_factor" in m for m in on_line(first, 2)), first
    entries = list(cache.rglob("*.json"))
    assert entries, "the compile was cached"
    assert any([_corrupt(e) for e in entries])
    again, shown = _diagnostics_once(workspace, env)
    assert not [m for m in shown if "could not analyse" in m], shown
    assert again == first
