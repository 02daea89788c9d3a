"""A stand-in for `engine.capture.run_capture` where there is no GPU: it writes the capture
directory the library would for one launch of `SCALE` (`out[i] = a * in[i]`, n = 1000), or
answers as a crashed program does. The editor's capture actions run everything else for real.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import numpy as np

from cuda_llm_lsp.engine.capture import RUN, CaptureOutcome, CaptureRequest, _prepare
from cuda_llm_lsp.source.capture_manifest import (
    Capture,
    CapturedParam,
    CapturedPointer,
    encode_capture,
    read_capture,
)

SCALE = """\
#include <cuda_runtime.h>

__global__ void scale(float* out, const float* in, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * in[i];
}

int main() { return 0; }
"""
N = 1000
MODE_ENV = "CUDA_LLM_FAKE_CAPTURE"  # "ok" (default) or "crash"
LOG_ENV = "CUDA_LLM_FAKE_CAPTURE_LOG"  # a file each request's command and cwd are appended to


def write_scale_capture(directory: Path, duration_ms: float = 0.25) -> Capture:
    """The capture of `scale(out, in, 2.0f, N)` on grid 4 x 256."""
    directory.mkdir(parents=True, exist_ok=True)
    values = np.arange(N, dtype=np.float32) / 7
    buffers = [
        (np.zeros(N, np.float32).tobytes(), (2 * values).astype(np.float32).tobytes()),
        (values.tobytes(), values.tobytes()),
    ]
    params: list[CapturedParam] = []
    for i, (before, after) in enumerate(buffers):
        (directory / f"p{i}.before.bin").write_bytes(before)
        (directory / f"p{i}.after.bin").write_bytes(after)
        base = 0x7F0000000000 + i * 0x10000000
        pointer = CapturedPointer(
            base, 0, len(before), len(before), f"p{i}.before.bin", f"p{i}.after.bin",
            before != after,
        )  # fmt: skip
        params.append(CapturedParam(i, 8 * i, 8, struct.pack("<Q", base), pointer))
    params.append(CapturedParam(2, 16, 4, struct.pack("<f", 2.0)))
    params.append(CapturedParam(3, 20, 4, struct.pack("<i", N)))
    capture = Capture(
        1, "_Z5scalePfPKffi", "scale(float*, float const*, float, int)", 1, (4, 1, 1),
        (256, 1, 1), 0, "NVIDIA H200", "sm_90", duration_ms, tuple(params),
    )  # fmt: skip
    (directory / "manifest.json").write_text(json.dumps(encode_capture(capture)))
    (directory / RUN).write_text(json.dumps({"version": 1, "wall_s": 1.5, "returncode": 0}))
    return capture


def fake_run_capture(request: CaptureRequest) -> CaptureOutcome:
    """What `run_capture` answers for the program, per `$CUDA_LLM_FAKE_CAPTURE`."""
    log = os.environ.get(LOG_ENV)
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write(json.dumps({"command": list(request.command), "cwd": str(request.cwd)}) + "\n")
    _prepare(request.out)
    if os.environ.get(MODE_ENV) == "crash":
        return CaptureOutcome(
            False,
            "nothing captured: the program was killed by signal 11 (it crashed); it never "
            f"launched a kernel matching {request.kernel!r} directly; kernels launched: "
            "other_kernel ×3",
            request.out,
            seen={"other_kernel": 3},
            returncode=-11,
        )
    # verify's second run names the kernel by its mangled name: the kernel "got faster"
    write_scale_capture(request.out, 0.2 if request.kernel.startswith("_Z") else 0.25)
    capture = read_capture(request.out)
    return CaptureOutcome(
        True,
        f"captured {capture.demangled} (launch 1): grid [4, 1, 1], block [256, 1, 1]",
        request.out,
        capture,
        {"scale": 1},
        0,
        0,
        1.2,
    )
