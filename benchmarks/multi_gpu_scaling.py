"""Several GPUs (issue [scale]): a 16-candidate round of the FSR loop judged on one GPU, then on
every local GPU, with the same winner and the same statuses.

The model is scripted in-process (instant replies: the round's time is the judge's), the kernels
are real (tests/gpu/data/fsr_converge.cu and planted variants: faster, slower and broken ones),
built by NVRTC and judged by the real worker. A warm-up round first starts every worker, measures
each GPU's copy bandwidth and fills the compile cache, so both timed rounds measure evaluation.

    python benchmarks/multi_gpu_scaling.py                    # every visible GPU
    python benchmarks/multi_gpu_scaling.py --gpus 0,1 --out benchmarks/results/scaling.json

Prints the evaluation time on 1 GPU and on N, the ratio, the winners and any status that
differs; exit 0 when the ratio is at least `--min-ratio` (1.8) with the same winner and statuses.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cuda_llm_lsp.evaluate.devices import GpuPool, local_devices  # noqa: E402
from cuda_llm_lsp.evaluate.gpu import GpuEvaluator  # noqa: E402
from cuda_llm_lsp.evaluate.types import Evaluator  # noqa: E402
from cuda_llm_lsp.fsr.client import LlmReply, extract_kernel  # noqa: E402
from cuda_llm_lsp.fsr.loop import optimize  # noqa: E402
from cuda_llm_lsp.fsr.types import (  # noqa: E402
    CandidateEvaluated,
    CandidateStage,
    OptimizeConfig,
    OptimizeRequest,
    OptimizeResult,
    ProgressEvent,
)
from tests.support.planted import _CONVERGE_HEAD, CONVERGE, _converge, _loop  # noqa: E402

# 16 candidates: 8 faster than the original's 1024 steps (64 steps wins), 4 slower, 4 broken
FASTER = (64, 128, 192, 256, 384, 512, 640, 768)
SLOWER = (1536, 2048, 3072, 4096)
BROKEN = (
    ("triple", "  if (i < n) y[i] = 3.0f * x[i];\n", _CONVERGE_HEAD),
    ("short", _loop(64, "i < n - 1"), _CONVERGE_HEAD),
    ("past", _loop(64, "i <= n"), _CONVERGE_HEAD),
    ("long", _loop(64), _CONVERGE_HEAD.replace("int n", "long n")),
)


def replies() -> list[str]:
    made = [_converge(f"steps{k}", _loop(k)) for k in (*FASTER, *SLOWER)]
    made += [_converge(marker, body, head) for marker, body, head in BROKEN]
    return made


class InstantLlm:
    """Answers candidate i of the round with the i-th planted reply at once."""

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts

    async def complete(self, prompt: Any) -> LlmReply:
        text = self.texts[(prompt.index - 1) % len(self.texts)]
        code, error = extract_kernel(text, prompt.kernel)
        return LlmReply(text=text, code=code, error=error)

    async def close(self) -> None:
        pass


async def one_round(evaluator: Evaluator, count: int) -> tuple[OptimizeResult, float]:
    """The round's result and its evaluation time: first "evaluating" to last judged."""
    marks: dict[str, float] = {}

    def on_event(event: ProgressEvent) -> None:
        now = time.perf_counter()
        if isinstance(event, CandidateStage) and event.stage == "evaluating":
            marks.setdefault("first", now)
        if isinstance(event, CandidateEvaluated):
            marks["last"] = now

    text = CONVERGE.file.read_text()
    config = OptimizeConfig(
        rounds=1, candidates=count, profile=False, sanitize_winner=False, patience=1
    )
    request = OptimizeRequest(file_text=text, kernel=CONVERGE.kernel, seed=5, path=CONVERGE.file)
    result = await optimize(request, config, evaluator, InstantLlm(replies()), on_event=on_event)
    return result, marks.get("last", 0.0) - marks.get("first", 0.0)


def marker(source: str | None) -> str | None:
    found = re.search(r"variant: (\S+)", source or "")
    return found.group(1) if found else None


def statuses(result: OptimizeResult) -> dict[str, str]:
    return {marker(c.source) or f"#{c.index}": c.status for c in result.candidates}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--gpus", default="all", help="the GPUs of the parallel run (all, 0,1)")
    parser.add_argument("--candidates", type=int, default=16)
    parser.add_argument("--min-ratio", type=float, default=1.8)
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = parser.parse_args()

    pool = GpuPool(lambda: local_devices(args.gpus))
    width = pool.width
    if width < 2:
        print(f"only {width} GPU visible: nothing to scale over", file=sys.stderr)
        return 2
    single = GpuEvaluator(pool.devices[0].gpu.index)
    try:
        asyncio.run(one_round(pool, args.candidates))  # warm-up: workers, bandwidth, compiles
        one, one_s = asyncio.run(one_round(single, args.candidates))
        many, many_s = asyncio.run(one_round(pool, args.candidates))
    finally:
        single.close()
        pool.close()
    ratio = one_s / many_s if many_s > 0 else 0.0
    same_winner = marker(one.best_source) == marker(many.best_source) and one.accepted
    differ = {
        k: (v, statuses(many).get(k))
        for k, v in statuses(one).items()
        if statuses(many).get(k) != v
    }
    gpus = sorted({c.gpu for c in many.candidates if c.gpu})
    print(
        f"{args.candidates} candidates, evaluation: 1 GPU {one_s:.2f} s, {width} GPUs "
        f"{many_s:.2f} s -> {ratio:.2f}x"
    )
    print(
        f"winner: 1 GPU {marker(one.best_source)} ({one.speedup or 0:.2f}x), {width} GPUs "
        f"{marker(many.best_source)} ({many.speedup or 0:.2f}x)"
    )
    print(f"GPUs used: {', '.join(gpus)}")
    if differ:
        print(f"statuses that differ (1 GPU, {width} GPUs): {differ}")
    figures = {
        "candidates": args.candidates,
        "gpus": width,
        "one_gpu_s": one_s,
        "all_gpus_s": many_s,
        "ratio": ratio,
        "winner_one": marker(one.best_source),
        "winner_all": marker(many.best_source),
        "same_winner": same_winner,
        "statuses_differ": differ,
        "gpus_used": gpus,
        "statuses": statuses(many),
    }
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(figures, indent=1))
    return 0 if ratio >= args.min_ratio and same_winner and not differ else 1


if __name__ == "__main__":
    sys.exit(main())
