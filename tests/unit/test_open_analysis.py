"""`engine.analysis.open_analysis`: what the server starts at `initialized`, before any file."""

from __future__ import annotations

import time

import pytest

from cuda_llm_lsp.compile import headers
from cuda_llm_lsp.engine import analysis


class _Pool:
    """Stands for the compile pool: its processes are `test_pch_kept`'s subject, not this one's."""

    BACKGROUND_NICE = 10
    background_nice = 0

    def __init__(self) -> None:
        self.warmed = 0

    def use_pch(self, persistent: bool = False) -> None:
        self.persistent = persistent

    def warm(self, *, first: bool = False) -> None:
        self.warmed += 1
        self.first = first


def test_the_editor_finds_the_toolkit_headers_before_the_first_document(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Finding them costs 0.2 s (cuda.pathfinder's import and a subprocess): paid while the
    compile processes start, not inside the first document's check."""
    pool = _Pool()
    monkeypatch.setattr(analysis._isolated, "shared_pool", lambda: pool)
    headers.toolkit_include_dirs.cache_clear()
    analysis.open_analysis(editor=True)
    assert pool.warmed == 1 and pool.first  # the process the first check takes, alone
    deadline = time.monotonic() + 60
    while headers.toolkit_include_dirs.cache_info().currsize == 0:
        assert time.monotonic() < deadline, "the toolkit's headers were not looked up"
        time.sleep(0.01)
    assert headers.toolkit_include_dirs()  # the same answer, from the cache
