"""Shared by the benchmarks that run `cuda-llm optimize` against planted candidates and check
its figures independently (adversarial_optimize.py, launch_optimize.py).

- `run_optimize`: one `python -m cuda_llm_lsp.cli optimize ... --format json` run in a
  subprocess, its model a scripted OpenAI-compatible server on 127.0.0.1 (tests/support/
  scripted_llm.py) serving one reply per candidate of one round, with a hard time cap.
- `IndependentTimer`: CuPy's own measurement of an original against a candidate, each launched
  with its own grid, block and dynamic shared memory (`Launch`; above 48 KiB the kernel's
  attribute is raised first): same inputs for both, three input sets in rotation, a GPU-side
  1.5 ms pause and a memset of twice the L2 before every launch, original and candidate
  interleaved (A B, then B A), CUDA events, median of 60 launches. Nothing of the project's
  evaluator is used, so a bug there cannot hide.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support.scripted_llm import ScriptedLlmServer, kernel_reply  # noqa: E402

LAUNCHES = 60
SEED = 1234
SMEM_DEFAULT_LIMIT = 48 * 1024  # dynamic shared memory a launch may use without opting in


def run_optimize(
    path: Path,
    kernel: str,
    replies: Sequence[tuple[str, str]],
    work: Path,
    evaluator: str | None,
    timeout: float,
    extra: Sequence[str] = (),
) -> dict[str, Any]:
    """`cuda-llm optimize` on `path` for one round whose candidates are `replies` ((name, code)
    pairs, in order). Returns the CLI's JSON object with `wall_s`, `exit_code` and `stderr`
    added, or {"error": ...} (with `timed_out` when the cap ended it)."""
    n = len(replies)
    steps = [
        {
            "text": kernel_reply(code, note=f"Candidate {name}."),
            "match": f"This is round 1, candidate {i} of {n}.",
        }
        for i, (name, code) in enumerate(replies, 1)
    ]
    path_var = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = dict(
        os.environ,
        OPENAI_API_KEY="scripted",
        CUDA_LLM_DATA_DIR=str(work / "data"),
        PYTHONUNBUFFERED="1",
        PYTHONPATH=path_var,
    )
    if evaluator:
        env["CUDA_LLM_EVALUATOR"] = evaluator
    command = [
        "optimize",
        str(path),
        "--kernel",
        kernel,
        "--rounds",
        "1",
        "--candidates",
        str(n),
        "--repairs",
        "0",
        "--format",
        "json",
        "--model",
        "scripted",
        "--seed",
        str(SEED),
        *extra,
    ]
    print(f"== python -m cuda_llm_lsp.cli {' '.join(command)} --base-url <scripted>", flush=True)
    with ScriptedLlmServer(steps) as server:
        started = time.monotonic()
        try:
            done = subprocess.run(
                [sys.executable, "-m", "cuda_llm_lsp.cli", *command, "--base-url", server.base_url],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            return {"error": f"optimize did not finish in {timeout:.0f} s", "timed_out": True}
        wall = time.monotonic() - started
    print(f"   {wall:.1f} s, exit {done.returncode}", flush=True)
    try:
        result: dict[str, Any] = json.loads(done.stdout)
    except ValueError:
        tail = (done.stdout[-800:] + done.stderr[-1500:]).strip()
        return {"error": f"optimize printed no JSON (exit {done.returncode}): {tail}"}
    result["wall_s"] = round(wall, 1)
    result["exit_code"] = done.returncode
    result["stderr"] = done.stderr
    return result


def loop_speedup(outcome: Mapping[str, Any], baseline_ms: float | None) -> float | None:
    """The loop's speedup of one candidate: its message ("1.84x") or baseline / its median."""
    found = re.match(r"^(\d+(?:\.\d+)?)x$", outcome.get("message") or "")
    if found:
        return float(found.group(1))
    if baseline_ms and outcome.get("ms"):
        return float(baseline_ms) / float(outcome["ms"])
    return None


def fmt(x: float | None) -> str:
    return f"{x:.2f}x" if x is not None else "-"


@dataclass(frozen=True)
class Launch:
    """One kernel's launch at the timed case, in numbers."""

    grid: tuple[int, ...]
    block: tuple[int, ...]
    smem: int = 0

    def describe(self) -> str:
        return f"grid={list(self.grid)} block={list(self.block)} smem={self.smem}"


@dataclass(frozen=True)
class Buffer:
    """A pointer argument: float32, `elements` long; outputs are left uninitialised."""

    name: str
    elements: int
    output: bool = False
    normal_std: float | None = None  # inputs: normal(0, std); None: uniform(-1, 1)


class IndependentTimer:
    """CuPy's own measurement of original vs candidate (see the module docstring)."""

    SPIN = r"""extern "C" __global__ void spin(unsigned long long ns) {
    unsigned long long s, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(s));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - s < ns);
}"""

    def __init__(self) -> None:
        import cupy  # the device image has it; imported here so CPU runs never need it

        self.cp = cupy
        l2 = cupy.cuda.runtime.getDeviceProperties(0)["l2CacheSize"]
        # flushed by a read, as the evaluator does (a fill leaves dirty lines to write back)
        self.flush = cupy.zeros(2 * int(l2) // 8, dtype=cupy.int64)
        self.spin = cupy.RawModule(code=self.SPIN).get_function("spin")

    def speedup(
        self,
        kernel: str,
        sources: tuple[str, str],
        launches: tuple[Launch, Launch],
        buffers: Sequence[Buffer],
        order: Sequence[str],
        scalars: Mapping[str, int],
    ) -> tuple[float, float, float]:
        """(original median ms, candidate median ms, speedup): `sources[i]` launched with
        `launches[i]`, arguments in `order` (buffer names and int32 scalars)."""
        cp = self.cp
        funcs = []
        for source, launch in zip(sources, launches, strict=True):
            func = cp.RawModule(code=source, options=("--std=c++17",)).get_function(kernel)
            if launch.smem > SMEM_DEFAULT_LIMIT:
                func.max_dynamic_shared_size_bytes = launch.smem
            funcs.append(func)
        rng = cp.random.RandomState(SEED)
        sets = []
        for _ in range(3):  # a cache keyed on inputs sees a new set every launch
            arrays = {}
            for b in buffers:
                if b.output:
                    arrays[b.name] = cp.empty(b.elements, dtype=cp.float32)
                elif b.normal_std is not None:
                    arrays[b.name] = rng.standard_normal(b.elements, dtype=cp.float32) * cp.float32(
                        b.normal_std
                    )
                else:
                    arrays[b.name] = rng.uniform(-1, 1, b.elements, dtype=cp.float32)
            sets.append(arrays)
        times: list[list[float]] = [[], []]
        events = []
        for i in range(LAUNCHES + 5):
            arrays = sets[i % len(sets)]
            args = tuple(arrays[p] if p in arrays else cp.int32(scalars[p]) for p in order)
            for which in (i % 2, 1 - i % 2):  # A B, then B A: neither always goes first
                launch = launches[which]
                self.spin((1,), (1,), (cp.uint64(1_500_000),))
                self.flush.sum()
                start, end = cp.cuda.Event(), cp.cuda.Event()
                start.record()
                funcs[which](launch.grid, launch.block, args, shared_mem=launch.smem)
                end.record()
                if i >= 5:
                    events.append((which, start, end))
        cp.cuda.Device().synchronize()
        for which, start, end in events:
            times[which].append(cp.cuda.get_elapsed_time(start, end))
        base, cand = statistics.median(times[0]), statistics.median(times[1])
        return base, cand, base / cand
