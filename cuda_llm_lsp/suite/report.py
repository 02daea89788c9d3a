"""The suite's report: the Markdown table, the fast_p summary, the JSON file and the chart.

Pure (no CUDA): the runner fills `KernelRow`s; this module only formats and writes them.

fast_p follows KernelBench: the share of ALL kernels that are correct AND whose speedup
(baseline ms / optimized ms) exceeds p. Here the baseline is the suite's own first-version
kernel, not a PyTorch reference, so fast_1 is the share the optimizer made faster at all.
"vs vendor" is vendor ms / our best ms: 1.0 means as fast as cuBLAS / cuSPARSE, 0.25 means four
times slower.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from cuda_llm_lsp.redact import redact

FAST_P = (1.0, 2.0, 4.0, 8.0)


@dataclass(frozen=True)
class KernelRow:
    file: str
    kernel: str
    scenario: str
    dtype: str
    status: str  # "ok", an evaluator status, or "spec_error" / "error" / "skipped"
    message: str = ""
    cases_passed: int = 0
    cases_total: int = 0
    baseline_ms: float | None = None
    baseline_spread_pct: float | None = None
    best_ms: float | None = None  # the accepted candidate's, else the baseline's
    speedup: float | None = None  # baseline / best (1.0 when nothing was accepted)
    optimized: bool = False  # the FSR loop ran on this kernel
    accepted: bool = False  # a faster candidate was accepted
    candidates: int = 0
    candidate_statuses: dict[str, int] = field(default_factory=dict)
    launch: str = ""  # the accepted winner's own launch ("grid=... block=... smem=...") or ""
    original_launch: str = ""  # the spec's launch, set when `launch` is
    bytes: int = 0
    flops: float | None = None
    floor_ms: float | None = None
    bound: str | None = None  # "memory" / "compute"
    pct_of_floor_baseline: float | None = None
    pct_of_floor_best: float | None = None
    vendor: str | None = None  # "cuBLAS (torch)", "cuSPARSE (cupy)" ...
    vendor_ms: float | None = None
    vendor_note: str | None = None  # why there is no vendor figure, when there is none
    tuned: bool = False  # its tunables were searched (`suite --tune`)
    tuned_config: str = ""  # the best configuration, "BLOCK=256 ITEMS=4"
    untuned_ms: float | None = None  # the default configuration, measured in the same runs
    tuned_ms: float | None = None
    tuned_speedup: float | None = None  # default / best, interleaved in the same process
    tuned_points: int = 0  # configurations measured
    tuned_spread: float | None = None  # slowest correct configuration / fastest
    tuned_note: str = ""  # why there is no tuned figure, when there is none

    @property
    def correct(self) -> bool:
        """Every case passes (for the baseline and, if accepted, for the winner)."""
        total = self.cases_total
        return self.status == "ok" and total > 0 and self.cases_passed == total

    @property
    def vendor_ratio(self) -> float | None:
        if self.vendor_ms and self.best_ms:
            return self.vendor_ms / self.best_ms
        return None


@dataclass(frozen=True)
class SuiteReport:
    rows: tuple[KernelRow, ...]
    device: str = ""
    command: str = ""
    created: str = ""  # ISO time
    optimize: bool = False
    copy_bandwidth_gbs: float | None = None
    peak_fp32_gflops: float | None = None
    peak_bf16_gflops: float | None = None
    peaks_source: str = ""
    notes: tuple[str, ...] = ()


def fast_p(rows: Sequence[KernelRow], p: float) -> float:
    """KernelBench's fast_p: share of all kernels that are correct and more than p times faster."""
    if not rows:
        return 0.0
    hits = sum(1 for r in rows if r.correct and r.speedup is not None and r.speedup > p)
    return hits / len(rows)


def geomean(values: Iterable[float]) -> float | None:
    vals = [v for v in values if v and v > 0]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def _ms(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:.4f}" if value < 0.1 else f"{value:.3f}" if value < 10 else f"{value:.1f}"


def _x(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}×"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.0f}%"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def candidates_cell(row: KernelRow) -> str:
    """ "3: 1 ok, 2 wrong_output" (what the FSR loop tried), or "–" when it did not run."""
    if not row.optimized:
        return "–"
    detail = ", ".join(f"{n} {s}" for s, n in sorted(row.candidate_statuses.items()))
    return f"{row.candidates}: {detail}" if detail else str(row.candidates)


def markdown_table(rows: Sequence[KernelRow], optimize: bool = False) -> str:
    header = (
        "| kernel | scenario | dtype | baseline ms | best ms | speedup | correct | "
        "% of floor (base → best) | bound | vs vendor |"
        + (" FSR candidates |" if optimize else "")
        + "\n|---|---|---|---:|---:|---:|:---:|---:|---|---:|"
        + ("---|" if optimize else "")
        + "\n"
    )
    lines = []
    for r in rows:
        correct = (
            f"✓ {r.cases_passed}/{r.cases_total}"
            if r.correct
            else (f"✗ {r.status}" + (f" {r.cases_passed}/{r.cases_total}" if r.cases_total else ""))
        )
        floor = (
            f"{_pct(r.pct_of_floor_baseline)} → {_pct(r.pct_of_floor_best)}"
            if r.accepted
            else _pct(r.pct_of_floor_baseline)
        )
        vendor = (
            f"{r.vendor_ratio:.2f} ({r.vendor} {_ms(r.vendor_ms)} ms)"
            if r.vendor_ratio is not None
            else ("n/a¹" if r.vendor_note else "–")
        )
        lines.append(
            "| "
            + " | ".join(
                _cell(c)
                for c in (
                    f"`{r.kernel}`",
                    r.scenario,
                    r.dtype,
                    _ms(r.baseline_ms),
                    _ms(r.best_ms),
                    _x(r.speedup),
                    correct,
                    floor,
                    r.bound or "–",
                    vendor,
                    *((candidates_cell(r),) if optimize else ()),
                )
            )
            + " |"
        )
    return header + "\n".join(lines) + "\n"


def tuning_table(rows: Sequence[KernelRow]) -> str:
    """Tuned against untuned, for the kernels whose tunables were searched."""
    lines = [
        "| kernel | untuned ms | tuned ms | tuned / untuned | best configuration | "
        "configurations | spread |",
        "|---|---:|---:|---:|---|---:|---:|",
    ]
    for r in rows:
        if not r.tuned:
            continue
        config = _cell(r.tuned_config or r.tuned_note or "-")
        lines.append(
            f"| {_cell(r.kernel)} | {_ms(r.untuned_ms)} | {_ms(r.tuned_ms)} | "
            f"{_x(r.tuned_speedup)} | {config} | {r.tuned_points} | "
            f"{_x(r.tuned_spread)} |"
        )
    return "\n".join(lines) + "\n"


def launch_table(rows: Sequence[KernelRow]) -> str:
    """The spec's launch against the winner's own, for winners that changed it."""
    lines = ["| kernel | spec's launch | winner's launch |", "|---|---|---|"]
    lines += [
        f"| `{_cell(r.kernel)}` | `{_cell(r.original_launch)}` | `{_cell(r.launch)}` |"
        for r in rows
    ]
    return "\n".join(lines) + "\n"


def fast_p_table(rows: Sequence[KernelRow]) -> str:
    head = "| " + " | ".join(f"fast_{p:g}" for p in FAST_P) + " |\n"
    rule = "|" + "---:|" * len(FAST_P) + "\n"
    body = "| " + " | ".join(f"{fast_p(rows, p):.2f}" for p in FAST_P) + " |\n"
    return head + rule + body


def markdown(report: SuiteReport, chart_name: str | None = "chart.png") -> str:
    rows = report.rows
    correct = sum(1 for r in rows if r.correct)
    accepted = [r for r in rows if r.accepted]
    parts = [
        "# Kernel suite report\n",
        f"- device: {report.device or 'unknown'}",
        f"- command: `{report.command}`" if report.command else "",
        f"- created: {report.created}" if report.created else "",
        f"- kernels: {len(rows)}; baselines correct: {correct}/{len(rows)}"
        + (
            f"; optimized: {sum(1 for r in rows if r.optimized)}, accepted: {len(accepted)}"
            if report.optimize
            else ""
        ),
        f"- copy bandwidth (measured): {report.copy_bandwidth_gbs:.0f} GB/s"
        if report.copy_bandwidth_gbs
        else "- copy bandwidth: not measured",
        "- peaks (measured"
        + (f", {report.peaks_source}" if report.peaks_source else "")
        + f"): FP32 {_gflops(report.peak_fp32_gflops)}, BF16 {_gflops(report.peak_bf16_gflops)}",
        "",
        "## Kernels\n",
        markdown_table(rows, report.optimize),
        "Speedup = baseline ms / best ms (both measured in the same run). % of floor = floor ms /"
        " measured ms, floor = max(bytes / copy bandwidth, flops / peak). vs vendor = vendor ms /"
        " best ms (1.0: as fast as the library).\n",
        "## fast_p\n",
        "Share of all kernels that are correct and more than p× faster than their first-version"
        " baseline (KernelBench's fast_p; the baseline here is our own plain kernel).\n",
        fast_p_table(rows),
    ]
    if any(r.tuned for r in rows):
        parts += [
            "## Tuned against untuned\n",
            "Kernels whose spec declares tunables (`tune.NAME`), searched by `cuda-llm tune`'s"
            " strategy; tuned / untuned = the default configuration's ms / the best's, both"
            " measured in the same interleaved runs; spread = slowest correct configuration / the"
            " fastest.\n",
            tuning_table(rows),
        ]
    relaunched = [r for r in accepted if r.launch]
    if relaunched:
        parts += [
            "## Winners with their own launch\n",
            "These winners carry a `@cuda-llm launch` block (run with `--launch free`, or `auto`"
            " where every launch site can be rewritten) and were judged with that launch; the"
            " oracle ran with the spec's.\n",
            launch_table(relaunched),
        ]
    geo = geomean(r.speedup for r in accepted if r.speedup)
    if report.optimize:
        parts.append(f"Geometric mean speedup of accepted kernels: {_x(geo)}\n")
    if chart_name:
        parts.append(f"## Chart\n\n![speedup and % of floor per kernel]({chart_name})\n")
    failing = [r for r in rows if not r.correct]
    if failing:
        parts.append("## Problems\n")
        parts.extend(
            f"- `{r.kernel}` ({r.file}): {r.status}: {_cell(r.message)[:400]}" for r in failing
        )
        parts.append("")
    vendor_notes: dict[str, list[str]] = {}
    for r in rows:
        if r.vendor_note and r.vendor_ms is None:
            vendor_notes.setdefault(r.vendor_note, []).append(r.kernel)
    if report.notes or vendor_notes:
        parts.append("## Notes\n")
        parts.extend(f"- {n}" for n in report.notes)
        parts.extend(
            f"- ¹ no vendor timing for {', '.join(ks)}: {_cell(note)}"
            for note, ks in vendor_notes.items()
        )
        parts.append("")
    return "\n".join(p for p in parts if p is not None) + "\n"


def _gflops(value: float | None) -> str:
    return "not measured" if not value else f"{value / 1000:.1f} TFLOP/s"


def to_json(report: SuiteReport) -> dict[str, Any]:
    """The report as JSON data; NaN and infinity (JSON has neither) become null."""
    rows = []
    for r in report.rows:
        d = asdict(r)
        d["correct"] = r.correct
        d["vendor_ratio"] = r.vendor_ratio
        rows.append(d)
    head = {k: v for k, v in asdict(report).items() if k != "rows"}
    head["notes"] = list(report.notes)
    data = {
        **head,
        "fast_p": {f"fast_{p:g}": fast_p(report.rows, p) for p in FAST_P},
        "kernels": rows,
    }
    finite: dict[str, Any] = _finite(data)
    return finite


def write_chart(report: SuiteReport, path: Path) -> Path:
    """Two bar panels per kernel: speedup (log scale) and % of floor (baseline and best)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = list(report.rows)
    names = [r.kernel for r in rows] or ["(none)"]
    xs = list(range(len(names)))
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(max(8.0, 0.45 * len(names) + 2), 8), sharex=True)
    speed = [
        r.speedup if r.speedup and r.correct and math.isfinite(r.speedup) else 0.0 for r in rows
    ] or [0.0]
    colors = ["tab:green" if r.accepted else "tab:gray" for r in rows] or ["tab:gray"]
    bars = ax1.bar(xs, speed, color=colors)
    ax1.axhline(1.0, color="black", linewidth=0.8)
    if max(speed) > 10:
        ax1.set_yscale("log")
    for bar, value in zip(bars, speed, strict=True):
        if value > 0:
            ax1.annotate(
                f"{value:.2f}×",
                (bar.get_x() + bar.get_width() / 2, value),
                ha="center",
                va="bottom",
                fontsize=7,
            )
    ax1.set_ylabel("speedup (baseline / best)\ngreen: accepted candidate")
    ax1.set_title(f"Kernel suite on {report.device or 'GPU'}")
    width = 0.4
    base = [r.pct_of_floor_baseline or 0.0 for r in rows] or [0.0]
    best = [r.pct_of_floor_best or 0.0 for r in rows] or [0.0]
    ax2.bar([x - width / 2 for x in xs], base, width, label="baseline", color="tab:blue")
    ax2.bar([x + width / 2 for x in xs], best, width, label="best", color="tab:orange")
    ax2.axhline(100.0, color="black", linewidth=0.8, linestyle="--")
    ax2.set_ylabel("% of hardware floor")
    ax2.legend(loc="upper right")
    ax2.set_xticks(xs)
    ax2.set_xticklabels(names, rotation=70, ha="right", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_report(report: SuiteReport, out_dir: Path) -> dict[str, Path]:
    """report.md, report.json and chart.png under `out_dir`; returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    chart: Path | None = out_dir / "chart.png"
    try:
        assert chart is not None
        write_chart(report, chart)
        paths["chart"] = chart
    except Exception as exc:  # a missing matplotlib must not lose the table
        chart = None
        note = f"chart not written: {type(exc).__name__}: {exc}"
        report = replace(report, notes=(*report.notes, note))
    md = out_dir / "report.md"
    md.write_text(redact(markdown(report, chart.name if chart else None)), encoding="utf-8")
    paths["markdown"] = md
    js = out_dir / "report.json"
    text = json.dumps(to_json(report), indent=2, allow_nan=False, default=str)
    js.write_text(redact(text) + "\n", encoding="utf-8")
    paths["json"] = js
    return paths


def _finite(value: Any) -> Any:
    """JSON has no NaN or infinity: those become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value
