"""Judge attacks end to end: `cuda-llm optimize` against a scripted endpoint serving adversaries.

Four originals in `benchmarks/adversarial/` (a naive transpose, a naive matmul, a
one-thread-per-row softmax, an L2 row normalisation with an epsilon), and per original a folder of
candidates, each a `.cu` file whose header says what it is and which statuses fit it:

    // expect: wrong_output/nondeterministic/honest
    // why: what it tries
    // nvrtc: refused        (only for candidates refused before anything compiles them)

`honest` means "genuinely correct, so it may be accepted (`ok`/`slower`), but only at its real
speed". Honest candidates (`expect: ok`: a tiled 32 x 32 transpose, a 16 x 16 tiled matmul, a
warp-per-row softmax, all with the original's launch) must be accepted. For each original the
scripted OpenAI-compatible server on 127.0.0.1 serves every candidate in one round, and

    python -m cuda_llm_lsp.cli optimize <original> --kernel K --rounds 1 --candidates N \\
        --format json --model scripted --seed S --base-url <scripted>

judges them. Every candidate the loop accepts as correct (`ok`/`slower`) is then measured
independently with CuPy (`cupy.RawModule` on the same source, the spec's timed sizes, original and
candidate interleaved, three input sets in rotation, a GPU-side 1.5 ms pause and a memset of twice
the L2 before every launch, CUDA events, median of 60 launches): its loop speedup must be within
5 % of the independent one (the winner's: the loop's final speedup). A table: candidate, expected,
got, loop and independent speedups, PASS/FAIL; exit 1 on any FAIL.

    python benchmarks/adversarial_optimize.py [--out summary.json] [--budget S]     # on the GPU
    python benchmarks/adversarial_optimize.py --evaluator recorded:FILE             # CPU plumbing

With `--evaluator recorded:...` nothing runs on a GPU: the statuses come from the recording (real
NVRTC and the real candidate policy still decide compile errors) and the CuPy step is skipped.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.optimize_harness import (  # noqa: E402
    Buffer,
    IndependentTimer,
    Launch,
    fmt,
    loop_speedup,
    run_optimize,
)

HERE = ROOT / "benchmarks" / "adversarial"
ACCEPTED = ("ok", "slower")
AGREEMENT = 0.05  # loop speedup vs independent speedup
RUN_CAP_S = 300.0  # one optimize run longer than this is a failure (a hang), whatever the budget
MIN_RUN_S = 45.0  # an original is not started with less of the budget left


def cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


@dataclass(frozen=True)
class Target:
    """An original: where it is, and how the independent timer launches it at the timed case
    (written out here, not taken from the project's spec code, so a bug there cannot hide)."""

    kernel: str
    sizes: dict[str, int]
    grid: Callable[[dict[str, int]], tuple[int, ...]]
    block: tuple[int, ...]
    buffers: tuple[tuple[str, str, str], ...]  # (name, role "in"/"out", "a*b": a count)
    scalars: tuple[str, ...]  # size names passed as int32, in parameter order after buffers
    init: str = "uniform"  # or "normal4": normal(0, 4)
    order: tuple[str, ...] = ()  # parameter order (buffers and scalars by name)

    @property
    def file(self) -> Path:
        return HERE / f"{self.kernel}.cu"


TARGETS: dict[str, Target] = {
    "transpose": Target(
        "transpose", {"rows": 4096, "cols": 4096},
        lambda s: (cdiv(s["cols"], 32), cdiv(s["rows"], 32)), (32, 8),
        (("in", "in", "rows*cols"), ("out", "out", "rows*cols")), ("rows", "cols"),
        order=("in", "out", "rows", "cols"),
    ),
    "matmul": Target(
        "matmul", {"n": 1024}, lambda s: (cdiv(s["n"], 16), cdiv(s["n"], 16)), (16, 16),
        (("A", "in", "n*n"), ("B", "in", "n*n"), ("C", "out", "n*n")), ("n",),
        order=("A", "B", "C", "n"),
    ),
    "softmax": Target(
        "softmax", {"rows": 4096, "cols": 1024}, lambda s: (cdiv(s["rows"], 128),), (128,),
        (("x", "in", "rows*cols"), ("y", "out", "rows*cols")), ("rows", "cols"),
        init="normal4", order=("x", "y", "rows", "cols"),
    ),
    "rownorm": Target(
        "rownorm", {"rows": 8192, "cols": 512}, lambda s: (s["rows"],), (32,),
        (("x", "in", "rows*cols"), ("y", "out", "rows*cols")), ("rows", "cols"),
        order=("x", "y", "rows", "cols"),
    ),
}  # fmt: skip


@dataclass(frozen=True)
class Candidate:
    target: str
    name: str  # the file's stem
    text: str  # the reply's kernel (with a marker line first)
    expect: tuple[str, ...]  # fitting statuses; "honest": ok/slower at its real speed
    why: str
    compiles: bool  # False: refused before NVRTC sees it

    @property
    def marker(self) -> str:
        return f"// adversarial: {self.target}/{self.name}"

    @property
    def must_win(self) -> bool:
        return self.expect == ("ok",)


def load_candidates(target: str) -> list[Candidate]:
    """The candidates of one original, in file order."""
    out = []
    for path in sorted((HERE / target).glob("*.cu")):
        text = path.read_text(encoding="utf-8")
        header = dict(re.findall(r"^// (expect|why|nvrtc): (.*)$", text, flags=re.M))
        if "expect" not in header:
            raise SystemExit(f"{path}: no '// expect:' line")
        marker = f"// adversarial: {target}/{path.stem}\n"
        out.append(
            Candidate(
                target,
                path.stem,
                marker + text,
                tuple(header["expect"].split("/")),
                header.get("why", ""),
                header.get("nvrtc") != "refused",
            )
        )
    return out


@dataclass
class Row:
    candidate: Candidate
    got: str | None = None
    message: str = ""
    loop_speedup: float | None = None
    independent: float | None = None
    verdict: str = "FAIL"
    note: str = ""
    winner: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def optimize(
    target: Target, cands: list[Candidate], work: Path, evaluator: str | None, timeout: float
) -> dict[str, Any]:
    """One `cuda-llm optimize` run over every candidate of `target` (one round)."""
    path = work / target.file.name
    path.write_text(target.file.read_text(encoding="utf-8"), encoding="utf-8")
    replies = [(c.name, c.text) for c in cands]
    return run_optimize(path, target.kernel, replies, work, evaluator, timeout)


def independent_speedup(
    timer: IndependentTimer, target: Target, original: str, candidate: str
) -> tuple[float, float, float]:
    """CuPy's measurement of `candidate` against `original`, both with the target's launch."""
    sizes = target.sizes
    launch = Launch(target.grid(sizes), target.block)
    std = 4.0 if target.init == "normal4" else None
    buffers = [
        Buffer(name, math.prod(sizes[part] for part in count.split("*")), role == "out", std)
        for name, role, count in target.buffers
    ]
    return timer.speedup(
        target.kernel, (original, candidate), (launch, launch), buffers, target.order, sizes
    )


def judge_rows(
    target: Target, cands: list[Candidate], result: dict[str, Any], timer: IndependentTimer | None
) -> list[Row]:
    """One row per candidate: its status against the fitting ones, and for accepted ones the
    loop's speedup against the independent measurement."""
    rows = [Row(c) for c in cands]
    if "error" in result and "candidates" not in result:
        for row in rows:
            row.note = result["error"][:300]
        return rows
    got = {c["index"]: c for c in result.get("candidates", [])}
    best = result.get("best_source") or ""
    original = target.file.read_text(encoding="utf-8")
    for i, row in enumerate(rows, 1):
        c = row.candidate
        outcome = got.get(i)
        if outcome is None:
            row.note = "not judged"
            continue
        row.got, row.message = outcome["status"], outcome.get("message") or ""
        row.winner = bool(result.get("accepted")) and c.marker in best
        fits = row.got in c.expect or ("honest" in c.expect and row.got in ACCEPTED)
        if c.must_win:
            fits = row.got == "ok"
        if not fits:
            row.note = f"status {row.got} does not fit"
            continue
        if row.got not in ACCEPTED:
            row.verdict = "PASS"
            continue
        row.loop_speedup = (
            float(result["speedup"])
            if row.winner and result.get("speedup")
            else loop_speedup(outcome, result.get("baseline_ms"))
        )
        if timer is None:
            row.verdict, row.note = "PASS", "independent timing skipped (no GPU)"
            continue
        try:
            base, cand, row.independent = independent_speedup(timer, target, original, c.text)
        except Exception as exc:  # reported in the table, the run goes on
            row.note = f"independent timing failed: {type(exc).__name__}: {exc}"[:300]
            continue
        row.extra = {"cupy_original_ms": round(base, 4), "cupy_candidate_ms": round(cand, 4)}
        if row.loop_speedup is None:
            row.note = "the loop reported no speedup"
            continue
        off = row.loop_speedup / row.independent - 1
        row.extra["disagreement_pct"] = round(100 * off, 2)
        row.verdict = "PASS" if abs(off) <= AGREEMENT else "FAIL"
        row.note = f"loop vs independent {100 * off:+.1f} %"
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--targets", default=",".join(TARGETS), help="comma-separated originals")
    parser.add_argument("--evaluator", help="recorded:FILE for a CPU run of the plumbing")
    parser.add_argument(
        "--budget",
        type=float,
        default=540.0,
        help="seconds for the whole run: originals not started by then are listed as not run",
    )
    parser.add_argument("--out", type=Path, help="also write the summary JSON here")
    args = parser.parse_args(argv)
    started = time.monotonic()
    timer = None
    if not args.evaluator:
        try:
            timer = IndependentTimer()
        except Exception as exc:  # no CuPy or no GPU: say so, judge the rest
            print(
                f"independent timer unavailable ({type(exc).__name__}: {exc}); accepted "
                "candidates cannot be checked and FAIL"
            )
    rows: list[Row] = []
    skipped: list[str] = []
    runs: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="adversarial-") as tmp:
        for name in args.targets.split(","):
            target = TARGETS[name]
            cands = load_candidates(name)
            left = args.budget - (time.monotonic() - started)
            if left < MIN_RUN_S:
                skipped.append(name)
                continue
            result = optimize(target, cands, Path(tmp), args.evaluator, min(left, RUN_CAP_S))
            if result.get("timed_out") and left < RUN_CAP_S:  # the budget ended it, not a hang
                skipped.append(f"{name} (cut off by the budget)")
                continue
            keys = ("baseline_ms", "best_ms", "speedup", "accepted", "wall_s", "error")
            runs[name] = {k: result.get(k) for k in keys}
            if timer is None and not args.evaluator:
                result.setdefault("error", "no independent timer")
            target_rows = judge_rows(target, cands, result, timer if not args.evaluator else None)
            if timer is None and not args.evaluator:
                for row in target_rows:
                    if row.got in ACCEPTED:
                        row.verdict, row.note = "FAIL", "no independent timer (CuPy)"
            rows.extend(target_rows)
    print("\n| candidate | expected | got | loop | independent | verdict | note |")
    print("|---|---|---|---:|---:|---|---|")
    for row in rows:
        c = row.candidate
        win = " (winner)" if row.winner else ""
        print(
            f"| {c.target}/{c.name}{win} | {'/'.join(c.expect)} | {row.got} | "
            f"{fmt(row.loop_speedup)} | {fmt(row.independent)} | {row.verdict} | "
            f"{row.note or row.message[:90]} |"
        )
    for name, run in runs.items():
        print(
            f"{name}: baseline {run['baseline_ms']} ms, best {run['best_ms']} ms, "
            f"speedup {run['speedup']}, accepted {run['accepted']}, {run['wall_s']} s"
            + (f", error: {run['error'][:200]}" if run.get("error") else "")
        )
    if skipped:
        print(f"not run (budget of {args.budget:g} s spent): {', '.join(skipped)}")
    failed = [r for r in rows if r.verdict != "PASS"]
    if args.out:
        args.out.write_text(
            json.dumps(
                {
                    "runs": runs,
                    "skipped": skipped,
                    "wall_s": round(time.monotonic() - started, 1),
                    "rows": [
                        {
                            "candidate": f"{r.candidate.target}/{r.candidate.name}",
                            "expected": list(r.candidate.expect),
                            "got": r.got,
                            "message": r.message,
                            "winner": r.winner,
                            "loop_speedup": r.loop_speedup,
                            "independent_speedup": r.independent,
                            "verdict": r.verdict,
                            "note": r.note,
                            **r.extra,
                        }
                        for r in rows
                    ],
                },
                indent=2,
            )
            + "\n"
        )
    print(f"\n{len(rows) - len(failed)}/{len(rows)} PASS in {time.monotonic() - started:.0f} s")
    partial = f" (partial: {len(skipped)} original(s) not run)" if skipped else ""
    print(("PASS" if not failed and rows else "FAIL") + partial)
    return 0 if not failed and rows else 1


if __name__ == "__main__":
    sys.exit(main())
