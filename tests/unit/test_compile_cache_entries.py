"""A cache entry with valid JSON and a wrong-typed field is a miss, never a hit that raises
later (issue 25, finding 7)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from cuda_llm_lsp.compile import cache
from cuda_llm_lsp.compile.types import CompileResult, Diagnostic, Resources

GOOD = CompileResult(
    ok=True,
    arch="sm_90",
    diagnostics=(Diagnostic(3, 5, 3, 9, "warning", "unused", code="177-D"),),
    log="ptxas info\n",
    cubin=b"\x7fELF",
    lowered_names={"k": "_Z1kv"},
    resources={"k": Resources(32, 0, 0, 0, 0)},
)


def _stored(path: Path) -> dict[str, Any]:
    cache._write(path, GOOD)
    return json.loads(path.read_text())


def test_a_good_entry_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "e.json"
    _stored(path)
    assert cache._read(path) == GOOD


CORRUPTIONS = {
    "line as text": ("diagnostics", 0, "line", "3"),
    "line as bool": ("diagnostics", 0, "line", True),
    "severity unknown": ("diagnostics", 0, "severity", "fatal"),
    "message as list": ("diagnostics", 0, "message", ["x"]),
    "code as number": ("diagnostics", 0, "code", 177),
    "extra field": ("diagnostics", 0, "extra", 1),
    "registers as text": ("resources", "k", "registers", "32"),
    "registers as float": ("resources", "k", "registers", 32.5),
    "ok as text": ("ok", None, None, "yes"),
    "log as number": ("log", None, None, 5),
    "arch as null": ("arch", None, None, None),
    "diagnostics as text": ("diagnostics", None, None, "none"),
    "resources as list": ("resources", None, None, []),
    "lowered value as number": ("lowered_names", "k", None, 1),
    "cubin not base64": ("cubin", None, None, "!!!not base64!!!"),
    "cubin as number": ("cubin", None, None, 7),
}


@pytest.mark.parametrize("name", list(CORRUPTIONS))
def test_a_wrong_typed_field_is_a_miss(tmp_path: Path, name: str) -> None:
    path = tmp_path / "e.json"
    data = _stored(path)
    field, index, key, value = CORRUPTIONS[name]
    bad = copy.deepcopy(data)
    target = bad["result"]
    if index is None:
        target[field] = value
    elif key is None:
        target[field][index] = value
    else:
        target[field][index][key] = value
    path.write_text(json.dumps(bad))
    assert cache._read(path) is None


@pytest.mark.parametrize("text", ["[]", "1", '"x"', '{"format": 1}', '{"format": 1, "result": 3}'])
def test_other_shapes_are_misses(tmp_path: Path, text: str) -> None:
    path = tmp_path / "e.json"
    path.write_text(text)
    assert cache._read(path) is None


def test_get_treats_a_corrupt_entry_as_a_miss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_LLM_CACHE_DIR", str(tmp_path))
    key = "ab" + "0" * 62
    path = cache.cache_dir() / key[:2] / f"{key}.json"
    path.parent.mkdir(parents=True)
    data = _stored(path)
    data["result"]["diagnostics"][0]["line"] = "3"
    path.write_text(json.dumps(data))
    assert cache.CompileCache().get(key) is None
