"""What a front end does with an outcome's edit before and after the user takes it: the diff to
show (`show_diff`), the last check before the file is written (`check_write`), the user's
decision kept in the run's history (`record_decision`).
"""

from __future__ import annotations

from pathlib import Path

from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.fsr import apply as _apply
from cuda_llm_lsp.fsr import edit as _edit
from cuda_llm_lsp.fsr import history as _history
from cuda_llm_lsp.fsr.apply import WriteCheck

__all__ = ["WriteCheck", "check_write", "record_decision", "show_diff"]


def show_diff(old_text: str, new_text: str, path: str) -> str:
    """A `git apply`-able unified diff of the file, `a/` and `b/` labels."""
    return _edit.unified_diff(old_text, new_text, path)


def check_write(
    edited: str, original: str, path: Path | None, settings: Settings | None = None
) -> WriteCheck:
    """Whether `edited` may replace `original` (`fsr.apply.write_check`: no hidden characters;
    where nvcc runs, the whole file builds and its host object gains nothing unexplained)."""
    return _apply.write_check(edited, original, path, settings)


def record_decision(run_id: int, decision: str | None) -> None:
    """The user's accept or reject of run `run_id`'s suggestion, in the history."""
    _history.record_decision(run_id, decision)
