"""The hardware floor of a kernel, and the per-architecture figures a device query does not give.

floor = max(bytes / copy bandwidth, flops / peak rate). Bytes are those of the spec's buffers in
the timed case (`in` read once, `out` written once, `inout` both: the same rule as the
evaluator's achieved bandwidth: `evaluate.launch.bytes_moved`); FLOPs are the timed case's
`Case.flops` (the spec's optional `flops = "<expr>"` key, evaluated per case by the parser).
The peak is the FP32 FMA rate, or the BF16 tensor rate for kernels whose buffers are BF16/FP16:
measured where the suite measured it (`DeviceFacts.peak_*`), else the datasheet rate from the
SM count, the clock and the architecture's per-SM throughput (`ARCH_FIGURES`).

Used by the suite's report (`suite/runner.py`) and by the FSR prompt (the baseline's roofline).
Pure arithmetic: no CUDA here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from cuda_llm_lsp.evaluate.launch import bytes_moved
from cuda_llm_lsp.evaluate.types import DeviceFacts
from cuda_llm_lsp.source.spec import Case, TestSpec

Bound = Literal["memory", "compute"]


@dataclass(frozen=True)
class Floor:
    bytes: int
    flops: float | None
    bandwidth_gbs: float | None  # measured copy bandwidth (read + write) of the device
    peak_gflops: float | None  # peak for the kernel's precision
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


# ---------------------------------------------------------------------------------------------
# Per-architecture figures (CUDA C++ Programming Guide, compute capability tables; datasheets)


@dataclass(frozen=True)
class ArchFigures:
    threads_per_sm: int
    blocks_per_sm: int
    l1_shared_per_sm: int  # bytes of the unified L1 / shared memory array
    fp32_lanes_per_sm: int  # FP32 FMAs per clock per SM
    bf16_flops_per_clock_per_sm: int | None  # dense tensor-core BF16, None: none or not known


KIB = 1024
ARCH_FIGURES: dict[tuple[int, int], ArchFigures] = {
    (7, 0): ArchFigures(2048, 32, 128 * KIB, 64, None),
    (7, 5): ArchFigures(1024, 16, 96 * KIB, 64, None),
    (8, 0): ArchFigures(2048, 32, 192 * KIB, 64, 2048),  # A100: 312 TFLOP/s
    (8, 6): ArchFigures(1536, 16, 128 * KIB, 128, 1024),  # A40: 150 TFLOP/s
    (8, 7): ArchFigures(2048, 16, 192 * KIB, 128, None),
    (8, 9): ArchFigures(1536, 24, 128 * KIB, 128, 512),  # L40: 181 TFLOP/s
    (9, 0): ArchFigures(2048, 32, 256 * KIB, 128, 4096),  # H100 SXM: 989 TFLOP/s
    (10, 0): ArchFigures(2048, 32, 256 * KIB, 128, None),
    (12, 0): ArchFigures(1536, 32, 128 * KIB, 128, None),
}
MAX_REGISTERS_PER_THREAD = 255


def arch_figures(device: DeviceFacts) -> ArchFigures | None:
    return ARCH_FIGURES.get(device.compute_capability)


@dataclass(frozen=True)
class Peaks:
    fp32_gflops: float | None
    bf16_gflops: float | None
    measured: bool  # False: datasheet rates from the clock and the SM count


def device_peaks(device: DeviceFacts) -> Peaks:
    """The measured peaks where known, else the datasheet rates at the device's clock."""
    if device.peak_fp32_gflops:
        return Peaks(device.peak_fp32_gflops, device.peak_bf16_gflops, True)
    figures = arch_figures(device)
    if figures is None or not device.clock_khz:
        return Peaks(None, None, False)
    per_sm_ghz = device.sm_count * device.clock_khz / 1e6
    bf16 = figures.bf16_flops_per_clock_per_sm
    return Peaks(
        2 * figures.fp32_lanes_per_sm * per_sm_ghz, bf16 * per_sm_ghz if bf16 else None, False
    )
