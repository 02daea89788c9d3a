"""The best configuration written back: the file's `#define` defaults, else the spec's lists.

A tunable with a guarded `#define NAME value` in the file gets the best value there (what the
program compiles to without `-D`, and the spec's default configuration). One without gets the best
value moved to the front of its `tune.NAME = [...]` list in the spec (the first value is its
default). The spec's `grid`, `block` and `smem` are expressions over the tunables, so they follow.
Launch sites in host code that spell the old numbers themselves are not rewritten yet
(`source/launch_sites.py` can; not wired to tuning).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from cuda_llm_lsp.source.kernels import Kernel
from cuda_llm_lsp.source.spec import TestSpec
from cuda_llm_lsp.source.text import offset_of


@dataclass(frozen=True)
class TunedEdit:
    text: str  # the whole file with the best values as defaults
    notes: tuple[str, ...]  # what could not be written, for the user


def tuned_text(text: str, kernel: Kernel, spec: TestSpec, best: Mapping[str, int]) -> TunedEdit:
    """`text` with `best` as the default configuration of `kernel`'s tunables."""
    tunables = spec.tunables
    if tunables is None:
        return TunedEdit(text, ())
    edits: list[tuple[int, int, str]] = []
    notes: list[str] = []
    block = kernel.spec if kernel.spec is not None else kernel.launch_block  # a candidate's
    for name, value in best.items():
        if tunables.default.get(name) == value:
            continue
        define = tunables.defines.get(name)
        if define is not None:
            edits.append((define.start, define.end, str(value)))
            continue
        if block is None:  # pragma: no cover - a spec always has its block
            continue
        start, end = offset_of(text, block.span.start), offset_of(text, block.span.end)
        found = re.search(
            rf"(?m)^([ \t]*tune\.{re.escape(name)}[ \t]*=[ \t]*)\[([^\]\n]*)\]", text[start:end]
        )
        if found is None:
            notes.append(f"tune.{name}: not on one line; put {value} first in its list by hand")
            continue
        values = [value, *(v for v in tunables.values[name] if v != value)]
        list_start = start + found.start(2) - 1
        edits.append(
            (list_start, start + found.end(2) + 1, "[" + ", ".join(map(str, values)) + "]")
        )
    for begin, finish, new in sorted(edits, reverse=True):
        text = text[:begin] + new + text[finish:]
    return TunedEdit(text, tuple(notes))
