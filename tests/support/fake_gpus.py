"""Several "GPUs" on the CPU: the CUDA driver double (tests/unit/fake_cuda_driver.py) with
`CUDA_LLM_FAKE_DEVICES=N`, and an optimize round whose candidates are the double's planted
kernels, so the real worker judges them on every fake GPU (local processes or Ray actors).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.evaluate.candidate import CandidateRejected
from cuda_llm_lsp.evaluate.devices import FAKE_DEVICES_ENV
from cuda_llm_lsp.evaluate.types import Evaluator, KernelBinary
from cuda_llm_lsp.evaluate.worker import DRIVER_ENV
from cuda_llm_lsp.fsr.loop import optimize
from cuda_llm_lsp.fsr.types import OptimizeConfig, OptimizeRequest, OptimizeResult, ProgressEvent
from cuda_llm_lsp.source.kernels import find_kernels
from cuda_llm_lsp.source.spec import TestSpec, parse_spec
from tests.support.fsr_fakes import FakeLlm, FakeToolchain
from tests.unit.fake_cuda_driver import cubin

ROOT = Path(__file__).resolve().parents[2]

TWICE_FILE = """\
/* @cuda-llm
sizes.n = [1, 100, 1000, 5000]
grid = "cdiv(n, 256)"
block = 256
args.x = "float32[n]"
args.y = "out float32[n]"
args.n = "n"
*/
extern "C" __global__ void twice(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
"""

# candidate -> the status a single GPU gives it (the double's planted kernels)
PLANTED = {
    "fast": "ok",
    "nothing": "unwritten_output",
    "past_end": "out_of_bounds",
    "racy": "nondeterministic",
    "modifies_input": "input_modified",
    "illegal": "fault",
    "half": "wrong_output",
    "launch_bounds": "launch_error",
}


def driver_env(devices: int) -> dict[str, str]:
    """The environment that makes the worker (and a Ray actor's worker) use the double."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {
        DRIVER_ENV: "tests.unit.fake_cuda_driver",
        FAKE_DEVICES_ENV: str(devices),
        "PYTHONPATH": path,
    }


def candidate(marker: str) -> str:
    return (
        'extern "C" __global__ void twice(const float* x, float* y, int n) {\n'
        f"    // variant: {marker}\n"
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i < n) y[i] = 2.0f * x[i];\n}\n"
    )


class DoubleToolchain(FakeToolchain):
    """Builds a candidate into the double's "cubin" of the kernel its marker names (the
    original: `twice`), so the real worker runs it."""

    def __init__(self) -> None:
        kernel = find_kernels(TWICE_FILE)[0]
        spec, problems = parse_spec(kernel, TWICE_FILE)
        assert spec is not None, problems
        super().__init__(spec=spec)

    def build(
        self,
        file_text: str,
        path: Path | None,
        kernel_name: str,
        settings: Settings,
        *,
        kernel_source: str | None = None,
        instance: str | None = None,
        spec: TestSpec | None = None,
        arch: str | None = None,
    ) -> KernelBinary | CandidateRejected:
        marker = re.search(r"variant: (\S+)", kernel_source or "")
        name = marker.group(1) if marker else "twice"
        return KernelBinary(
            source_name="twice",
            entry=name,
            cubin=cubin(name),
            arch=arch or "sm_90",
            kernel_source=kernel_source or "",
        )


async def optimize_round(
    evaluator: Evaluator, events: list[ProgressEvent] | None = None, **config: Any
) -> OptimizeResult:
    """One round of `len(PLANTED)` candidates on `evaluator`, the winner re-validated."""
    markers = list(PLANTED)
    llm = FakeLlm({(1, i): candidate(m) for i, m in enumerate(markers, 1)})
    settings: dict[str, Any] = {
        "rounds": 1,
        "candidates": len(markers),
        "profile": False,
        "sanitize_winner": False,
    } | config
    return await optimize(
        OptimizeRequest(file_text=TWICE_FILE, kernel="twice", seed=11),
        OptimizeConfig(**settings),
        evaluator,
        llm,
        on_event=events.append if events is not None else None,
        toolchain=DoubleToolchain(),
    )


def statuses(result: OptimizeResult) -> dict[str, str]:
    """Each candidate's status, by its marker."""
    found: dict[str, str] = {}
    for c in result.candidates:
        marker = re.search(r"variant: (\S+)", c.source)
        found[marker.group(1) if marker else "?"] = c.status
    return found


def winner(result: OptimizeResult) -> str | None:
    marker = re.search(r"variant: (\S+)", result.best_source or "")
    return marker.group(1) if marker else None


# --- a small suite the double runs: NVRTC builds every kernel; candidates pick their variant ----
SUITE_FILES = {
    "saxpy.cu": """\
// Basic algebra: y = a * x + y
/* @cuda-llm
sizes.n = [1, 1000, 4096]
grid = "cdiv(n, 256)"
block = 256
args.x = "float32[n]"
args.y = "inout float32[n]"
args.a = 1.5
args.n = "n"
*/
extern "C" __global__ void saxpy(const float* x, float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
""",
    "transpose.cu": """\
// Basic algebra: out = in transposed
/* @cuda-llm
sizes.rows = [1, 17, 64]
sizes.cols = [1, 33, 96]
grid = ["cdiv(cols, 32)", "cdiv(rows, 32)"]
block = [32, 8]
args.in = "float32[rows * cols]"
args.out = "out float32[rows * cols]"
args.rows = "rows"
args.cols = "cols"
*/
extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols) {
    int x = blockIdx.x * 32 + threadIdx.x;
    for (int j = threadIdx.y; j < 32; j += 8) {
        int y = blockIdx.y * 32 + j;
        if (x < cols && y < rows) out[(size_t)x * rows + y] = in[(size_t)y * cols + x];
    }
}
""",
    "matmul.cu": """\
// Basic algebra: C = A B, square
/* @cuda-llm
sizes.n = [1, 17, 48]
grid = ["cdiv(n, 16)", "cdiv(n, 16)"]
block = [16, 16]
args.a = "float32[n * n]"
args.b = "float32[n * n]"
args.c = "out float32[n * n]"
args.n = "n"
*/
extern "C" __global__ void matmul(const float* a, const float* b, float* c, int n) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row < n && col < n) {
        float s = 0.0f;
        for (int k = 0; k < n; ++k) s += a[row * n + k] * b[k * n + col];
        c[row * n + col] = s;
    }
}
""",
}
# kernel -> the variant of each recorded candidate (round 1), and what a single GPU makes of it
SUITE_CANDIDATES = {
    "saxpy": ("fast", "slow", "nothing", "illegal"),
    "transpose": ("nothing", "slow", "fast"),
    "matmul": ("slow", "illegal"),
}
SUITE_STATUSES = {
    "saxpy": {"ok": 1, "slower": 1, "wrong_output": 1, "fault": 1},
    "transpose": {"unwritten_output": 1, "slower": 1, "ok": 1},
    "matmul": {"slower": 1, "fault": 1},
}
SUITE_WINNERS = {"saxpy": 4.0, "transpose": 4.0, "matmul": None}  # the fast variant's speedup


def write_suite(directory: Path) -> tuple[Path, Path]:
    """The suite's files under `directory`/suite and its replay under `directory`/replay (one
    round per kernel: a candidate per variant in `SUITE_CANDIDATES`)."""
    suite, replay = directory / "suite", directory / "replay"
    suite.mkdir(parents=True)
    for name, text in SUITE_FILES.items():
        (suite / name).write_text(text)
    for name, variants in SUITE_CANDIDATES.items():
        text = SUITE_FILES[f"{name}.cu"]
        kernel = text[text.index('extern "C"') :]
        (replay / name).mkdir(parents=True)
        for index, variant in enumerate(variants, 1):
            code = f"__device__ int cuda_llm_fake_variant_{variant};\n{kernel}"
            reply = {"text": f"variant {variant}\n\n```cuda\n{code}```\n", "finish_reason": "stop"}
            record = {"format": 1, "kernel": name, "round": 1, "index": index, "reply": reply}
            path = replay / name / f"{name}-r01-c{index:02d}-test.json"
            path.write_text(json.dumps(record))
    return suite, replay


def suite_rows(report: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
    """kernel -> (status, accepted, speedup to 1 decimal, candidate statuses) of a report.json."""
    return {
        r["kernel"]: (
            r["status"],
            r["accepted"],
            round(r["speedup"], 1) if r["speedup"] else None,
            r["candidate_statuses"],
        )
        for r in report["kernels"]
    }
