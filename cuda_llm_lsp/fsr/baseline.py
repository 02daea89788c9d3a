"""`prepare`: everything a run establishes once, before its first candidate.

The kernel and its test spec, the evaluating GPU's facts, the original built for that GPU and
benchmarked, and the prompts' unchanging part. The result is a frozen `Baseline` with every field
known, or `Unprepared` with the reason the run cannot start: the rounds never meet a missing
piece.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from cuda_llm_lsp.cancel import CancelToken
from cuda_llm_lsp.evaluate.types import (
    DeviceFacts,
    EvalResult,
    EvaluationCancelled,
    KernelBinary,
    NoGpuError,
    no_gpu_message,
)
from cuda_llm_lsp.fsr import prompts
from cuda_llm_lsp.fsr.gpu import GpuLane, Seeds
from cuda_llm_lsp.fsr.toolchain import Toolchain, build_original
from cuda_llm_lsp.fsr.types import OptimizeRequest
from cuda_llm_lsp.source.kernels import Kernel
from cuda_llm_lsp.source.spec import TestSpec


@dataclass(frozen=True)
class Baseline:
    """The original kernel, measured on the GPU that judges the candidates."""

    kernel: Kernel
    spec: TestSpec
    spec_dir: Path | None  # where the spec's relative paths (inputs hooks) resolve
    device: DeviceFacts
    binary: KernelBinary  # the original, built for `device.arch`
    result: EvalResult  # its benchmark; status "ok"
    task: prompts.TaskContext  # what every prompt of the run shares

    @property
    def arch(self) -> str:
        return self.device.arch


@dataclass(frozen=True)
class Unprepared:
    """Why the run cannot start; `result`: the original's benchmark when it got that far."""

    message: str
    result: EvalResult | None = None


async def prepare(
    request: OptimizeRequest,
    toolchain: Toolchain,
    lane: GpuLane,
    seeds: Seeds,
    *,
    profile: bool = False,
    cancel: CancelToken | None = None,
) -> Baseline | Unprepared:
    """Kernel, spec, device, baseline binary and benchmark; `Unprepared` if any is missing.
    With `profile`, the original's Nsight Compute profile where ncu runs (round 1's prompt),
    stopped by `cancel`.

    Raises only EvaluationCancelled (and asyncio's cancel): a cancel is not a failure.

    Long because it is the baseline's steps in order, each returning `Unprepared` early."""
    found = request.found or await _kernel_and_spec(request, toolchain)
    if isinstance(found, Unprepared):
        return found
    kernel, spec = found
    try:  # candidates are built for the GPU that judges them, whatever is configured
        facts = await lane.call(lane.evaluator.device_facts)
    except NoGpuError as exc:
        return Unprepared(no_gpu_message(exc))
    except (EvaluationCancelled, asyncio.CancelledError):
        raise
    except Exception as exc:
        return Unprepared(f"cannot read the GPU's properties: {exc}")
    try:
        built = await build_original(toolchain, request, kernel, spec=spec, arch=facts.arch)
    except Exception as exc:  # NVRTC missing, a broken toolkit...
        return Unprepared(f"cannot build the original {request.kernel}: {exc}")
    if not isinstance(built, KernelBinary):
        return Unprepared(f"the original {request.kernel} does not build: {built.message}")
    spec_dir = request.path.parent if request.path else None
    try:
        benchmark = await lane.call(
            lane.evaluator.benchmark, built, spec, spec_dir=spec_dir, seed=seeds.next()
        )
    except NoGpuError as exc:
        return Unprepared(no_gpu_message(exc))
    except (EvaluationCancelled, asyncio.CancelledError):
        raise
    except Exception as exc:  # BaselineFailed, a broken inputs hook...
        return Unprepared(f"cannot benchmark the original {request.kernel}: {exc}")
    if benchmark.status != "ok":
        return Unprepared(
            f"the original {request.kernel} fails its own test spec ({benchmark.status}): "
            f"{benchmark.message}",
            benchmark,
        )
    timing = benchmark.timing
    floor, peaks_measured = prompts.baseline_floor(spec, facts)
    profile_text = None
    if profile:
        try:
            profile_text = await lane.call(
                toolchain.profile, built, spec, spec_dir, cancel or CancelToken()
            )
        except (EvaluationCancelled, asyncio.CancelledError):
            raise
        except Exception:  # the profile is an extra: the roofline stands in for it
            profile_text = None
    task = prompts.TaskContext(
        kernel_name=request.kernel,
        kernel_source=kernel.span.slice(request.file_text),
        file=prompts.file_context(request.file_text, kernel),
        spec_text=kernel.spec.toml if kernel.spec else "",
        sizes=dict(spec.sizes),
        device=facts,
        baseline_resources=built.resources,
        baseline_ms=timing.median_ms if timing else None,
        baseline_spread_pct=timing.spread_pct if timing else None,
        baseline_bandwidth_gbs=benchmark.bandwidth_gbs,
        baseline_fraction_of_peak=benchmark.fraction_of_peak,
        tolerances=(spec.rtol, spec.atol),
        atol_relative=spec.atol_relative,
        floor=floor,
        peaks_measured=peaks_measured,
        baseline_profile=profile_text,
    )
    return Baseline(kernel, spec, spec_dir, facts, built, benchmark, task)


async def _kernel_and_spec(
    request: OptimizeRequest, toolchain: Toolchain
) -> tuple[Kernel, TestSpec] | Unprepared:
    """The kernel and its spec when no gate found them before the loop (the loop run by itself:
    tests, scripts); the engine's actions refuse these cases with a `Refusal` first."""
    where = str(request.path) if request.path else "the file"
    kernel = await asyncio.to_thread(toolchain.find_kernel, request.file_text, request.kernel)
    if kernel is None:
        return Unprepared(f"no kernel named {request.kernel!r} in {where}")
    spec, problems = await asyncio.to_thread(toolchain.parse_spec, kernel, request.file_text)
    if spec is None:
        if problems:
            listed = "; ".join(f"line {p.span.start.line + 1}: {p.message}" for p in problems[:5])
            return Unprepared(f"the test spec of {request.kernel} has errors: {listed}")
        draft = await asyncio.to_thread(toolchain.draft_spec, kernel, request.file_text)
        return Unprepared(
            f"no test spec for {request.kernel}: add a /* @cuda-llm */ block above the kernel "
            f"so candidates can be checked. A draft to review:\n{draft.rstrip()}"
        )
    return kernel, spec
