"""Putting a candidate into the file: the new text and its unified diff (CLI and editor)."""

from __future__ import annotations

import difflib

from cuda_llm_lsp.source.text import Span, replace_span


def apply_candidate(file_text: str, kernel_span: Span, source: str) -> str:
    """`file_text` with the kernel's range replaced by `source` (the rest byte-identical)."""
    replacement = source.rstrip("\n")
    return replace_span(file_text, kernel_span, replacement)


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
