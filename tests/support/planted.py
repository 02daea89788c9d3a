"""Planted candidates for end-to-end FSR runs on a GPU: bad ones with the status each must get,
and one (or more) correct faster ones. Used by `tests/gpu/test_fsr_gpu.py` and
`benchmarks/fsr_planted.py`; the scripted model serves them by (round, candidate) through the
prompt's "round R, candidate I of N" line.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.scripted_llm import kernel_reply

ROOT = Path(__file__).resolve().parents[2]
# the scenarios whose scripted model serves the planted repairs: `plan`, and FSR with them
# ("fsr-repair"); plain "fsr" answers every repair 400, so its planted statuses stand
REPAIRED = ("plan", "fsr-repair")


@dataclass(frozen=True)
class Planted:
    round: int
    index: int
    reply: str  # the model's whole reply
    status: str  # what the loop must report for it ("a/b": either)
    note: str


@dataclass(frozen=True)
class PlantedRun:
    kernel: str
    file: Path
    rounds: int
    candidates: int
    planted: tuple[Planted, ...]
    winner: str  # a marker in the source of the candidate that must win
    also_winning: tuple[str, ...] = ()  # markers of other planted faster kernels
    # the debugger's first repair of a slot (its reply, and the status the slot then ends with),
    # served in the scenarios of REPAIRED; every other repair request is answered 400 (script
    # exhausted), so the planted failure stands
    repairs: tuple[Planted, ...] = ()

    def steps(self) -> list[dict[str, Any]]:
        """Steps for `ScriptedLlmServer`: each routed to its (round, candidate)."""
        return [
            {
                "text": p.reply,
                "match": f"This is round {p.round}, candidate {p.index} of {self.candidates}.",
            }
            for p in self.planted
        ]

    def plan_steps(self) -> list[dict[str, Any]]:
        """Steps for a `--strategy plan` run: a planner's plans each round, the coders' replies
        (routed as in `steps`: a coder's prompt keeps the "round R, candidate I of N" line), and
        the planted repairs."""
        plans = [
            {"technique": f"Planted plan {i}", "why": "a scripted planner", "expected": "-"}
            for i in range(1, self.candidates + 1)
        ]
        planner = {
            "text": "```json\n" + json.dumps(plans) + "\n```",
            "match": f"Propose {self.candidates} distinct plans",
            "repeat": self.rounds,
        }
        repairs = [
            {"text": p.reply, "match": f"round {p.round}, candidate {p.index}, repair 1 of"}
            for p in self.repairs
        ]
        return [planner, *self.steps(), *repairs]

    def repair_steps(self) -> list[dict[str, Any]]:
        """The planted repairs, for an FSR run that serves them ("fsr-repair")."""
        return [
            {"text": p.reply, "match": f"round {p.round}, candidate {p.index}, repair 1 of"}
            for p in self.repairs
        ]

    def won(self, best_source: str | None, strategy: str = "fsr") -> bool:
        """Whether `best_source` is one of the planted faster kernels (or repairs)."""
        markers = (self.winner, *self.also_winning)
        if strategy in REPAIRED:
            markers += tuple(_marker(p.reply) for p in self.repairs if p.status == "ok")
        return bool(best_source) and any(marker in (best_source or "") for marker in markers)

    def expected(self, strategy: str = "fsr") -> dict[tuple[int, int], str]:
        statuses = {(p.round, p.index): p.status for p in self.planted}
        if strategy in REPAIRED:
            statuses.update({(p.round, p.index): p.status for p in self.repairs})
        return statuses

    def mismatches(self, candidates: list[dict[str, Any]], strategy: str = "fsr") -> list[str]:
        """Where the statuses of a result's candidates differ from the planted ones."""
        got = {(c["round"], c["index"]): c["status"] for c in candidates}
        repaired = {(p.round, p.index): p for p in self.repairs} if strategy in REPAIRED else {}
        problems = []
        for planted in self.planted:
            p = repaired.get((planted.round, planted.index), planted)
            status = got.get((p.round, p.index))
            if status not in p.status.split("/"):
                problems.append(
                    f"round {p.round} candidate {p.index} ({p.note}): expected "
                    f"{p.status}, got {status}"
                )
        return problems


_CONVERGE_HEAD = 'extern "C" __global__ void converge(const float* x, float* y, int n) {\n'


def _converge(marker: str, body: str, head: str = _CONVERGE_HEAD) -> str:
    return kernel_reply(
        head
        + f"  // variant: {marker}\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        + body
        + "}\n",
        note=f"Candidate ({marker}).",
    )


def _loop(iterations: int, condition: str = "i < n") -> str:
    return (
        f"  if ({condition}) {{\n    float v = x[i], acc = 0.0f;\n"
        f"    for (int k = 0; k < {iterations}; ++k) acc = fmaf(acc, 0.5f, v);\n"
        "    y[i] = acc;\n  }\n"
    )


CONVERGE = PlantedRun(
    kernel="converge",
    file=ROOT / "tests" / "gpu" / "data" / "fsr_converge.cu",
    rounds=2,
    candidates=4,
    winner="variant: good",
    planted=(
        Planted(
            1,
            1,
            _converge("typo", _loop(64).replace("acc = fmaf", "acc = fmadd")),
            "compile_error",
            "calls an undefined function",
        ),
        Planted(
            1,
            2,
            _converge("long", _loop(64), _CONVERGE_HEAD.replace("int n", "long n")),
            "signature_mismatch",
            "changes a parameter's type",
        ),
        Planted(
            1,
            3,
            _converge("triple", "  if (i < n) y[i] = 3.0f * x[i];\n"),
            "wrong_output",
            "computes 3x",
        ),
        Planted(1, 4, _converge("slow", _loop(4096)), "slower", "4x the iterations"),
        Planted(2, 1, _converge("good", _loop(64)), "ok", "same fixed point, 16x fewer steps"),
        Planted(
            2,
            2,
            _converge("short", _loop(64, "i < n - 1")),
            "unwritten_output",
            "skips the last element",
        ),
        Planted(
            2,
            3,
            _converge("past", _loop(64, "i <= n")),
            "out_of_bounds",
            "writes one element past the end",
        ),
        Planted(
            2,
            4,
            "I would unroll the loop and use fast math intrinsics.",
            "llm_error",
            "no code block",
        ),
    ),
    repairs=(Planted(1, 1, _converge("repaired", _loop(64)), "ok", "the typo fixed: fmaf"),),
)


_SUM_HEAD = (
    "template <int BLOCK>\n__global__ void block_sum(const float* x, float* total, int n) {\n"
)
_WARP_REDUCE = """\
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
  __shared__ float warp_sums[BLOCK / 32];
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = acc;
  __syncthreads();
  if (threadIdx.x < 32) {
    float v = threadIdx.x < BLOCK / 32 ? warp_sums[threadIdx.x] : 0.0f;
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    if (threadIdx.x == 0) atomicAdd(total, v);
  }
"""

REDUCTION = PlantedRun(
    kernel="block_sum",
    file=ROOT / "examples" / "reduction.cu",
    rounds=1,
    candidates=4,
    winner="variant: grouped",
    also_winning=("variant: shuffled",),
    planted=(
        Planted(
            1,
            1,
            kernel_reply(
                _SUM_HEAD + "  // variant: grouped\n"
                "  // one block in 8 sums 8 slices: 8x fewer atomics on `total`\n"
                "  constexpr int GROUP = 8;\n"
                "  if (blockIdx.x % GROUP != 0) return;\n"
                "  float acc = 0.0f;\n"
                "#pragma unroll\n"
                "  for (int g = 0; g < GROUP; ++g) {\n"
                "    int i = (blockIdx.x + g) * BLOCK + threadIdx.x;\n"
                "    if (i < n) acc += x[i];\n"
                "  }\n" + _WARP_REDUCE + "}\n"
            ),
            "ok",
            "warp shuffles and 8x fewer atomics",
        ),
        Planted(
            1,
            2,
            kernel_reply(
                _SUM_HEAD + "  // variant: lost\n"
                "  int i = blockIdx.x * BLOCK + threadIdx.x;\n"
                "  float acc = i < n ? x[i] : 0.0f;\n"
                "  for (int off = 16; off > 0; off >>= 1)\n"
                "    acc += __shfl_down_sync(0xffffffffu, acc, off);\n"
                "  if (threadIdx.x == 0) atomicAdd(total, acc);  // only warp 0's sum\n}\n"
            ),
            "wrong_output",
            "drops 7 of 8 warps",
        ),
        Planted(
            1,
            3,
            kernel_reply(
                _SUM_HEAD + "  // variant: shuffled\n"
                "  int i = blockIdx.x * BLOCK + threadIdx.x;\n"
                "  float acc = i < n ? x[i] : 0.0f;\n" + _WARP_REDUCE + "}\n"
            ),
            "ok/slower",
            "warp shuffles, one atomic per block",
        ),
        Planted(
            1,
            4,
            kernel_reply(_SUM_HEAD + "  // variant: broken\n  float acc = x[threadIdx.x] +;\n}\n"),
            "compile_error",
            "syntax error",
        ),
    ),
)

RUNS = {"converge": CONVERGE, "reduction": REDUCTION}


def _marker(reply: str) -> str:
    found = re.search(r"variant: [\w-]+", reply)
    return found.group(0) if found else "\0"
