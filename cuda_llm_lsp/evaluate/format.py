"""One-line summaries of evaluation results, shared by the CLI, the language server and reports.

`transpose: 0.311 ms ±0.4% · 215 GB/s (7% of copy peak) · 4/4 cases pass`
"""

from __future__ import annotations

from cuda_llm_lsp.evaluate.types import EvalResult, Timing


def format_ms(ms: float) -> str:
    if ms >= 100:
        return f"{ms:.0f} ms"
    if ms >= 10:
        return f"{ms:.1f} ms"
    if ms >= 0.1:
        return f"{ms:.3f} ms"
    return f"{ms * 1000:.1f} µs"


def format_timing(t: Timing) -> str:
    return f"{format_ms(t.median_ms)} ±{t.spread_pct:.1f}%"


# Why a kernel can seem to move more bytes per second than the measured device-to-device copy,
# although L2 is flushed before every timed launch: the figure divides the bytes the spec's roles
# count by the time, and not all of them are DRAM traffic. Writes can still sit in L2 when the
# kernel ends (written back after the timed region), and a buffer may be only partly read.
ABOVE_PEAK_REASON = (
    "above it: not all counted bytes reached DRAM (writes still in L2 at the kernel's end, "
    "or buffers only partly read)"
)


def peak_note(fraction: float, peak_name: str = "copy peak") -> str:
    """'71% of copy peak', with the reason when the figure is above the peak."""
    text = f"{fraction * 100:.0f}% of {peak_name}"
    return f"{text}, {ABOVE_PEAK_REASON}" if fraction > 1.0 else text


def summary_line(kernel_name: str, result: EvalResult) -> str:
    """The result in one line: latency, bandwidth against the copy peak, cases passed.

    For `evaluate` results the candidate's figures are shown with its speedup; a failure shows
    its status and the first line of its message instead of the figures.
    """
    total = len(result.cases)
    passed = result.cases_passed
    cases = f"{passed}/{total} cases pass" if total else ""
    timing = result.timing
    parts: list[str] = []
    if timing is not None and result.status == "ok":
        parts.append(format_timing(timing))
        if result.bandwidth_gbs is not None:
            bw = f"{result.bandwidth_gbs:.0f} GB/s"
            if result.fraction_of_peak is not None:
                bw += f" ({peak_note(result.fraction_of_peak)})"
            parts.append(bw)
        if result.speedup is not None:
            parts.append(f"{result.speedup:.2f}x vs original")
        if cases:
            parts.append(cases)
        return f"{kernel_name}: " + " · ".join(parts)
    # a failure: evaluation stops at the first failing case, so no "n/m cases" count
    first = result.message.splitlines()[0] if result.message else ""
    parts.append(result.status + (f": {first}" if first else ""))
    return f"{kernel_name}: " + " · ".join(parts)
