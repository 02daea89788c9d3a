"""The hardware floor of a kernel, for the suite's report: `evaluate.roofline` holds the math,
shared with the FSR prompt."""

from cuda_llm_lsp.evaluate.roofline import (
    Bound,
    Floor,
    compute_floor,
    dtype_label,
    kernel_floor,
    percent_of_floor,
    precision,
)

__all__ = [
    "Bound",
    "Floor",
    "compute_floor",
    "dtype_label",
    "kernel_floor",
    "percent_of_floor",
    "precision",
]
