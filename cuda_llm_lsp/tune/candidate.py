"""Tuning a model's candidate: its launch block's `tune.NAME` / `restrict`, judged against the
original kernel, and the sentence the model is told about it.

The FSR loop (docs/design.md, "Tuning"; `fsr/tuning.py`) tunes a correct candidate that declares
tunables before ranking it: `with_launch_block` puts the reply's block back on the cleaned
candidate, whose parsed block (`fsr.launch.candidate_launch`) makes its `TuneRequest`,
`tune_kernel` searches it with the original's binary as oracle and reference, and `feedback`
says what tuning found (the best configuration, its time, the spread between configurations)
for the next prompt. The candidate then ranks with its best configuration: `pinned_source`
writes it as the kernel's own `#define` defaults (so the text compiles, without any `-D`, to
what was measured) and `resolved_launch` writes it into the launch (numbers, no tunables: the
launch that is re-validated, offered and written). A search the time budget cut off before
anything failed (`cut_short`) leaves the candidate with its default configuration.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace

from cuda_llm_lsp.source.kernels import find_kernels
from cuda_llm_lsp.source.spec.launch import LaunchConfig
from cuda_llm_lsp.source.spec.tunables import describe
from cuda_llm_lsp.source.text import offset_of
from cuda_llm_lsp.tune.edit import tuned_text
from cuda_llm_lsp.tune.search import TuneRequest, TuneResult


def with_launch_block(code: str, source: str, kernel: str) -> str | None:
    """`source` (the candidate as cleaned for the build: no `@cuda-llm` comment) with the launch
    block of `kernel` in the raw reply `code` put back directly above the kernel; None when
    either has no single such kernel or the reply has no block."""
    raw = [k for k in find_kernels(code) if k.name == kernel]
    clean = [k for k in find_kernels(source) if k.name == kernel]
    if len(raw) != 1 or len(clean) != 1 or raw[0].launch_block is None:
        return None
    block = raw[0].launch_block.span.slice(code)
    at = offset_of(source, clean[0].span.start)
    at = source.rfind("\n", 0, at) + 1  # the start of the kernel's first line
    return source[:at] + block + "\n" + source[at:]


def pinned_source(request: TuneRequest, config: Mapping[str, int]) -> str | None:
    """The candidate's text compiling, without any `-D`, to `config`: each tunable's guarded
    `#define` set to its value, and one added (`#ifndef NAME` / `#define NAME value` /
    `#endif`) above the launch block for a tunable the candidate gave no `#define` (its default
    was the list's first value, which only `-D` gave it). None without a candidate's text."""
    source, spec = request.kernel_source, request.tuned_spec
    if source is None or spec is None or spec.tunables is None:
        return None
    found = [k for k in find_kernels(source) if k.name == request.kernel]
    if len(found) != 1:  # pragma: no cover - the loop parsed exactly one
        return None
    defined = {n: v for n, v in config.items() if n in spec.tunables.defines}
    text = tuned_text(source, found[0], spec, defined).text
    missing = [n for n in config if n not in spec.tunables.defines]
    if not missing:
        return text
    (kernel,) = [k for k in find_kernels(text) if k.name == request.kernel]
    block = kernel.launch_block or kernel.spec
    anchor = block.span.start if block is not None else kernel.span.start
    at = offset_of(text, anchor)
    at = text.rfind("\n", 0, at) + 1
    guards = "".join(f"#ifndef {n}\n#define {n} {config[n]}\n#endif\n" for n in missing)
    return text[:at] + guards + text[at:]


def resolved_launch(launch: LaunchConfig, config: Mapping[str, int]) -> LaunchConfig:
    """`launch` with each tunable's name replaced by its value in `config` (grid, block, smem):
    the configuration's launch in the size names alone, as the file's spec and launch sites
    can carry it (a launch with tunables is not written into a file)."""

    def written(text: str) -> str:
        for name, value in config.items():
            number = str(value) if value >= 0 else f"({value})"
            text = re.sub(rf"(?<![\w.]){re.escape(name)}(?!\w)", number, text)
        return text

    return replace(
        launch,
        grid=tuple(map(written, launch.grid)),
        block=tuple(map(written, launch.block)),
        smem=written(launch.smem),
        tunables=None,
    )


def cut_short(result: TuneResult) -> bool:
    """The time budget stopped the search before any configuration passed twice and none
    failed (possibly before any was measured): nothing speaks against the default."""
    return (
        result.best is None
        and result.stopped == "budget"
        and all(m.status == "ok" for m in result.measured)
    )


def feedback(result: TuneResult) -> str:
    """One paragraph for the model: what tuning its tunables gave."""
    correct = [m for m in result.measured if m.status == "ok"]
    failed = len(result.measured) - len(correct)
    head = (
        f"Tuned {len(result.measured)} configuration(s) of your tunables ({result.strategy}"
        f" search of {result.space_size}); {len(correct)} correct"
    )
    if failed:
        statuses = sorted({m.status for m in result.measured if m.status != "ok"})
        head += f", {failed} not ({', '.join(statuses)})"
    if result.stopped == "budget":
        head += "; stopped at the time budget"
    if cut_short(result):
        return head + ". It ranks with its default configuration, as judged."
    if result.best is None:
        return head + ". None passed again on new inputs: it is ranked as failed."
    best = result.best
    text = (
        f"{head}. Best: {describe(best.config)}, {best.ms:.4g} ms ({best.speedup:.2f}x "
        "the original)"
    )
    default = result.default_result
    if default is not None and default.ms and default.config != best.config:
        text += f"; your default {describe(default.config)}: {default.ms:.4g} ms"
    if result.spread:
        text += f"; slowest correct / fastest: {result.spread:.2f}x"
    return text + "."
