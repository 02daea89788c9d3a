"""An accepted candidate's unified diff (the CLI); the new text is `fsr.apply.winner_text`."""

from __future__ import annotations

import difflib


def unified_diff(old_text: str, new_text: str, path: str) -> str:
    """A `git apply`-able unified diff with `a/` and `b/` labels."""
    label = path.lstrip("/")
    lines = difflib.unified_diff(
        old_text.splitlines(keepends=True),
        new_text.splitlines(keepends=True),
        fromfile=f"a/{label}",
        tofile=f"b/{label}",
    )
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)
