"""What Profile K leaves for a kernel, and its LSP forms: diagnostics from source
`cuda-llm profile` (never mixed with compile diagnostics or job reports) and hover text.

Each finding becomes a diagnostic on its line (Information for a problem kind, Hint for a line
that is only a stall hotspot); a finding in an included user header sits on that `#include`
line, its message naming the header's line; the kernel summary sits on the kernel's name. A
profile remembers the kernel text it measured: once that text changes, the profile is dropped
and its diagnostics go with the next publish. Plain data and pure functions, like `results`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

from cuda_llm_lsp.engine import demo_label
from cuda_llm_lsp.engine.analysis import FileAnalysis
from cuda_llm_lsp.engine.outcomes import LineProfile
from cuda_llm_lsp.lsp.positions import split_lines, to_range
from cuda_llm_lsp.source.text import Point, Span

SOURCE = "cuda-llm profile"
PROBLEM_KINDS = ("uncoalesced", "bank_conflict", "divergent_branch", "local_memory")


@dataclass(frozen=True)
class ProfileReport:
    kernel: str
    kernel_text: str  # the kernel's definition that was profiled
    profile: LineProfile


Profiles = dict[tuple[str, str], ProfileReport]  # (uri, kernel) -> its last profile


def forget_changed(profiles: Profiles, uri: str, analysis: FileAnalysis) -> None:
    """Drop the profiles of kernels whose text differs from what was profiled (stale)."""
    current = {info.kernel.name: info.kernel.span.slice(analysis.text) for info in analysis.kernels}
    for key, report in list(profiles.items()):
        if key[0] == uri and current.get(report.kernel) != report.kernel_text:
            del profiles[key]


def diagnostics(
    profiles: Profiles, uri: str, analysis: FileAnalysis, codec: PositionCodec
) -> list[types.Diagnostic]:
    """The profiles of `uri`'s kernels whose text is still the profiled one, as diagnostics."""
    lines = split_lines(analysis.text)
    found: list[types.Diagnostic] = []
    label = demo_label()
    prefix = f"[{label}] " if label else ""
    for info in analysis.kernels:
        report = profiles.get((uri, info.kernel.name))
        if report is None or info.kernel.span.slice(analysis.text) != report.kernel_text:
            continue
        result = report.profile
        found.append(
            types.Diagnostic(
                range=to_range(lines, info.kernel.name_span, codec),
                message=f"{prefix}{result.kernel} profile on {result.device}: "
                f"{result.summary.line()}",
                severity=types.DiagnosticSeverity.Information,
                source=SOURCE,
                code="summary",
            )
        )
        for item in result.lines:
            row = item.anchor
            if row is None or not 0 <= row < len(lines):
                continue
            text = lines[row]
            start = len(text) - len(text.lstrip())
            span = Span(Point(row, start), Point(row, len(text.rstrip())))
            where = f"{Path(item.file).name}:{item.line}: " if item.header else ""
            problem = any(k in PROBLEM_KINDS for k in item.kinds)
            found.append(
                types.Diagnostic(
                    range=to_range(lines, span, codec),
                    message=f"{prefix}{where}{item.message}",
                    severity=(
                        types.DiagnosticSeverity.Information
                        if problem
                        else types.DiagnosticSeverity.Hint
                    ),
                    source=SOURCE,
                    code=",".join(item.kinds),
                )
            )
    return found


def hover(report: ProfileReport, row: int) -> str | None:
    """Markdown with the figures of the findings shown on 0-based line `row`, or None."""
    items = [f for f in report.profile.lines if f.anchor == row]
    if not items:
        return None
    parts = []
    for item in items:
        head = f"**{report.kernel} profile** · `{Path(item.file).name}:{item.line}` · "
        head += ", ".join(item.kinds) + f" · {item.stall_share:.0%} of warp-stall samples"
        rows = "\n".join(f"| {name} | {_figure(value)} |" for name, value in item.metrics.items())
        parts.append(f"{head}\n\n{item.message}\n\n| metric | value |\n|---|---|\n{rows}")
    return "\n\n---\n\n".join(parts)


def summary_hover(report: ProfileReport) -> str:
    """Markdown of the kernel summary, for the hover on the kernel's name."""
    s = report.profile.summary
    rows = [
        ("device", report.profile.device),
        ("duration", f"{s.duration_us:.1f} µs" if s.duration_us is not None else "?"),
        ("achieved occupancy", _pct(s.achieved_occupancy_pct, "")),
        ("theoretical occupancy", _pct(s.theoretical_occupancy_pct, "")),
        ("occupancy limiter", s.occupancy_limiter or "?"),
        ("SM throughput", _pct(s.sm_throughput_pct)),
        ("DRAM throughput", _pct(s.dram_throughput_pct)),
        (
            "roofline",
            s.bound
            + (f", {s.arithmetic_intensity:.2f} FLOP/byte" if s.arithmetic_intensity else ""),
        ),
    ]
    table = "\n".join(f"| {k} | {v} |" for k, v in rows)
    return f"**Profile** (Nsight Compute)\n\n| | |\n|---|---|\n{table}"


def _pct(value: float | None, of: str = " of peak") -> str:
    return "?" if value is None else f"{value:.1f}%{of}"


def _figure(value: float | str) -> str:
    if isinstance(value, str):
        return value
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:.4g}"
