"""Evaluator throughput: candidates judged per minute for a small kernel (issue 3: >= 60/min).

Each candidate is a distinct text (a unique comment defeats the compile cache), so every one is
really compiled by NVRTC, then evaluated against the original on 4 cases (two runs each, guard
bands, poison) with interleaved timing of the last case and the recheck on new inputs.

    python benchmarks/evaluator_throughput.py [--candidates 40]
"""

from __future__ import annotations

import argparse
import secrets
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.evaluate.candidate import CandidateRejected, build_binary
from cuda_llm_lsp.evaluate.gpu import GpuEvaluator
from cuda_llm_lsp.evaluate.types import KernelBinary, NoGpuError
from cuda_llm_lsp.source.kernels import find_kernels
from cuda_llm_lsp.source.spec import parse_spec

SOURCE = """
/* @cuda-llm
sizes.n = [1, 1000, 65537, 1048576]
grid = "cdiv(n, 256)"
block = 256
args.x = "float32[n]"
args.y = "float32[n]"
args.out = "out float32[n]"
args.a = 1.5
args.n = "n"
*/
extern "C" __global__ void saxpy(const float* x, const float* y, float* out, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * x[i] + y[i];
}
"""

CANDIDATE = """// candidate {tag}
extern "C" __global__ void saxpy(const float* __restrict__ x, const float* __restrict__ y,
                                 float* __restrict__ out, float a, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = fmaf(a, __ldg(x + i), __ldg(y + i));
}}
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, default=40)
    args = parser.parse_args()
    spec, problems = parse_spec(find_kernels(SOURCE)[0], SOURCE)
    assert spec is not None, problems
    evaluator = GpuEvaluator()
    try:
        t0 = time.perf_counter()
        facts = evaluator.device_facts()
        startup = time.perf_counter() - t0
    except NoGpuError as exc:
        print(f"no GPU: {exc}")
        return 3
    base = build_binary(SOURCE, None, "saxpy", Settings(), arch=facts.arch)
    assert isinstance(base, KernelBinary), base
    compile_s, eval_s, statuses = [], [], []
    start = time.perf_counter()
    for _ in range(args.candidates):
        c0 = time.perf_counter()
        cand = build_binary(
            SOURCE,
            None,
            "saxpy",
            Settings(),
            arch=facts.arch,
            kernel_source=CANDIDATE.format(tag=secrets.token_hex(8)),
        )
        c1 = time.perf_counter()
        if isinstance(cand, CandidateRejected):
            statuses.append(cand.status)
            compile_s.append(c1 - c0)
            continue
        result = evaluator.evaluate(base, cand, spec)
        c2 = time.perf_counter()
        compile_s.append(c1 - c0)
        eval_s.append(c2 - c1)
        statuses.append(result.status)
    total = time.perf_counter() - start
    evaluator.close()
    n = args.candidates
    ok = statuses.count("ok")
    print(f"device: {facts.name} ({facts.arch}); worker start + device facts {startup:.2f} s")
    print("| candidates | ok | total s | compile s/cand | evaluate s/cand | candidates/min |")
    print("|---:|---:|---:|---:|---:|---:|")
    print(
        f"| {n} | {ok} | {total:.1f} | {sum(compile_s) / n:.3f} | "
        f"{sum(eval_s) / max(len(eval_s), 1):.3f} | {60 * n / total:.0f} |"
    )
    target = 60 * n / total >= 60
    print(f"target >= 60 candidates/min: {'met' if target else 'NOT met'}")
    return 0 if target and ok == n else 1


if __name__ == "__main__":
    sys.exit(main())
