"""The tolerance model on the device: honest reorderings must pass, precision cheats must fail.

`benchmarks/tolerance_family/` holds originals (matmul, column sums, dot, softmax, layer norm,
RMS norm in float32; matmul and softmax in bfloat16), each with a folder of candidates whose
header says what they are:

    // expect: honest    (a reordering of the same float work: must be accepted, ok or slower)
    // expect: cheat     (lower precision, dropped terms, an approximation: must be rejected)
    // why: what it does

Every candidate is compiled by the project (NVRTC, the candidate policy) and judged by the real
evaluator (`GpuEvaluator.evaluate`: every case, hidden cases, two runs, timing). Per candidate:
status, verdict (PASS, FALSE REJECT, FALSE ACCEPT) and the first line of the message; then the
false-reject and false-accept counts. Exit 1 on any false verdict.

    python benchmarks/tolerance_family.py [--out summary.json] [--only matmul,dot]
    JUDGE_ROOT=/path/to/other/checkout python benchmarks/tolerance_family.py   # another judge
    python benchmarks/tolerance_family.py --compile-only     # CPU: every candidate compiles

`JUDGE_ROOT` imports the judge from another checkout (the "before" column of RESULTS.md: main's
compare) and runs in it (the worker is started with `python -m`, which puts the working
directory first on its path); the candidates and originals always come from this one.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JUDGE_ROOT = Path(os.environ.get("JUDGE_ROOT") or ROOT).resolve()
sys.path.insert(0, str(JUDGE_ROOT))
_paths = [str(JUDGE_ROOT), os.environ.get("PYTHONPATH")]
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in _paths if p)  # the worker's, too
_CWD = Path.cwd()
os.chdir(JUDGE_ROOT)  # the worker starts with `python -m`: its working directory comes first

from cuda_llm_lsp.config import Settings  # noqa: E402
from cuda_llm_lsp.evaluate.candidate import CandidateRejected, build_binary  # noqa: E402
from cuda_llm_lsp.evaluate.types import KernelBinary, NoGpuError  # noqa: E402
from cuda_llm_lsp.source.kernels import find_kernels  # noqa: E402
from cuda_llm_lsp.source.spec import parse_spec  # noqa: E402

HERE = ROOT / "benchmarks" / "tolerance_family"
ACCEPTED = ("ok", "slower")


@dataclass(frozen=True)
class Row:
    family: str
    candidate: str
    expect: str  # honest | cheat
    why: str
    status: str
    verdict: str  # PASS | FALSE REJECT | FALSE ACCEPT
    seconds: float
    message: str


def header(text: str, key: str) -> str:
    found = re.search(rf"^// {key}: (.*)$", text, flags=re.M)
    return found.group(1).strip() if found else ""


def verdict(expect: str, status: str) -> str:
    accepted = status in ACCEPTED
    if expect == "honest":
        return "PASS" if accepted else "FALSE REJECT"
    return "FALSE ACCEPT" if accepted else "PASS"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--only", default="", help="comma-separated families")
    parser.add_argument("--compile-only", action="store_true")
    parser.add_argument("--seed", type=int, default=27)
    args = parser.parse_args()
    families = sorted(p.stem for p in HERE.glob("*.cu"))
    if args.only:
        families = [f for f in families if f in args.only.split(",")]
    evaluator = None
    arch = "sm_90"
    if not args.compile_only:
        from cuda_llm_lsp.evaluate.gpu import GpuEvaluator

        evaluator = GpuEvaluator()
        try:
            facts = evaluator.device_facts()
        except NoGpuError as exc:
            print(f"no GPU: {exc}")
            return 3
        arch = facts.arch
        print(f"device: {facts.name} ({facts.arch})")
    scale_aware = "SCALE_ULPS" in (JUDGE_ROOT / "cuda_llm_lsp/evaluate/compare.py").read_text()
    print(f"judge: {JUDGE_ROOT} ({'scale-aware floor' if scale_aware else 'rtol/atol only'})")
    rows: list[Row] = []
    print("| family | candidate | expect | status | verdict | s | message |")
    print("|---|---|---|---|---|---:|---|")
    for family in families:
        path = HERE / f"{family}.cu"
        source = path.read_text()
        kernel = find_kernels(source)[0]
        spec, problems = parse_spec(kernel, source)
        assert spec is not None, problems
        base = build_binary(source, path, kernel.name, Settings(), spec=spec, arch=arch)
        assert isinstance(base, KernelBinary), base
        for cand in sorted((HERE / family).glob("*.cu")):
            text = cand.read_text()
            expect, why = header(text, "expect"), header(text, "why")
            start = time.perf_counter()
            built = build_binary(
                source, path, kernel.name, Settings(), spec=spec, arch=arch, kernel_source=text
            )
            if isinstance(built, CandidateRejected):
                status, message = built.status, built.message
            elif evaluator is None:
                status, message = "compiled", ""
            else:
                result = evaluator.evaluate(base, built, spec, spec_dir=path.parent, seed=args.seed)
                status, message = result.status, result.message
            seconds = time.perf_counter() - start
            v = (
                verdict(expect, status)
                if evaluator is not None
                else ("PASS" if status == "compiled" else "COMPILE ERROR")
            )
            row = Row(family, cand.stem, expect, why, status, v, seconds, message)
            rows.append(row)
            first = message.splitlines()[0][:160] if message else ""
            print(
                f"| {family} | {cand.stem} | {expect} | {status} | {v} | {seconds:.1f} | {first} |",
                flush=True,
            )
    if evaluator is not None:
        evaluator.close()
    honest = [r for r in rows if r.expect == "honest"]
    cheats = [r for r in rows if r.expect == "cheat"]
    false_reject = sum(r.verdict == "FALSE REJECT" for r in rows)
    false_accept = sum(r.verdict == "FALSE ACCEPT" for r in rows)
    broken = sum(r.verdict == "COMPILE ERROR" for r in rows)
    tail = f"; compile errors {broken}" if broken else ""
    print(
        f"\nhonest {len(honest)}: false rejects {false_reject}; cheats {len(cheats)}: "
        f"false accepts {false_accept}{tail}"
    )
    if args.out:
        (_CWD / args.out).write_text(
            json.dumps(
                {
                    "judge": str(JUDGE_ROOT),
                    "scale_aware": scale_aware,
                    "false_rejects": false_reject,
                    "false_accepts": false_accept,
                    "rows": [asdict(r) for r in rows],
                },
                indent=2,
            )
        )
    return 1 if false_reject or false_accept or broken else 0


if __name__ == "__main__":
    sys.exit(main())
