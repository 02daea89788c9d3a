"""Job results as diagnostics (source `cuda-llm`) on a kernel's name.

An Information diagnostic carries the figures (baseline and best latency, speedup, cases passed,
distance to the copy-bandwidth peak, or a benchmark's summary line); a Hint names the main
reasons candidates failed. Each report remembers the kernel text it was measured on and is
dropped as soon as that text changes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from cuda_llm_lsp.evaluate import format as evaluate_format
from cuda_llm_lsp.lsp.positions import split_lines, to_range

if TYPE_CHECKING:
    from cuda_llm_lsp.fsr.types import CandidateOutcome
    from cuda_llm_lsp.lsp.server import CudaLlmServer

SOURCE = "cuda-llm"


@dataclass(frozen=True)
class KernelReport:
    kernel: str
    kernel_text: str  # the kernel's definition when the job started
    info: str
    hint: str | None = None


def set_report(server: CudaLlmServer, uri: str, report: KernelReport) -> None:
    from cuda_llm_lsp.lsp.diagnostics import publish

    server.reports[(uri, report.kernel)] = report
    publish(server, uri)


def clear_report(server: CudaLlmServer, uri: str, kernel: str) -> None:
    from cuda_llm_lsp.lsp.diagnostics import publish

    if server.reports.pop((uri, kernel), None) is not None:
        publish(server, uri)


def forget_changed(server: CudaLlmServer, uri: str, analysis: Any) -> None:
    """Drop the reports of kernels whose text differs from what was measured."""
    current = {info.kernel.name: info.kernel.span.slice(analysis.text) for info in analysis.kernels}
    for key, report in list(server.reports.items()):
        if key[0] == uri and current.get(report.kernel) != report.kernel_text:
            del server.reports[key]


def diagnostics(server: CudaLlmServer, uri: str, analysis: Any) -> list[types.Diagnostic]:
    """The reports of `uri` placed on the kernels' names in the analysed text."""
    lines = split_lines(analysis.text)
    found: list[types.Diagnostic] = []
    for info in analysis.kernels:
        report = server.reports.get((uri, info.kernel.name))
        if report is None or info.kernel.span.slice(analysis.text) != report.kernel_text:
            continue
        where = to_range(lines, info.kernel.name_span, server.codec)
        found.append(
            types.Diagnostic(
                range=where,
                message=report.info,
                severity=types.DiagnosticSeverity.Information,
                source=SOURCE,
            )
        )
        if report.hint:
            found.append(
                types.Diagnostic(
                    range=where,
                    message=report.hint,
                    severity=types.DiagnosticSeverity.Hint,
                    source=SOURCE,
                )
            )
    return found


def status_text(status: str) -> str:
    """'wrong_output' -> 'wrong output': statuses as words in what users read."""
    return status.replace("_", " ")


def failure_hint(outcomes: Iterable[CandidateOutcome]) -> str | None:
    """'Candidates failed: 3 wrong output (case 2: ...); 1 compile error' or None."""
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
    return "Candidates failed: " + "; ".join(parts)


def format_ms(ms: float | None) -> str:
    """A time as the evaluator's reports write it (µs below 0.1 ms), '?' when unknown."""
    return "?" if ms is None else evaluate_format.format_ms(ms)


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
        text += f" · {fraction_of_peak * 100:.0f}% of copy peak"
    return f"{text} · {state}"
