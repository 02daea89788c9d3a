"""What a job leaves for a kernel, and its LSP forms: a report shown as diagnostics (source
`cuda-llm`) on the kernel's name, and a suggested kernel awaiting the user's Accept.

An Information diagnostic carries the figures (baseline and best latency, speedup, cases passed,
distance to the copy-bandwidth peak, or a benchmark's summary line); a Hint names the main
reasons candidates failed. Each report and suggestion remembers the kernel text it was measured
on: a report is dropped as soon as that text changes, a suggestion is never applied over other
text. Plain data and pure functions: the server state stores these, the features fill them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

from cuda_llm_lsp.engine.analysis import FileAnalysis
from cuda_llm_lsp.engine.outcomes import format_ms as engine_format_ms
from cuda_llm_lsp.engine.outcomes import peak_note
from cuda_llm_lsp.fsr.types import CandidateOutcome
from cuda_llm_lsp.lsp.positions import point_at, split_lines, to_range
from cuda_llm_lsp.source.kernels import Kernel
from cuda_llm_lsp.source.text import Span, offset_of
from cuda_llm_lsp.source.untrusted import neutralize

SOURCE = "cuda-llm"
SUGGESTION_NOTIFICATION = "cudaLlm/suggestion"
EXPERIMENTAL = "cudaLlm"  # capabilities.experimental.cudaLlm.suggestionNotification


@dataclass(frozen=True)
class KernelReport:
    kernel: str
    kernel_text: str  # the kernel's definition when the job started
    info: str
    hint: str | None = None
    table: str | None = None  # Markdown for the hover (a tuning's configurations)
    label: str | None = None  # the job's label (a demo, recorded outcomes): shown with it
    source: str | None = None  # the diagnostics' source (None: SOURCE), e.g. "cuda-llm verify"


@dataclass(frozen=True)
class Suggestion:
    uri: str
    kernel: str
    original: str  # the kernel's definition when the run started
    suggested: str  # the replacement definition
    speedup: float | None
    baseline_ms: float | None
    best_ms: float | None
    cases_passed: int
    cases_total: int
    message: str
    run_id: int | None = None
    kind: Literal["optimize", "tune"] = "optimize"
    # A tuning's edit reaches outside the kernel (its `#define`s, its spec's lists): `original`
    # is then the text from `lead` characters before the kernel to `trail` characters after it.
    lead: int = 0
    trail: int = 0
    # An optimized kernel's own launch ([launch]): its spec and launch sites are in the same
    # edit; `notes` name the sites left to change by hand.
    launch: str | None = None  # `LaunchConfig.describe()`; None: the original launch
    notes: tuple[str, ...] = ()
    label: str | None = None  # the job's label: a demo's suggestion says so wherever it shows

    @property
    def measured(self) -> str:
        """'2.10× faster, 4/4 cases': for text already labelled (a message, a progress title)."""
        speed = f"{self.speedup:.2f}× faster" if self.speedup else "no speedup figure"
        return f"{speed}, {self.cases_passed}/{self.cases_total} cases"

    @property
    def figures(self) -> str:
        """`measured`, with ', DEMO: recorded, not measured' for a demo's (a title of its own)."""
        label = f", {self.label}" if self.label else ""
        return f"{self.measured}{label}"

    @property
    def done(self) -> str:
        """'optimized' or 'tuned': what the run made of the kernel, for titles."""
        return "tuned" if self.kind == "tune" else "optimized"

    @property
    def run_name(self) -> str:
        return "tuning" if self.kind == "tune" else "optimization"


def suggestion_span(suggestion: Suggestion, text: str, kernel: Kernel) -> Span | None:
    """Where `suggestion.original` is in `text` around `kernel` now, or None when that text
    changed (the suggestion would not fit: Accept refuses)."""
    start = offset_of(text, kernel.span.start) - suggestion.lead
    end = offset_of(text, kernel.span.end) + suggestion.trail
    if start < 0 or text[start:end] != suggestion.original:
        return None
    return Span(point_at(text, start), point_at(text, end))


Reports = dict[tuple[str, str], KernelReport]  # (uri, kernel) -> its last report


def forget_changed(reports: Reports, uri: str, analysis: FileAnalysis) -> None:
    """Drop the reports of kernels whose text differs from what was measured."""
    current = {info.kernel.name: info.kernel.span.slice(analysis.text) for info in analysis.kernels}
    for key, report in list(reports.items()):
        if key[0] == uri and current.get(report.kernel) != report.kernel_text:
            del reports[key]


def diagnostics(
    reports: Reports, uri: str, analysis: FileAnalysis, codec: PositionCodec
) -> list[types.Diagnostic]:
    """The reports of `uri` placed on the kernels' names in the analysed text."""
    lines = split_lines(analysis.text)
    found: list[types.Diagnostic] = []
    for info in analysis.kernels:
        report = reports.get((uri, info.kernel.name))
        if report is None or info.kernel.span.slice(analysis.text) != report.kernel_text:
            continue
        # recorded outcomes, not measurements: every result says so
        prefix = f"[{report.label}] " if report.label else ""
        where = to_range(lines, info.kernel.name_span, codec)
        found.append(
            types.Diagnostic(
                range=where,
                message=prefix + report.info,
                severity=types.DiagnosticSeverity.Information,
                source=report.source or SOURCE,
            )
        )
        if report.hint:
            found.append(
                types.Diagnostic(
                    range=where,
                    message=prefix + report.hint,
                    severity=types.DiagnosticSeverity.Hint,
                    source=report.source or SOURCE,
                )
            )
    return found


def status_text(status: str) -> str:
    """'wrong_output' -> 'wrong output': statuses as words in what users read."""
    return status.replace("_", " ")


def failure_hint(outcomes: Iterable[CandidateOutcome], *, won: bool = False) -> str | None:
    """'Candidates failed: 3 wrong output (case 2: ...); 1 compile error' or None; after a win
    (`won`: a faster correct candidate) 'Kept the fastest correct of 4; 2 others failed: ...',
    so the line under a 1.97× win does not read as a failure."""
    outcomes = list(outcomes)
    failed = [o for o in outcomes if o.status not in ("ok", "slower")]
    if not failed:
        return None
    counts = Counter(o.status for o in failed)
    parts = []
    for status, count in counts.most_common(3):
        example = next(o.message for o in failed if o.status == status)
        example = " ".join(example.split())
        if len(example) > 120:
            example = example[:117] + "..."
        parts.append(f"{count} {status_text(status)}" + (f" ({example})" if example else ""))
    if won:
        others = "1 other" if len(failed) == 1 else f"{len(failed)} others"
        return f"Kept the fastest correct of {len(outcomes)}; {others} failed: " + "; ".join(parts)
    return "Candidates failed: " + "; ".join(parts)


def format_ms(ms: float | None) -> str:
    """A time as the evaluator's reports write it (µs below 0.1 ms), '?' when unknown."""
    return "?" if ms is None else engine_format_ms(ms)


def optimize_summary(
    kernel: str,
    *,
    baseline_ms: float | None,
    best_ms: float | None,
    speedup: float | None,
    cases_passed: int | None,
    cases_total: int | None,
    fraction_of_peak: float | None,
    state: str,
) -> str:
    """'saxpy: baseline 0.120 ms → best 0.061 ms (1.97× faster) · 4/4 cases · 71% of copy peak'."""
    text = f"{kernel}: baseline {format_ms(baseline_ms)}"
    if best_ms is not None:
        text += f" → best {format_ms(best_ms)}"
        if speedup is not None:
            text += f" ({speedup:.2f}× faster)"
    elif state.startswith(("done", "cancelled")):
        text += " · no faster correct candidate"
    else:
        text += " · no faster correct candidate yet"
    if cases_total:
        text += f" · {cases_passed or 0}/{cases_total} cases"
    if fraction_of_peak is not None:
        text += f" · {peak_note(fraction_of_peak)}"
    return f"{text} · {state}"


def wants_suggestion_notification(capabilities: types.ClientCapabilities) -> bool:
    """True when the client shows `cudaLlm/suggestion` itself (the VS Code extension's diff),
    declared as `capabilities.experimental.cudaLlm.suggestionNotification = true`."""
    experimental = getattr(capabilities, "experimental", None)
    return _field(_field(experimental, EXPERIMENTAL), "suggestionNotification") is True


def _field(value: Any, name: str) -> Any:
    """`value[name]` of a JSON object, whether it was left a dict or made an object."""
    if isinstance(value, Mapping):
        return value.get(name)
    return getattr(value, name, None) if value is not None else None


def suggestion_payload(suggestion: Suggestion, where: types.Range | None) -> dict[str, Any]:
    """The `cudaLlm/suggestion` notification's body (for the VS Code extension's diff view);
    `where` is the kernel's range while its text is still the suggestion's original."""
    return {
        "uri": suggestion.uri,
        "kernel": suggestion.kernel,
        "range": (
            {
                "start": {"line": where.start.line, "character": where.start.character},
                "end": {"line": where.end.line, "character": where.end.character},
            }
            if where is not None
            else None
        ),
        "original": suggestion.original,
        "suggested": suggestion.suggested,
        "speedup": suggestion.speedup,
        "baselineMs": suggestion.baseline_ms,
        "bestMs": suggestion.best_ms,
        "casesPassed": suggestion.cases_passed,
        "casesTotal": suggestion.cases_total,
        "message": neutralize(suggestion.message),
        "label": suggestion.label,  # e.g. "DEMO: recorded, not measured": shown with the figures
    }
