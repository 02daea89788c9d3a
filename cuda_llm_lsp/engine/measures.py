"""The suite's device-wide measurements beside the judge: the device's peaks, the vendor
libraries' timings of the same operations, and each kernel's roofline floor.

The measuring programs live in `evaluate` (`evaluate/peaks.py`, `evaluate/vendor.py`: child
processes, so their CUDA contexts never meet the evaluator's worker); this module is what the
suite calls. `Peaks`, `VendorJob` and `VendorResult` are plain dataclasses, passed through.
"""

from __future__ import annotations

from cuda_llm_lsp.evaluate import peaks as _peaks
from cuda_llm_lsp.evaluate import roofline as _roofline
from cuda_llm_lsp.evaluate import vendor as _vendor
from cuda_llm_lsp.evaluate.peaks import Peaks
from cuda_llm_lsp.evaluate.roofline import Floor
from cuda_llm_lsp.evaluate.types import DeviceFacts, Evaluator
from cuda_llm_lsp.evaluate.vendor import VendorJob, VendorResult
from cuda_llm_lsp.source.spec import TestSpec

__all__ = [
    "Floor",
    "Peaks",
    "VendorJob",
    "VendorResult",
    "device_peaks",
    "dtype_label",
    "kernel_floor",
    "percent_of_floor",
    "vendor_job",
    "vendor_times",
]


def device_peaks(facts: DeviceFacts, evaluator: Evaluator) -> Peaks:
    """The device's FP32 and BF16 peaks: cached per device, else measured (vendor GEMM in a
    child process, or our own kernel through `evaluator`)."""
    return _peaks.device_peaks(facts, evaluator)


def vendor_job(path: str, kernel: str) -> VendorJob | None:
    """The vendor library's version of `kernel` (by its name), None when there is none."""
    op = _vendor.VENDOR_OPS.get(kernel)
    return _vendor.VendorJob(path, kernel, op) if op is not None else None


def vendor_times(
    jobs: list[VendorJob], l2_bytes: int
) -> tuple[dict[str, VendorResult], str | None]:
    """The vendor libraries' timings by kernel name, and a problem for the report or None."""
    return _vendor.measure(jobs, l2_bytes=l2_bytes)


def kernel_floor(spec: TestSpec, facts: DeviceFacts, peaks: Peaks | None) -> Floor | None:
    """The roofline floor of the spec's timed (last) case on this device; None without cases."""
    cases = spec.cases()
    if not cases:
        return None
    return _roofline.kernel_floor(
        spec,
        cases[-1],
        facts.copy_bandwidth_gbs,
        peaks.fp32_gflops if peaks else None,
        peaks.bf16_gflops if peaks else None,
    )


def dtype_label(spec: TestSpec) -> str:
    """ "fp32", "bf16"...: the report's data type column."""
    return _roofline.dtype_label(spec)


def percent_of_floor(floor_ms: float | None, measured_ms: float | None) -> float | None:
    return _roofline.percent_of_floor(floor_ms, measured_ms)
