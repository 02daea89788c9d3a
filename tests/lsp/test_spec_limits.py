"""A spec with numbers no buffer can have is a diagnostic at its place, and offers no job (issue
25, finding 6).

An integer of more than 4,300 digits made tomllib raise (Python's int-conversion limit), and a
size expression whose value had that many digits made the message's own formatting raise: a
traceback in the log, no diagnostic, and Optimize/Benchmark still offered. Over stdio against
the real server: the diagnostic is on the number's line, the code lenses and code actions offer
no Optimize, Benchmark or Tune, and stderr has no traceback.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.raw_lsp import RawServer, server_env

SPEC = """/* @cuda-llm
sizes.n = {sizes}
grid = {grid}
block = 256
args.x = "float32[{count}]"
args.n = "n"
*/
extern "C" __global__ void k(float* x, int n) {{ int i = blockIdx.x; if (i < n) x[i] = 0; }}
"""
CASES = {
    "5,000-digit size": (dict(sizes="[" + "9" * 5000 + "]", grid="1", count="n"), 1),
    "5,000-digit grid": (dict(sizes="[4]", grid="9" * 5000, count="n"), 2),
    "count of 600 factors": (dict(sizes="[2147483647]", grid="1", count="n" + "*n" * 600), 4),
    "count of 2^70": (dict(sizes="[4]", grid="1", count="n*1180591620717411303424"), 4),
    "size over 2^40": (dict(sizes="[1180591620717411303424]", grid="1", count="n"), 1),
}
JOB_TITLES = ("Optimize", "Benchmark", "Tune")


@pytest.fixture
def raw(tmp_path: Path) -> Iterator[RawServer]:
    server = RawServer(env=server_env(tmp_path))
    server.initialize('{"cudaLlm": {"debounceMs": 0}}', client="visual-studio-code")
    yield server
    server.close()


def _titles(reply: dict[str, Any]) -> list[str]:
    found = []
    for item in reply.get("result") or []:
        command = item.get("command")
        found.append(item.get("title") or (command or {}).get("title", ""))
    return found


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_unreadable_number_is_a_diagnostic_and_offers_no_job(
    raw: RawServer, tmp_path: Path, case: str
) -> None:
    fields, line = CASES[case]
    text = SPEC.format(**fields)
    uri = raw.open(tmp_path / "huge.cu", text)
    found = raw.diagnostics(uri, 1, timeout=60)
    spec = [d for d in found if d.get("source") == "cuda-llm" and d["severity"] == 1]
    assert spec and spec[0]["range"]["start"]["line"] == line, found
    kernel_line = text.split("\n").index(next(t for t in text.split("\n") if "void k(" in t))
    lenses = raw.response(
        raw.request("textDocument/codeLens", {"textDocument": {"uri": uri}}), timeout=30
    )
    where = {"line": kernel_line, "character": 40}
    actions = raw.response(
        raw.request(
            "textDocument/codeAction",
            {
                "textDocument": {"uri": uri},
                "range": {"start": where, "end": where},
                "context": {"diagnostics": []},
            },
        ),
        timeout=30,
    )
    for title in _titles(lenses) + _titles(actions):
        assert not title.startswith(JOB_TITLES), (title, lenses, actions)
    assert "Traceback" not in raw.stderr(), raw.stderr()


def test_a_readable_spec_still_offers_the_jobs(raw: RawServer, tmp_path: Path) -> None:
    text = SPEC.format(sizes="[4, 1024]", grid='"cdiv(n, 256)"', count="n")
    uri = raw.open(tmp_path / "fine.cu", text)
    assert not [d for d in raw.diagnostics(uri, 1, timeout=60) if d["severity"] == 1]
    lenses = raw.response(
        raw.request("textDocument/codeLens", {"textDocument": {"uri": uri}}), timeout=30
    )
    assert {"Optimize", "Benchmark"} <= set(_titles(lenses)), lenses
