"""Candidates with their own launch, end to end: `cuda-llm optimize --launch auto --write` on
whole CUDA programs, the written program built with nvcc and run (issue [launch], H100 acceptance).

Three originals in `benchmarks/launch/`, each a whole program: a spec'd kernel (one thread per row
softmax, naive matmul, naive transpose) and a host `main` that launches it (in the kernel's own
terms, sizes bound to scalar parameters; transpose has two sites, the second with rows and cols
swapped) on fixed inputs and prints results any correct kernel reproduces, checked against a host
reference. Host code is under `#ifndef __CUDACC_RTC__`, so NVRTC compiles the same file. Per
original, a folder of candidates, each a `.cu` file whose header says what it is:

    // expect: winner | ok | slower | bad_launch | unwritten_output   (alternatives: "a/b")
    // why: what it does
    // decided: before evaluation   (only for blocks the loop must refuse itself: no GPU decides)

`winner` is the launch-changing candidate (`/* @cuda-llm launch */`): a block per row softmax, a
register-tiled 64 x 64 matmul, a 32 x 32 tile transpose with a 32 x 8 block. `ok` ones keep the
original's launch (they must lose to the winner); the bad launches are block 2048, an unknown size
name, 300000 bytes of shared memory, and grids too small to cover the output. For each original
the scripted OpenAI-compatible server on 127.0.0.1 serves every candidate in one round, and

    python -m cuda_llm_lsp.cli optimize <copy> --kernel K --rounds 1 --candidates N --repairs 0 \\
        --format json --model scripted --seed S --launch auto --write --base-url <scripted>

judges them and writes the winner into the copy. Checked: every status fits its header; the winner
is the launch-changing candidate and the JSON's `launch` (the winner's and its own) is its block's
at every case; accepted candidates' loop speedups within 5 % of CuPy's (optimize_harness.py:
original and candidate, each with its own grid/block/smem at the timed case read from the spec
and launch block by this script's own reader, L2 flushed, interleaved, median of 60); the written
file's spec carries the winner's launch and every launch site was rewritten (no "change by hand");
the original and the written program build with `nvcc -arch=sm_90 -O2` and print the same output
(the diff of their `main` is printed). A table and a JSON summary; exit 1 on any FAIL.

    python benchmarks/launch_optimize.py [--out summary.json] [--keep DIR]    # on the GPU
    python benchmarks/launch_optimize.py --dry-run                             # CPU plumbing
    python benchmarks/launch_optimize.py --evaluator recorded:FILE             # CPU, own outcomes

Without a GPU (`--dry-run`: outcomes recorded from the headers; `--evaluator recorded:FILE`: given)
the loop, its launch-block parser, `--write` and nvcc run for real (nvcc `-c` only: nothing is
linked or run); CuPy timing and running the programs are skipped. Blocks marked `decided: before
evaluation` are recorded as `wrong_output`, so only the loop's own refusal makes them pass.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

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
from cuda_llm_lsp.compile.nvcc import find_nvcc  # noqa: E402

HERE = ROOT / "benchmarks" / "launch"
ORIGINALS = ("softmax", "matmul", "transpose")  # file stem = kernel name
ACCEPTED = ("ok", "slower")
AGREEMENT = 0.05  # loop speedup vs independent speedup
RUN_CAP_S = 240.0  # one optimize run longer than this is a failure (a hang), whatever the budget
MIN_RUN_S = 45.0  # an original is not started with less of the budget left
BUILD_TIMEOUT_S = 180.0
RUN_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Candidate:
    original: str
    name: str  # the file's stem
    text: str  # the reply's code (a marker line first)
    expect: tuple[str, ...]
    why: str
    before_evaluation: bool  # refused by the loop's own parser, never by a GPU

    @property
    def marker(self) -> str:
        return f"// launch benchmark: {self.original}/{self.name}"

    @property
    def label(self) -> str:
        return f"{self.original}/{self.name}"


def load_candidates(original: str) -> list[Candidate]:
    """The candidates of one original, in file order."""
    out = []
    for path in sorted((HERE / original).glob("*.cu")):
        text = path.read_text(encoding="utf-8")
        header = dict(re.findall(r"^// (expect|why|decided): (.*)$", text, flags=re.M))
        if "expect" not in header:
            raise SystemExit(f"{path}: no '// expect:' line")
        marker = f"// launch benchmark: {original}/{path.stem}\n"
        out.append(
            Candidate(
                original,
                path.stem,
                marker + text,
                tuple(header["expect"].split("/")),
                header.get("why", ""),
                header.get("decided") == "before evaluation",
            )
        )
    return out


# -- this script's own reading of spec and launch blocks (not the project's parser) -------------

_BLOCK = re.compile(r"/\*[ \t]*@cuda-llm(?P<launch>[ \t]+launch)?[ \t]*\n(?P<body>.*?)\*/", re.S)


def block_table(text: str, launch: bool) -> dict[str, Any] | None:
    """The first spec block (`launch` False) or launch block of `text`, as TOML."""
    for m in _BLOCK.finditer(text):
        if bool(m.group("launch")) == launch:
            return tomllib.loads(m.group("body"))
    return None


def value(expr: object, sizes: Mapping[str, int]) -> int:
    """An integer, or an expression string over size names (+ - * / % cdiv min max), as C
    computes it. Walked node by node: never `eval`ed."""
    if isinstance(expr, int) and not isinstance(expr, bool):
        return expr
    if not isinstance(expr, str):
        raise ValueError(f"not an integer or expression: {expr!r}")
    return _walk(ast.parse(expr.strip(), mode="eval").body, sizes)


def _walk(node: ast.AST, sizes: Mapping[str, int]) -> int:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in sizes:
            raise ValueError(f"{node.id!r} is not a size ({', '.join(sizes)})")
        return sizes[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_walk(node.operand, sizes)
    if isinstance(node, ast.BinOp):
        a, b = _walk(node.left, sizes), _walk(node.right, sizes)
        if isinstance(node.op, ast.Add):
            return a + b
        if isinstance(node.op, ast.Sub):
            return a - b
        if isinstance(node.op, ast.Mult):
            return a * b
        if isinstance(node.op, ast.Div | ast.Mod):  # C: truncating division
            q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
            return q if isinstance(node.op, ast.Div) else a - q * b
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        args = [_walk(a, sizes) for a in node.args]
        if node.func.id == "cdiv" and len(args) == 2:
            return -(-args[0] // args[1])
        if node.func.id in ("min", "max") and args:
            return min(args) if node.func.id == "min" else max(args)
    raise ValueError(f"unsupported expression: {ast.dump(node)[:80]}")


def dims(raw: object, sizes: Mapping[str, int]) -> tuple[int, ...]:
    return tuple(value(x, sizes) for x in (raw if isinstance(raw, list) else [raw]))


def cases(spec: Mapping[str, Any]) -> list[dict[str, int]]:
    """The spec's cases (the last is timed)."""
    sizes = spec["sizes"]
    count = len(next(iter(sizes.values())))
    return [{k: int(v[i]) for k, v in sizes.items()} for i in range(count)]


def launch_at(
    spec: Mapping[str, Any], own: Mapping[str, Any] | None, sizes: Mapping[str, int]
) -> Launch:
    """The launch at `sizes`: `own` (a launch block's keys) over the spec's."""
    merged = {**spec, **(own or {})}
    return Launch(
        dims(merged["grid"], sizes),
        dims(merged["block"], sizes),
        value(merged.get("smem", 0), sizes),
    )


def launches(spec: Mapping[str, Any], own: Mapping[str, Any] | None) -> list[Launch]:
    return [launch_at(spec, own, s) for s in cases(spec)]


def timer_arguments(text: str, kernel: str) -> tuple[list[Buffer], list[str], dict[str, int]]:
    """Buffers, parameter order and scalars at the timed case, from the kernel's signature and
    its spec's `args` (float32 pointers only: what these originals use)."""
    spec = block_table(text, launch=False)
    assert spec is not None, "no spec block"
    sizes = cases(spec)[-1]
    found = re.search(rf"__global__\s+void\s+{kernel}\s*\(([^)]*)\)", text)
    assert found, f"no kernel {kernel}"
    order = [re.findall(r"\w+", p)[-1] for p in found.group(1).split(",")]
    buffers, scalars = [], {}
    for name in order:
        arg = str(spec["args"][name])
        m = re.fullmatch(r"(?:(in|out|inout)\s+)?float32\[(.+)\]", arg.strip())
        if m is None:
            scalars[name] = value(arg, sizes)
            continue
        init = str(spec.get("init", {}).get(name, ""))
        normal = re.fullmatch(r"normal\(\s*0\s*,\s*([\d.]+)\s*\)", init)
        buffers.append(
            Buffer(
                name,
                value(m.group(2), sizes),
                m.group(1) == "out",
                float(normal.group(1)) if normal else None,
            )
        )
    return buffers, order, scalars


# -- the programs ------------------------------------------------------------------------------


def launch_sites(text: str, kernel: str) -> list[str]:
    """Each `kernel<<<...>>>` configuration in the text, in order."""
    return re.findall(rf"\b{kernel}\s*(?:<[^<>;]*>)?\s*<<<(.*?)>>>", text, flags=re.S)


def host_diff(before: str, after: str) -> list[str]:
    """The unified diff of everything from `int main` on (the launch sites and their variables)."""
    cut = [t[t.index("int main") :] if "int main" in t else "" for t in (before, after)]
    return [
        line
        for line in difflib.unified_diff(
            cut[0].splitlines(), cut[1].splitlines(), "original", "written", lineterm="", n=0
        )
        if not line.startswith("@@")
    ]


def build(nvcc: Path, source: Path, out: Path, arch: str, link: bool) -> tuple[bool, str]:
    """`nvcc -arch -O2` the whole program (`-c` without linking when nothing will run it)."""
    command = [str(nvcc), f"-arch={arch}", "-O2", str(source), "-o", str(out)]
    if not link:
        command.insert(1, "-c")
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return False, f"nvcc did not finish in {BUILD_TIMEOUT_S:.0f} s"
    return done.returncode == 0, (done.stdout + done.stderr).strip()


def run_program(binary: Path) -> tuple[int, str]:
    try:
        done = subprocess.run([str(binary)], capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return -1, f"did not finish in {RUN_TIMEOUT_S:.0f} s"
    return done.returncode, done.stdout + done.stderr


# -- judging -----------------------------------------------------------------------------------


@dataclass
class Row:
    label: str
    expect: str
    got: str | None = None
    launch: str = ""
    loop_speedup: float | None = None
    independent: float | None = None
    verdict: str = "FAIL"
    note: str = ""
    winner: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Context:
    """What judging one original needs."""

    name: str
    original: str  # the original file's text
    written: str  # the copy's text after the run (the original where nothing was written)
    result: dict[str, Any]
    timer: IndependentTimer | None
    dry: bool
    nvcc: Path | None
    arch: str
    work: Path
    keep: Path | None


def judge_candidates(ctx: Context, cands: list[Candidate]) -> list[Row]:
    rows = [Row(c.label, "/".join(c.expect)) for c in cands]
    result = ctx.result
    if "candidates" not in result:
        for row in rows:
            row.note = str(result.get("error", "no result"))[:300]
        return rows
    spec = block_table(ctx.original, launch=False)
    assert spec is not None
    got = {c["index"]: c for c in result["candidates"]}
    best = result.get("best_source") or ""
    for i, (row, c) in enumerate(zip(rows, cands, strict=True), 1):
        outcome = got.get(i)
        if outcome is None:
            row.note = "not judged"
            continue
        row.got, message = outcome["status"], outcome.get("message") or ""
        row.winner = bool(result.get("accepted")) and c.marker in best
        own = block_table(c.text, launch=True)
        row.launch = "" if outcome.get("launch") is None else json.dumps(outcome["launch"])
        wanted = {"ok" if e == "winner" else e for e in c.expect}
        if row.got not in wanted:
            row.note = f"status {row.got} does not fit: {message}"[:300]
            continue
        if "winner" in c.expect:
            problem = _winner_problem(ctx, spec, own, outcome, row.winner)
            if problem:
                row.note = problem
                continue
        elif row.winner:
            row.note = "accepted as the winner, but the launch-changing candidate should win"
            continue
        if row.got not in ACCEPTED:
            row.verdict, row.note = "PASS", message[:200]
            continue
        _time(ctx, row, c, spec, own, outcome)
    return rows


def _winner_problem(
    ctx: Context,
    spec: Mapping[str, Any],
    own: Mapping[str, Any] | None,
    outcome: Mapping[str, Any],
    winner: bool,
) -> str:
    """Why the designated winner's result is not right, or ""."""
    if not winner:
        return "not the winner"
    if own is None:
        return "the winner carries no launch block (the benchmark's own mistake)"
    expected = launches(spec, own)
    for where, shown in (
        ("the winner's `launch`", ctx.result.get("launch")),
        ("its candidate `launch`", outcome.get("launch")),
    ):
        if not shown:
            return f"{where} in the JSON is null: its own launch was not used"
        if launches(spec, shown) != expected:
            return f"{where} in the JSON is {shown}, not its block's"
    return ""


def _time(
    ctx: Context,
    row: Row,
    c: Candidate,
    spec: Mapping[str, Any],
    own: Mapping[str, Any] | None,
    outcome: Mapping[str, Any],
) -> None:
    """The loop's speedup of an accepted candidate against CuPy's (the winner: the written
    program's kernel with the written spec's launch against the original's)."""
    result = ctx.result
    row.loop_speedup = (
        float(result["speedup"])
        if row.winner and result.get("speedup")
        else loop_speedup(outcome, result.get("baseline_ms"))
    )
    if ctx.dry:
        row.verdict, row.note = "PASS", "independent timing skipped (no GPU)"
        return
    if ctx.timer is None:
        row.note = "no independent timer (CuPy)"
        return
    base_launch = launch_at(spec, None, cases(spec)[-1])
    if row.winner:
        written_spec = block_table(ctx.written, launch=False)
        if written_spec is None:
            row.note = "the written file has no spec block"
            return
        source, launch = ctx.written, launch_at(written_spec, None, cases(written_spec)[-1])
    else:
        source, launch = c.text, launch_at(spec, own, cases(spec)[-1])
    row.extra["timed_launches"] = [base_launch.describe(), launch.describe()]
    try:
        buffers, order, scalars = timer_arguments(ctx.original, ctx.name)
        base, cand, row.independent = ctx.timer.speedup(
            ctx.name, (ctx.original, source), (base_launch, launch), buffers, order, scalars
        )
    except Exception as exc:  # reported in the table, the run goes on
        row.note = f"independent timing failed: {type(exc).__name__}: {exc}"[:300]
        return
    row.extra.update(cupy_original_ms=round(base, 4), cupy_candidate_ms=round(cand, 4))
    if row.loop_speedup is None:
        row.note = "the loop reported no speedup"
        return
    off = row.loop_speedup / row.independent - 1
    row.extra["disagreement_pct"] = round(100 * off, 2)
    row.verdict = "PASS" if abs(off) <= AGREEMENT else "FAIL"
    row.note = f"loop vs independent {100 * off:+.1f} % ({launch.describe()})"


def judge_program(ctx: Context, winner: Candidate | None) -> Row:
    """The written program: the winner and its launch at every site, builds, same output."""
    row = Row(f"{ctx.name}: written program", "same output")
    result = ctx.result
    stderr = str(result.get("stderr", ""))
    problems = []
    if "candidates" not in result:
        row.note = str(result.get("error", "no result"))[:300]
        return row
    if result.get("exit_code") != 0:
        problems.append(f"optimize exited {result.get('exit_code')}: {stderr.strip()[-300:]}")
    if ctx.written == ctx.original:
        problems.append("nothing was written")
    if winner is not None and winner.marker not in ctx.written:
        problems.append("the written kernel is not the winner's")
    if "@cuda-llm launch" in ctx.written:
        problems.append("the launch block was written into the file")
    if "change by hand" in stderr:
        problems.append("launch sites left to change by hand")
    spec = block_table(ctx.original, launch=False)
    written_spec = block_table(ctx.written, launch=False)
    own = block_table(winner.text, launch=True) if winner else None
    if spec is None or written_spec is None:
        problems.append("a spec block is missing")
    elif own is not None and launches(written_spec, None) != launches(spec, own):
        problems.append("the written spec's launch is not the winner's")
    before, after = launch_sites(ctx.original, ctx.name), launch_sites(ctx.written, ctx.name)
    row.extra["launch_sites"] = {"original": before, "written": after}
    diff = host_diff(ctx.original, ctx.written)
    if len(before) != len(after) or not diff:  # running both programs proves the rest
        problems.append(f"launch sites not rewritten: {before} -> {after}")
    row.extra["host_diff"] = diff
    print(f"-- {ctx.name}: launch sites, original -> written\n" + "\n".join(diff), flush=True)
    problems += _build_and_run(ctx, row)
    if ctx.keep is not None:
        ctx.keep.mkdir(parents=True, exist_ok=True)
        (ctx.keep / f"{ctx.name}.cu").write_text(ctx.written, encoding="utf-8")
        (ctx.keep / f"{ctx.name}.diff").write_text("\n".join(diff) + "\n", encoding="utf-8")
    if problems:
        row.note = "; ".join(problems)[:400]
        return row
    row.verdict = "PASS"
    if not row.note:
        row.note = "builds; same output: " + " | ".join(
            row.extra.get("output", "").strip().splitlines()
        )
    return row


def _build_and_run(ctx: Context, row: Row) -> list[str]:
    if ctx.nvcc is None:
        return ["no nvcc found (CUDA_LLM_NVCC, the nvcc extra, or PATH)"]
    link, nvcc = not ctx.dry, ctx.nvcc
    jobs = []
    for label, text in (("original", ctx.original), ("written", ctx.written)):
        source = ctx.work / f"{ctx.name}-{label}.cu"
        source.write_text(text, encoding="utf-8")
        jobs.append((label, source, ctx.work / f"{ctx.name}-{label}{'' if link else '.o'}"))
    with ThreadPoolExecutor(2) as pool:  # both at once: each is mostly one nvcc process
        built = list(pool.map(lambda j: build(nvcc, j[1], j[2], ctx.arch, link), jobs))
    for (label, _, _), (ok, log) in zip(jobs, built, strict=True):
        if not ok:
            return [f"the {label} program does not build with nvcc: {log[-400:]}"]
    binaries = [binary for _, _, binary in jobs]
    row.got = "builds"
    if ctx.dry:
        row.note = f"both build (nvcc -c -arch={ctx.arch}); not run (no GPU)"
        return []
    outputs = [run_program(b) for b in binaries]
    row.extra["output"] = outputs[0][1]
    row.extra["written_output"] = outputs[1][1]
    print(
        f"-- {ctx.name}: the original prints\n{outputs[0][1]}-- the written program prints\n"
        f"{outputs[1][1]}",
        end="",
        flush=True,
    )
    if outputs[0][0] != 0:
        return [f"the original program fails (exit {outputs[0][0]}): {outputs[0][1][-200:]}"]
    if outputs[1] != outputs[0]:
        row.got = "differs"
        return [
            f"the written program prints otherwise (exit {outputs[1][0]}): {outputs[1][1][-300:]}"
        ]
    row.got = "same output"
    return []


# -- the run -----------------------------------------------------------------------------------


def dry_recording(names: list[str]) -> dict[str, Any]:
    """Outcomes an honest judge would give, from the headers (see the module docstring)."""
    entries: list[dict[str, Any]] = []
    for name in names:
        for c in load_candidates(name):
            marker: dict[str, Any] = {"contains": c.marker}
            if c.before_evaluation:
                stand_in = "recorded stand-in: the loop should refuse it itself"
                entries.append({**marker, "status": "wrong_output", "message": stand_in})
            elif "winner" in c.expect:
                entries.append({**marker, "status": "ok", "ms": 0.25})
            elif "ok" in c.expect:
                entries.append({**marker, "status": "ok", "ms": 0.6})
            else:
                entries.append({**marker, "status": c.expect[0], "message": "recorded"})
    return {"baseline": {"ms": 1.0, "spread_pct": 0.5}, "candidates": entries}


def check_original(
    name: str,
    work: Path,
    evaluator: str | None,
    timeout: float,
    timer: IndependentTimer | None,
    args: argparse.Namespace,
) -> tuple[list[Row], dict[str, Any]]:
    cands = load_candidates(name)
    folder = work / name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.cu"
    original = (HERE / f"{name}.cu").read_text(encoding="utf-8")
    path.write_text(original, encoding="utf-8")
    replies = [(c.name, c.text) for c in cands]
    result = run_optimize(
        path, name, replies, folder, evaluator, timeout, extra=("--launch", "auto", "--write")
    )
    ctx = Context(
        name,
        original,
        path.read_text(encoding="utf-8"),
        result,
        timer,
        evaluator is not None,
        args.nvcc,
        args.arch,
        folder,
        args.keep,
    )
    rows = judge_candidates(ctx, cands)
    winners = [c for c in cands if "winner" in c.expect]
    rows.append(judge_program(ctx, winners[0] if winners else None))
    keys = (
        "baseline_ms",
        "best_ms",
        "speedup",
        "accepted",
        "launch",
        "wall_s",
        "exit_code",
        "error",
    )
    return rows, {k: result.get(k) for k in keys}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--targets", default=",".join(ORIGINALS), help="comma-separated originals")
    parser.add_argument("--evaluator", help="recorded:FILE: a CPU run with these outcomes")
    parser.add_argument(
        "--dry-run", action="store_true", help="a CPU run, outcomes from the candidates' headers"
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=500.0,
        help="seconds for the run: originals not started by then FAIL",
    )
    parser.add_argument("--arch", default="sm_90", help="nvcc -arch for the programs")
    parser.add_argument("--keep", type=Path, help="keep the written programs and diffs here")
    parser.add_argument("--out", type=Path, help="also write the summary JSON here")
    args = parser.parse_args(argv)
    started = time.monotonic()
    args.nvcc = find_nvcc() or (Path(p) if (p := shutil.which("nvcc")) else None)
    names = args.targets.split(",")
    timer = None
    with tempfile.TemporaryDirectory(prefix="launch-") as tmp:
        evaluator = args.evaluator
        if args.dry_run and not evaluator:
            recording = Path(tmp) / "outcomes.json"
            recording.write_text(json.dumps(dry_recording(names)), encoding="utf-8")
            evaluator = f"recorded:{recording}"
        if evaluator is None:
            try:
                timer = IndependentTimer()
            except Exception as exc:  # no CuPy or no GPU: say so, judge the rest
                print(
                    f"independent timer unavailable ({type(exc).__name__}: {exc}); accepted "
                    "candidates cannot be checked and FAIL"
                )
        print(f"nvcc: {args.nvcc}", flush=True)
        rows: list[Row] = []
        runs: dict[str, Any] = {}
        skipped: list[str] = []
        for name in names:
            left = args.budget - (time.monotonic() - started)
            if left < MIN_RUN_S:
                skipped.append(name)
                continue
            try:
                found, runs[name] = check_original(
                    name, Path(tmp), evaluator, min(left, RUN_CAP_S), timer, args
                )
            except Exception as exc:  # one original's failure never stops the others
                found = [Row(f"{name}: run", "done", note=f"{type(exc).__name__}: {exc}"[:300])]
            rows.extend(found)
    print("\n| candidate | expected | got | loop | independent | verdict | note |")
    print("|---|---|---|---:|---:|---|---|")
    for row in rows:
        win = " (winner)" if row.winner else ""
        print(
            f"| {row.label}{win} | {row.expect} | {row.got} | {fmt(row.loop_speedup)} | "
            f"{fmt(row.independent)} | {row.verdict} | {row.note[:160]} |"
        )
    for name, run in runs.items():
        print(
            f"{name}: baseline {run['baseline_ms']} ms, best {run['best_ms']} ms, speedup "
            f"{run['speedup']}, launch {json.dumps(run['launch'])}, {run['wall_s']} s"
            + (f", error: {str(run['error'])[:200]}" if run.get("error") else "")
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
                    "dry": evaluator is not None,
                    "rows": [
                        {
                            "candidate": r.label,
                            "expected": r.expect,
                            "got": r.got,
                            "launch": r.launch,
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
    ok = rows and not failed and not skipped
    print(
        f"\n{len(rows) - len(failed)}/{len(rows)} PASS in {time.monotonic() - started:.0f} s"
        + (f", {len(skipped)} original(s) not run" if skipped else "")
    )
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
