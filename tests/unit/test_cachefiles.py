"""Cache files are written whole or not at all."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cuda_llm_lsp.cachefiles import write_json_atomic


def test_writes_and_replaces_without_leaving_temporary_files(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "facts.json"
    assert write_json_atomic(target, {"a": 1})
    assert write_json_atomic(target, {"a": 2}, indent=1)
    assert json.loads(target.read_text()) == {"a": 2}
    assert [p.name for p in target.parent.iterdir()] == ["facts.json"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write to a read-only directory")
def test_a_read_only_directory_is_reported_not_raised(tmp_path: Path) -> None:
    tmp_path.chmod(0o555)
    try:
        assert not write_json_atomic(tmp_path / "x.json", {"a": 1})
    finally:
        tmp_path.chmod(0o755)


def test_unserialisable_data_leaves_the_old_file_intact(tmp_path: Path) -> None:
    target = tmp_path / "facts.json"
    write_json_atomic(target, {"a": 1})
    with pytest.raises(TypeError):
        write_json_atomic(target, {"a": object()})
    assert json.loads(target.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["facts.json"]
