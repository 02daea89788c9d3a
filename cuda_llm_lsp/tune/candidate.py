"""Tuning a model's candidate: its launch block's `tune.NAME` / `restrict`, judged against the
original kernel, and the sentence the model is told about it.

The FSR loop (docs/design.md, "Tuning") tunes a correct candidate that declares tunables before
ranking it: `candidate_request` turns the candidate into a `TuneRequest` (None when it declares
none), `tune_kernel` searches it with the original's binary as oracle and reference, and
`feedback` says what tuning found (the best configuration, its time, the spread between
configurations) for the next prompt. The candidate then ranks with its best configuration, as
`tuned_source` writes it.
"""

from __future__ import annotations

from pathlib import Path

from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.evaluate.types import KernelBinary
from cuda_llm_lsp.source.kernels import find_kernels
from cuda_llm_lsp.source.spec import SpecError, TestSpec
from cuda_llm_lsp.source.spec.launch import parse_launch_block
from cuda_llm_lsp.source.spec.tunables import describe
from cuda_llm_lsp.tune.edit import tuned_text
from cuda_llm_lsp.tune.search import TuneRequest, TuneResult


def candidate_request(
    file_text: str, path: Path | None, kernel: str, spec: TestSpec, settings: Settings,
    source: str, baseline: KernelBinary,
) -> TuneRequest | list[SpecError] | None:  # fmt: skip
    """The tuning of candidate `source` for `kernel` (the original's `spec` and `baseline`);
    None when its launch block declares no tunables of its own; the block's errors otherwise."""
    found = [k for k in find_kernels(source) if k.name == kernel]
    if len(found) != 1:
        return None  # the judge reports it (signature_mismatch)
    config, errors = parse_launch_block(found[0], spec, source)
    if errors:
        return errors
    if config is None or config.tunables is None or config.tunables is spec.tunables:
        return None
    return TuneRequest(file_text, kernel, spec, settings, path, kernel_source=source,
                       tuned_spec=config.applied_to(spec), baseline=baseline)  # fmt: skip


def tuned_source(request: TuneRequest, result: TuneResult) -> str | None:
    """The candidate's text with its best configuration as the defaults (`#define`s, else the
    launch block's list order): what is ranked, offered and written. None when nothing passed."""
    source, spec = request.kernel_source, request.tuned_spec
    if result.best is None or source is None or spec is None:
        return None
    found = [k for k in find_kernels(source) if k.name == request.kernel]
    if len(found) != 1:  # pragma: no cover - candidate_request found exactly one
        return None
    return tuned_text(source, found[0], spec, result.best.config).text


def feedback(result: TuneResult) -> str:
    """One paragraph for the model: what tuning its tunables gave."""
    correct = [m for m in result.measured if m.status == "ok"]
    failed = len(result.measured) - len(correct)
    head = (f"Tuned {len(result.measured)} configuration(s) of your tunables ({result.strategy}"
            f" search of {result.space_size}); {len(correct)} correct")  # fmt: skip
    if failed:
        statuses = sorted({m.status for m in result.measured if m.status != "ok"})
        head += f", {failed} not ({', '.join(statuses)})"
    if result.best is None:
        return head + ". None passed again on new inputs: it is ranked as failed."
    best = result.best
    text = (f"{head}. Best: {describe(best.config)}, {best.ms:.4g} ms ({best.speedup:.2f}x "
            "the original)")  # fmt: skip
    default = result.default_result
    if default is not None and default.ms and default.config != best.config:
        text += f"; your default {describe(default.config)}: {default.ms:.4g} ms"
    if result.spread:
        text += f"; slowest correct / fastest: {result.spread:.2f}x"
    return text + "."
