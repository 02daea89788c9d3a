"""Several "GPUs" on the CPU: the CUDA driver double (tests/unit/fake_cuda_driver.py) with
`CUDA_LLM_FAKE_DEVICES=N`, and an optimize round whose candidates are the double's planted
kernels, so the real worker judges them on every fake GPU (local processes or Ray actors).
"""

from __future__ import annotations

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
from cuda_llm_lsp.source.spec import parse_spec
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
    return {DRIVER_ENV: "tests.unit.fake_cuda_driver", FAKE_DEVICES_ENV: str(devices),
            "PYTHONPATH": path}  # fmt: skip


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
        self, file_text: str, path: Path | None, kernel_name: str, settings: Settings, *,
        kernel_source: str | None = None, instance: str | None = None, arch: str | None = None,
    ) -> KernelBinary | CandidateRejected:  # fmt: skip
        marker = re.search(r"variant: (\S+)", kernel_source or "")
        name = marker.group(1) if marker else "twice"
        return KernelBinary(source_name="twice", entry=name, cubin=cubin(name),
                            arch=arch or "sm_90", kernel_source=kernel_source or "")  # fmt: skip


async def optimize_round(
    evaluator: Evaluator, events: list[ProgressEvent] | None = None, **config: Any
) -> OptimizeResult:
    """One round of `len(PLANTED)` candidates on `evaluator`, the winner re-validated."""
    markers = list(PLANTED)
    llm = FakeLlm({(1, i): candidate(m) for i, m in enumerate(markers, 1)})
    settings: dict[str, Any] = {"rounds": 1, "candidates": len(markers), "profile": False,
                                "sanitize_winner": False} | config  # fmt: skip
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
