"""`cuda-llm history [FILE]`: the recorded optimization runs, newest first (all, or one file's).

Text: a table (id, when, kernel, baseline, best, speedup, outcome, decision); `--format json`:
`{"runs": [...]}` with every recorded field; `--run ID` adds that run's candidates and the
top lines Nsight Compute found in the original and the best (`profile_lines`, issue [profile]).
Exit codes: 0 listed (possibly none), 1 the history cannot be read.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from cuda_llm_lsp.engine import open_history


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", nargs="?", type=Path, metavar="FILE", help="only runs of FILE")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--limit", type=int, default=50, help="at most this many runs (50)")
    parser.add_argument("--run", type=int, metavar="ID", help="show one run with its candidates")


def _ms(value: float | None) -> str:
    return f"{value:.4f}" if value is not None else "-"


def run(args: argparse.Namespace) -> int:
    try:
        history = open_history()
        if args.run is not None:
            one = history.run(args.run, args.file)
            runs = [one] if one is not None else []
        else:
            runs = history.runs(args.file, limit=args.limit)
    except Exception as exc:
        print(f"cuda-llm history: cannot read the history: {exc}", file=sys.stderr)
        return 1
    if args.run is not None and not runs:
        print(f"cuda-llm history: no run {args.run}", file=sys.stderr)
        return 1
    if args.format == "json":
        listed = []
        for record in runs:
            item = record.to_json()
            if args.run is not None:
                item["candidate_list"] = [
                    {
                        "round": c.round,
                        "index": c.index,
                        "status": c.status,
                        "ms": c.ms,
                        "speedup": c.speedup,
                        "message": c.message,
                        "tokens": c.tokens,
                        "source": c.source,
                        "launch": c.launch,
                        "tuning": c.tuning,
                        "reply_hash": c.reply_hash,
                    }
                    for c in history.candidates(record.id)
                ]
                item["profile_lines"] = history.profile_lines(record.id)
            listed.append(item)
        print(json.dumps({"runs": listed}, indent=2))
        return 0
    if not runs:
        where = f" for {args.file}" if args.file else ""
        print(f"no recorded runs{where} (history: {history.path})")
        return 0
    print(
        f"{'id':>4}  {'started':16}  {'kernel':18} {'base ms':>9} {'best ms':>9} "
        f"{'speedup':>7}  {'decision':8}  outcome"
    )
    for r in runs:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r.started))
        speedup = f"{r.speedup:.2f}x" if r.speedup is not None and r.accepted else "-"
        outcome = (r.outcome or ("running" if r.finished is None else "")).splitlines()
        print(
            f"{r.id:>4}  {when:16}  {r.kernel[:18]:18} {_ms(r.baseline_ms):>9} "
            f"{_ms(r.best_ms if r.accepted else None):>9} {speedup:>7}  "
            f"{r.decision or '-':8}  {(outcome[0] if outcome else '')[:80]}"
        )
    if args.run is not None:
        print()
        for c in history.candidates(args.run):
            figure = f"{c.ms:.4f} ms" if c.ms is not None else ""
            first = c.message.strip().splitlines()[0][:100] if c.message.strip() else ""
            print(f"  {c.round}.{c.index}  {c.status:18} {figure:>12}  {first}")
    return 0
