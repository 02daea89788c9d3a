"""The prompts a real run sends, kept as snapshots with their sizes (tests/data/prompts/).

A three-round run of `examples/saxpy.cu` through the real loop: real NVRTC builds, the recorded
evaluator's H100 facts and timings, an in-process model whose round-1 replies fail to compile and
compute wrong results, and whose round-2 replies are faster and slower. Round 1 shows what every
run starts from (rules, toolchain, GPU, roofline); round 3 adds the best kernels and the failures.
A change to the prompt shows here as a diff to review; `UPDATE_PROMPT_SNAPSHOTS=1` rewrites the
files. The size budgets keep the prompt lean.
"""

from __future__ import annotations

import os
from pathlib import Path

from cuda_llm_lsp.evaluate.recorded import RecordedEvaluator
from cuda_llm_lsp.fsr.client import Prompt
from cuda_llm_lsp.fsr.loop import optimize
from cuda_llm_lsp.fsr.toolchain import DefaultToolchain
from cuda_llm_lsp.fsr.types import OptimizeConfig, OptimizeRequest
from tests.support.fsr_fakes import FakeLlm

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOTS = ROOT / "tests" / "data" / "prompts"
EXAMPLE = ROOT / "examples" / "saxpy.cu"
BUDGET = {1: 6000, 3: 9000}  # characters of the whole prompt (system + user)


def kernel(variant: str, body: str) -> str:
    return (
        'extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {\n'
        f"  // variant: {variant}\n"
        "  int i = (blockIdx.x * blockDim.x + threadIdx.x) * 4;\n"
        f"{body}\n}}"
    )


VECTOR = """\
  if (i + 3 < n) {
    float4 xv = *reinterpret_cast<const float4*>(x + i);
    float4 yv = *reinterpret_cast<float4*>(y + i);
    yv.x = fmaf(a, xv.x, yv.x); yv.y = fmaf(a, xv.y, yv.y);
    yv.z = fmaf(a, xv.z, yv.z); yv.w = fmaf(a, xv.w, yv.w);
    *reinterpret_cast<float4*>(y + i) = yv;
  } else {
    for (int j = i; j < n; ++j) y[j] = fmaf(a, x[j], y[j]);
  }"""
REPLIES = {
    (1, 1): kernel("typo", VECTOR.replace("float4 yv", "float4 yv =")),
    (1, 2): kernel("skips-tail", VECTOR.split("  } else {")[0] + "  }"),
    (2, 1): kernel("vector", VECTOR),
    (2, 2): kernel("vector-slow", VECTOR.replace("fmaf(a, x[j], y[j])", "a * x[j] + y[j]")),
    (3, 1): kernel("vector", VECTOR),
    (3, 2): kernel("vector", VECTOR),
}
OUTCOMES = {
    "baseline": {"ms": 0.1742, "spread_pct": 0.6},
    "candidates": [
        {"contains": "variant: skips-tail", "status": "wrong_output", "case": 1,
         "message": "case 1 (n=7): y[4] expected 2.2512, got 0.41"},
        {"contains": "variant: vector-slow", "status": "ok", "ms": 0.19},
        {"contains": "variant: vector", "status": "ok", "ms": 0.1391},
    ],
}  # fmt: skip


class NoProfiler(DefaultToolchain):
    """The real build; no ncu or sanitizer, whatever this machine has (snapshots must agree)."""

    def sanitize(self, *args: object) -> None:
        return None

    def profile(self, *args: object) -> None:
        return None


def run_prompts() -> dict[int, Prompt]:
    import asyncio

    llm = FakeLlm(REPLIES)
    request = OptimizeRequest(file_text=EXAMPLE.read_text(), kernel="saxpy", path=EXAMPLE, seed=1)
    config = OptimizeConfig(rounds=3, candidates=2, patience=3, concurrency=1)
    result = asyncio.run(
        optimize(request, config, RecordedEvaluator(OUTCOMES), llm, toolchain=NoProfiler())
    )
    assert result.error is None, result.message
    return {p.round: p for p in llm.prompts if p.index == 1 and p.role == "candidate"}


def test_round_1_and_round_3_prompts_match_their_snapshots() -> None:
    prompts = run_prompts()
    update = os.environ.get("UPDATE_PROMPT_SNAPSHOTS") == "1"
    sizes = {}
    for round_ in (1, 3):
        text = prompts[round_].text
        sizes[round_] = len(text)
        path = SNAPSHOTS / f"saxpy-round{round_}.txt"
        if update:
            path.write_text(text, encoding="utf-8")
        assert text == path.read_text(encoding="utf-8"), f"{path.name} changed (see the diff)"
    print(f"prompt sizes in characters: round 1 {sizes[1]}, round 3 {sizes[3]}")
    shown = (ROOT / "docs" / "prompt.md").read_text(encoding="utf-8")
    assert prompts[1].text.rstrip() in shown, "docs/prompt.md differs from round 1's snapshot"
    assert f"{sizes[1]}\ncharacters" in shown or f"{sizes[1]} characters" in shown
    assert sizes[1] <= BUDGET[1] and sizes[3] <= BUDGET[3], sizes


def test_the_prompts_say_what_the_issue_asks_for() -> None:
    prompts = run_prompts()
    first, third = prompts[1].text, prompts[3].text
    expected = (
        "NVRTC from CUDA 13 with CCCL 3",
        "<cub/block/block_reduce.cuh>",
        "cuda::maximum<>",
        "only CUDA toolkit and CCCL headers",
        "hidden cases",
        "132 SMs at 1980 MHz",
        "|got - expected| <= 1e-05 x min(1, the output's mean |expected|) + 0.0001",
        "2048 threads, 32 blocks",
        "L2 cache: 50 MiB",
        "FP32 66.9 TFLOP/s",
        "bytes moved",
        "floor:",
        "% of it",
        "bottleneck (from the roofline)",
    )
    for words in expected:
        assert words in first, words
    user = prompts[1].messages[1]["content"]
    for host_only in ("cudaMalloc", "<vector>", "cuda_runtime.h", "std::vector"):
        assert host_only not in user, host_only
    assert "saxpy<<<(n + 255) / 256, 256>>>(2.0f, dx, dy, n);" in first
    # round 3: the compile error with the candidate's own lines, not the file's line numbers
    assert "> " in third and "float4 yv = = " in third and "line 1" not in third
    assert "wrong_output: case 1 (n=7)" in third and "variant: vector" in third
