"""The hardware floor of a kernel: the least time its bytes and FLOPs can take on this device.

floor = max(bytes / copy bandwidth, flops / peak rate). Bytes are those of the spec's buffers in
the timed case (`in` read once, `out` written once, `inout` both: the same rule as the
evaluator's achieved bandwidth: `evaluate.launch.bytes_moved`); FLOPs are the timed case's
`Case.flops` (the spec's optional `flops = "<expr>"` key, evaluated per case by the parser).
The peak is the FP32 FMA rate, or the BF16 tensor rate for kernels whose buffers are BF16/FP16.
Pure arithmetic: no CUDA here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from cuda_llm_lsp.evaluate.launch import bytes_moved
from cuda_llm_lsp.source.spec import Case, TestSpec

Bound = Literal["memory", "compute"]


@dataclass(frozen=True)
class Floor:
    bytes: int
    flops: float | None
    bandwidth_gbs: float | None  # measured copy bandwidth (read + write) of the device
    peak_gflops: float | None  # measured peak for the kernel's precision
    memory_ms: float | None
    compute_ms: float | None

    @property
    def ms(self) -> float | None:
        """The floor itself: the larger of the memory and compute times that are known."""
        known = [t for t in (self.memory_ms, self.compute_ms) if t is not None]
        return max(known) if known else None

    @property
    def bound(self) -> Bound | None:
        if self.memory_ms is None and self.compute_ms is None:
            return None
        if self.memory_ms is None or (self.compute_ms or 0.0) > self.memory_ms:
            return "compute"
        return "memory"


def precision(spec: TestSpec) -> Literal["bf16", "fp32"]:
    """Which peak bounds the kernel: BF16 tensor rate if any buffer is 16-bit float, else FP32."""
    dtypes = {a.dtype for a in spec.args if a.is_pointer}
    return "bf16" if dtypes & {"bfloat16", "float16"} else "fp32"


def dtype_label(spec: TestSpec) -> str:
    """The kernel's data type for the report: its 16-bit float type if any, else its first
    floating-point buffer's type, else its first buffer's (index arrays do not count)."""
    pointer = [a.dtype for a in spec.args if a.is_pointer and a.dtype]
    for group in (("bfloat16", "float16"), ("float32", "float64")):
        found = [d for d in pointer if d in group]
        if found:
            return found[0]
    return pointer[0] if pointer else "-"


def compute_floor(
    nbytes: int,
    flops: float | None,
    bandwidth_gbs: float | None,
    peak_gflops: float | None,
) -> Floor:
    memory_ms = nbytes / (bandwidth_gbs * 1e9) * 1e3 if bandwidth_gbs and nbytes > 0 else None
    compute_ms = flops / (peak_gflops * 1e9) * 1e3 if flops and peak_gflops else None
    return Floor(nbytes, flops, bandwidth_gbs, peak_gflops, memory_ms, compute_ms)


def kernel_floor(
    spec: TestSpec,
    case: Case,
    bandwidth_gbs: float | None,
    peak_fp32_gflops: float | None,
    peak_bf16_gflops: float | None,
) -> Floor:
    peak = peak_bf16_gflops if precision(spec) == "bf16" else peak_fp32_gflops
    flops = float(case.flops) if case.flops is not None else None
    return compute_floor(bytes_moved(spec, case), flops, bandwidth_gbs, peak)


def percent_of_floor(floor_ms: float | None, measured_ms: float | None) -> float | None:
    """How close a measured time is to the floor: 100 means at the floor."""
    if not floor_ms or not measured_ms or measured_ms <= 0:
        return None
    return 100.0 * floor_ms / measured_ms
