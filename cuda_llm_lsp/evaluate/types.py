"""Plain data in and out of the evaluator (no CUDA imports here: the CPU side uses these too)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from cuda_llm_lsp.compile.types import Resources

if TYPE_CHECKING:  # annotations only: the GPU worker imports this module without the source
    from cuda_llm_lsp.cancel import CancelToken  # model (tree-sitter) and starts faster
    from cuda_llm_lsp.source.spec import TestSpec

# The candidate statuses of the CLI contract (docs/design.md).
Status = Literal[
    "ok",
    "compile_error",
    "signature_mismatch",
    "bad_launch",
    "wrong_output",
    "unwritten_output",
    "out_of_bounds",
    "input_modified",
    "nondeterministic",
    "stale_after_timing",
    "timeout",
    "fault",
    "launch_error",
    "sanitizer",
    "llm_error",
    "slower",
]
STATUSES: tuple[str, ...] = Status.__args__  # type: ignore[attr-defined]


@dataclass(frozen=True)
class KernelBinary:
    """A compiled kernel ready to load: what the worker receives."""

    source_name: str  # the kernel's name in the source ("transpose")
    entry: str  # the lowered symbol to load (mangled for C++ kernels)
    cubin: bytes
    arch: str
    resources: Resources | None = None
    kernel_source: str = ""  # the kernel text it was built from (history, recorded evaluation)
    defines: tuple[str, ...] = ()  # "NAME=value" it was compiled with: a tuned configuration
    kernel_line: int = 0  # 0-based line of the compiled file where `kernel_source` starts
    # which compiler built it: NVRTC's device unit, else `nvcc -cubin` (`evaluate.nvcc_build`)
    builder: str = "nvrtc"


@dataclass(frozen=True)
class Timing:
    median_ms: float
    spread_pct: float  # interquartile range / median, in percent
    min_ms: float
    max_ms: float
    samples: int


@dataclass(frozen=True)
class CaseOutcome:
    index: int
    sizes: dict[str, int]
    status: Status
    message: str = ""


@dataclass(frozen=True)
class DeviceFacts:
    """What the prompt and the reports say about the GPU; bandwidth and peaks are measured."""

    name: str
    compute_capability: tuple[int, int]
    arch: str  # "sm_90"
    sm_count: int
    max_threads_per_block: int
    shared_per_block: int
    shared_per_block_optin: int
    shared_per_sm: int
    registers_per_block: int
    registers_per_sm: int
    l2_bytes: int
    memory_bytes: int
    clock_khz: int
    memory_clock_khz: int
    memory_bus_width: int
    copy_bandwidth_gbs: float | None = None  # measured device-to-device copy, read + write
    peak_fp32_gflops: float | None = None  # measured, for the suite's floor
    peak_bf16_gflops: float | None = None


@dataclass(frozen=True)
class EvalResult:
    status: Status
    message: str  # for a person and an LLM: case, sizes, first bad index, expected vs got
    seed: int
    cases: tuple[CaseOutcome, ...] = ()
    baseline: Timing | None = None  # timed case, measured in the same process run
    candidate: Timing | None = None
    speedup: float | None = None  # baseline median / candidate median
    bytes_moved: int = 0  # bytes of the spec's buffers read + written in the timed case
    bandwidth_gbs: float | None = None  # achieved, for the kernel that was timed last
    copy_bandwidth_gbs: float | None = None
    fraction_of_peak: float | None = None  # bandwidth_gbs / copy_bandwidth_gbs
    sanitizer_report: str | None = None
    gpu: str = ""  # which GPU ran it, when several can (`evaluate.devices`): "gpu1 (NVIDIA H200)"

    @property
    def cases_passed(self) -> int:
        return sum(1 for c in self.cases if c.status == "ok")

    @property
    def timing(self) -> Timing | None:
        """The timing a one-kernel summary shows: the candidate's if any, else the kernel's own
        (a `benchmark` fills `baseline`, an `evaluate` both)."""
        return self.candidate or self.baseline


class Evaluator(Protocol):
    """What the FSR loop, the CLI and the language server need from a GPU (or a recording).

    Methods block; call them from a thread. `cancel` may be called from any thread and makes the
    call in flight raise `EvaluationCancelled` promptly (the worker is killed and restarted).
    `stop` (one call's token): its cancel does the same for that call only, whenever it comes,
    even before the call has reached the worker; it never reaches a later call.
    """

    def device_facts(self) -> DeviceFacts: ...

    def benchmark(
        self,
        kernel: KernelBinary,
        spec: TestSpec,
        *,
        spec_dir: Path | None = None,
        seed: int | None = None,
        stop: CancelToken | None = None,
    ) -> EvalResult: ...

    def evaluate(
        self,
        baseline: KernelBinary,
        candidate: KernelBinary,
        spec: TestSpec,
        *,
        spec_dir: Path | None = None,
        seed: int | None = None,
        candidate_spec: TestSpec | None = None,
        stop: CancelToken | None = None,
    ) -> EvalResult: ...

    # `candidate_spec`: the candidate's own launch (the same sizes and arguments, its grid, block
    # and smem: a tuned configuration, a launch block); None: `spec`'s. The oracle keeps `spec`.

    def cancel(self) -> None: ...

    def close(self) -> None: ...


class EvaluationCancelled(Exception):
    """The evaluation was cancelled by the user."""


class NoGpuError(RuntimeError):
    """No CUDA GPU (or driver) is available: the message says what was found."""


#: What works without a GPU, said wherever a GPU was needed and none was found.
NO_GPU_WORKS_ANYWAY = (
    "`cuda-llm check`, the editor's diagnostics, `cuda-llm optimize --demo` and the editor's "
    "demo mode (cudaLlm.demo) work without one; `nvidia-smi` shows whether the driver sees a GPU"
)


def no_gpu_message(problem: BaseException | str) -> str:
    """One sentence for a missing GPU (CLI and editor alike): what was not found, what works
    anyway, where to look. A library's wording ("'cuda' is an NVIDIA driver library ...") is
    replaced by what it means; a Ray cluster's problem is not this machine's and stays as is."""
    detail = str(problem)
    if "Ray" in detail:
        return detail
    lowered = detail.lower()
    if "driver library" in lowered or "libcuda" in lowered or "no cuda driver" in lowered:
        cause = " (the NVIDIA driver, libcuda, is not installed)"
    elif not detail or "no cuda gpu" in lowered or "no cuda device" in lowered:
        cause = ""
    else:
        cause = f" ({detail.splitlines()[0][:160]})"
    return f"no CUDA GPU found on this machine{cause}: {NO_GPU_WORKS_ANYWAY}"


class BaselineFailed(RuntimeError):
    """The original kernel (the oracle) fails its own spec: no candidate can be judged."""
