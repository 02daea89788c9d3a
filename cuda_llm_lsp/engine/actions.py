"""The use cases, each written once: benchmark, tune, optimize and profile one kernel of a file.

The CLI, the language server and the suite all call these. Each takes the file's text, the
kernel's name, the settings, the `GpuService` and the use case's `CancelToken`; it leases the
GPU with that token (so a cancel stops its GPU work at once), emits `events` as it goes and
returns a typed outcome (the edit to apply, when there is one) or a typed `Refusal`. Front ends
only render events and outcomes: how a refusal reads in a terminal or an editor is theirs.

Blocking work (parsing a large file, NVRTC, the GPU) runs in threads, so an action can run on
any event loop; the language server still runs each on a loop of its own (`detached`).
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from cuda_llm_lsp.cancel import CancelToken
from cuda_llm_lsp.compile.arch import resolve_arch
from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.engine.build import LlmFactory, make_llm, run_fsr
from cuda_llm_lsp.engine.events import ConfigurationMeasured, Event, Step, TuneStarted
from cuda_llm_lsp.engine.gpu_service import GpuLease, GpuService
from cuda_llm_lsp.engine.job_view import in_thread
from cuda_llm_lsp.engine.outcomes import (
    BenchmarkOutcome,
    FileEdit,
    OptimizeOutcome,
    Refusal,
    TuneOutcome,
)
from cuda_llm_lsp.evaluate.candidate import CandidateRejected, build_binary
from cuda_llm_lsp.evaluate.inputs import InputError
from cuda_llm_lsp.evaluate.line_profile import (
    LineProfile,
    ProfileError,
    Profiler,
    ProfileUnavailable,
    profile_lines,
)
from cuda_llm_lsp.evaluate.recorded import RecordingError
from cuda_llm_lsp.evaluate.types import BaselineFailed, DeviceFacts, NoGpuError
from cuda_llm_lsp.fsr.apply import NotApplicable, changed_region, winner_text
from cuda_llm_lsp.fsr.types import OptimizeConfig, OptimizeRequest, OptimizeResult
from cuda_llm_lsp.source.draft import draft_spec
from cuda_llm_lsp.source.kernels import Kernel, find_kernels
from cuda_llm_lsp.source.spec import TestSpec, parse_spec
from cuda_llm_lsp.source.text import offset_of
from cuda_llm_lsp.tune.edit import tuned_text
from cuda_llm_lsp.tune.search import tune_kernel
from cuda_llm_lsp.tune.types import TuneError, TuneOptions, TuneProgress, TuneRequest

if TYPE_CHECKING:  # the loop is imported by the runs that use it: bench starts without it
    from cuda_llm_lsp.fsr.loop import History

OnEvent = Callable[[Event], None]
T = TypeVar("T")


class _Refused(Exception):
    """Carries a `Refusal` out of a step; the action returns it."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal


def _emit(on_event: OnEvent | None, event: Event) -> None:
    if on_event is not None:
        on_event(event)


async def _kernel_and_spec(text: str, name: str) -> tuple[Kernel, TestSpec]:
    """The one gate of every action: the kernel named `name` and its test spec, else the refusal
    (`no_kernel`; `spec_errors` with the problems; `no_spec` with a draft to start from)."""
    found = await asyncio.to_thread(find_kernels, text)  # a large file must not hold the loop
    kernel = next((k for k in found if k.name == name), None)
    if kernel is None:
        message = f"no kernel named {name} in the document"
        if re.search(rf"\b{re.escape(name)}\s*\(", text):  # a kernel declared through a macro?
            message += (
                f" written with __global__ (one declared through a macro, such as `#define "
                f"KERNEL __global__`, gets diagnostics and figures; benchmark, profile, tune "
                f"and optimize need __global__ in front of {name})"
            )
        raise _Refused(Refusal("no_kernel", name, message))
    spec, problems = await asyncio.to_thread(parse_spec, kernel, text)
    if spec is not None:
        return kernel, spec
    if problems:
        message = f"the test spec of {kernel.name} has errors"
        raise _Refused(Refusal("spec_errors", kernel.name, message, problems=tuple(problems)))
    draft = await asyncio.to_thread(draft_spec, kernel, text)
    message = f"{kernel.name} has no test spec"
    raise _Refused(Refusal("no_spec", kernel.name, message, draft=draft))


async def _lease(gpus: GpuService, token: CancelToken, kernel: str) -> GpuLease:
    try:
        return await asyncio.to_thread(gpus.lease, token)
    except NoGpuError as exc:
        raise _Refused(Refusal("no_gpu", kernel, str(exc))) from exc
    except ImportError as exc:  # `cudaLlm.cluster` / `--cluster` without Ray
        message = f"cannot load the GPU evaluator: {exc}"
        raise _Refused(Refusal("no_gpu", kernel, message)) from exc
    except (ValueError, RecordingError) as exc:  # a bad `gpus`, a recording that is not one
        raise _Refused(Refusal("unavailable", kernel, str(exc))) from exc


async def _facts(lease: GpuLease, kernel: str) -> DeviceFacts:
    try:
        return await asyncio.to_thread(lease.evaluator.device_facts)
    except NoGpuError as exc:
        raise _Refused(Refusal("no_gpu", kernel, str(exc))) from exc


async def _judged(kernel: str, call: Callable[[], T]) -> T:
    """A GPU call in a thread; its failures that are the kernel's or the spec's are refusals."""
    try:
        return await asyncio.to_thread(call)
    except NoGpuError as exc:
        raise _Refused(Refusal("no_gpu", kernel, str(exc))) from exc
    except InputError as exc:
        raise _Refused(Refusal("bad_inputs", kernel, str(exc))) from exc
    except BaselineFailed as exc:
        raise _Refused(Refusal("baseline_failed", kernel, str(exc))) from exc
    except TuneError as exc:
        raise _Refused(Refusal("cannot_tune", kernel, str(exc))) from exc


async def _refusing(work: Awaitable[T]) -> T | Refusal:
    try:
        return await work
    except _Refused as refused:
        return refused.refusal


# --- benchmark ------------------------------------------------------------------------------


async def benchmark_in_file(
    text: str,
    path: Path | None,
    kernel: str,
    settings: Settings,
    gpus: GpuService,
    *,
    seed: int | None = None,
    cancel: CancelToken | None = None,
    on_event: OnEvent | None = None,
) -> BenchmarkOutcome | Refusal:
    """The kernel's spec cases run twice and its last case timed, on the GPU that judges it.

    The GPU worker starts (process, CUDA context, device facts) while the kernel compiles for
    the architecture expected here (`resolve_arch`); a device reporting another one gets it
    compiled again for its own, so the two overlap instead of adding up."""
    return await _refusing(_benchmark(text, path, kernel, settings, gpus, seed, cancel, on_event))


async def _benchmark(
    text: str,
    path: Path | None,
    name: str,
    settings: Settings,
    gpus: GpuService,
    seed: int | None,
    cancel: CancelToken | None,
    on_event: OnEvent | None,
) -> BenchmarkOutcome:
    kernel, spec = await _kernel_and_spec(text, name)
    with await _lease(gpus, cancel or CancelToken(), name) as lease:
        facts_ready = asyncio.ensure_future(_facts(lease, name))
        _emit(on_event, Step("compiling"))
        build = functools.partial(build_binary, text, path, name, settings, spec=spec)
        expected = await asyncio.to_thread(resolve_arch, settings)
        built = await asyncio.to_thread(build, arch=expected)
        facts = await facts_ready
        if facts.arch != expected:  # built for the GPU that judges it
            built = await asyncio.to_thread(build, arch=facts.arch)
        if isinstance(built, CandidateRejected):
            raise _Refused(Refusal("does_not_build", name, built.message, status=built.status))
        _emit(on_event, Step(f"running {spec.case_count} cases on the GPU", 30))
        spec_dir = path.parent if path else None
        result = await _judged(
            name, lambda: lease.evaluator.benchmark(built, spec, spec_dir=spec_dir, seed=seed)
        )
    return BenchmarkOutcome(name, kernel.span.slice(text), spec, result, facts, built.builder)


# --- tune -----------------------------------------------------------------------------------


async def tune_in_file(
    text: str,
    path: Path | None,
    kernel: str,
    settings: Settings,
    gpus: GpuService,
    options: TuneOptions | None = None,
    *,
    cancel: CancelToken | None = None,
    on_event: OnEvent | None = None,
) -> TuneOutcome | Refusal:
    """The search of the kernel's tunables (docs/design.md "Tuning") on the text as it is now.

    A cancel stops between configurations and interrupts the one on the GPU; the outcome still
    carries what was measured (`TuneOutcome.cancelled`). Its edit makes the best configuration
    the file's default (`#define` values, else the spec list's order)."""
    return await _refusing(_tune(text, path, kernel, settings, gpus, options, cancel, on_event))


async def _tune(
    text: str,
    path: Path | None,
    name: str,
    settings: Settings,
    gpus: GpuService,
    options: TuneOptions | None,
    cancel: CancelToken | None,
    on_event: OnEvent | None,
) -> TuneOutcome:
    kernel, spec = await _kernel_and_spec(text, name)
    if spec.tunables is None:
        message = (
            f"{name}'s spec declares no tunables: add tune.NAME = [values] and use NAME in "
            "grid/block/smem and the kernel"
        )
        raise _Refused(Refusal("no_tunables", name, message))
    token = cancel or CancelToken()
    with await _lease(gpus, token, name) as lease:
        facts = await _facts(lease, name)
        default = dict(spec.tunables.default)
        _emit(on_event, TuneStarted(name, facts.name, default, spec.tunables.space_size))
        request = TuneRequest(text, name, spec, settings, path)

        def measured(p: TuneProgress) -> None:  # on the search's thread
            _emit(on_event, ConfigurationMeasured(p.done, p.planned, p.latest))

        search = functools.partial(
            tune_kernel, request, lease.evaluator, options, on_progress=measured, cancel=token
        )
        result = await _judged(name, search)
    edit, notes = None, tuple[str, ...]()
    best = result.best
    if best is not None and best.config != result.default:
        tuned = await asyncio.to_thread(tuned_text, text, kernel, spec, best.config)
        notes = tuned.notes
        if tuned.text != text:  # else nothing could be written (a list over several lines)
            edit = _line_edit(text, tuned.text, kernel, notes)
    return TuneOutcome(name, kernel.span.slice(text), spec, result, edit, notes, facts.name)


def _kernel_range(text: str, kernel: Kernel) -> tuple[int, int]:
    return offset_of(text, kernel.span.start), offset_of(text, kernel.span.end)


def _line_edit(old: str, new: str, kernel: Kernel, notes: tuple[str, ...]) -> FileEdit:
    """The edit from `old` to `new` (`changed_region`, covering the kernel's definition), from
    the start of its first line: a tuned default sits outside the kernel."""
    keep = _kernel_range(old, kernel)
    region = changed_region(old, new, keep)
    start = max(old.rfind("\n", 0, region.start), old.rfind("\r", 0, region.start)) + 1
    new_end = region.end + len(new) - len(old)
    return FileEdit(new, start, region.end, new_end, keep[0] - start, region.end - keep[1], notes)


# --- optimize -------------------------------------------------------------------------------


async def optimize_in_file(
    text: str,
    path: Path | None,
    kernel: str,
    settings: Settings,
    config: OptimizeConfig,
    gpus: GpuService,
    *,
    llm_factory: LlmFactory = make_llm,
    history: History | None = None,
    seed: int | None = None,
    cancel: CancelToken | None = None,
    on_event: OnEvent | None = None,
) -> OptimizeOutcome | Refusal:
    """The FSR loop on the kernel; its accepted winner as an edit of the file (`winner_text`:
    the kernel, its helpers above the spec, for its own launch the spec and launch sites), one
    region covering the kernel. The loop's own failures (endpoint, no improvement) are in the
    result; a cancel returns the result with `cancelled` and no edit."""
    work = _optimize(
        text, path, kernel, settings, config, gpus, llm_factory, history, seed, cancel, on_event
    )
    return await _refusing(work)


async def _optimize(
    text: str,
    path: Path | None,
    name: str,
    settings: Settings,
    config: OptimizeConfig,
    gpus: GpuService,
    llm_factory: LlmFactory,
    history: History | None,
    seed: int | None,
    cancel: CancelToken | None,
    on_event: OnEvent | None,
) -> OptimizeOutcome:
    kernel, spec = await _kernel_and_spec(text, name)
    original = kernel.span.slice(text)
    token = cancel or CancelToken()
    with await _lease(gpus, token, name) as lease:
        await _facts(lease, name)  # no GPU: said now, not as the first candidate's failure
        request = OptimizeRequest(
            file_text=text,
            kernel=name,
            path=path,
            settings=settings,
            seed=seed,
            found=(kernel, spec),
        )
        result = await run_fsr(
            request,
            config,
            lease.evaluator,
            llm_factory=llm_factory,
            on_event=on_event,
            cancel=token,
            history=history,
        )
    if result.cancelled or not result.accepted or not result.best_source:
        return OptimizeOutcome(name, original, result)
    try:  # parses and compares the whole file: off the event loop
        edit = await asyncio.to_thread(_winner_edit, text, kernel, result)
    except NotApplicable as exc:
        return OptimizeOutcome(name, original, result, not_applicable=str(exc))
    return OptimizeOutcome(name, original, result, edit)


def _winner_edit(text: str, kernel: Kernel, result: OptimizeResult) -> FileEdit:
    """The winner in the file (raises `NotApplicable`) and the one edit to it, from the spec
    (helpers go above it) to the last launch site it rewrites."""
    assert result.best_source is not None
    applied = winner_text(text, kernel.name, result.best_source, result.best_launch)
    keep = _kernel_range(text, kernel)
    region = changed_region(text, applied.text, keep)
    new_end = region.start + len(region.text)
    lead, trail = keep[0] - region.start, region.end - keep[1]
    return FileEdit(applied.text, region.start, region.end, new_end, lead, trail, applied.notes)


# --- profile --------------------------------------------------------------------------------


async def profile_in_file(
    text: str,
    path: Path | None,
    kernel: str,
    settings: Settings,
    profiler: Profiler,
    gpus: GpuService | None = None,
    *,
    cancel: CancelToken | None = None,
    on_event: OnEvent | None = None,
) -> LineProfile | Refusal:
    """The kernel's timed case under Nsight Compute (`evaluate.line_profile.profile_lines`):
    findings per source line and a summary. With `gpus`, it runs while no other use case's call
    is on that GPU, so the counters see this kernel alone; a cancel stops the capture at once."""
    return await _refusing(_profile(text, path, kernel, settings, profiler, gpus, cancel, on_event))


async def _profile(
    text: str,
    path: Path | None,
    name: str,
    settings: Settings,
    profiler: Profiler,
    gpus: GpuService | None,
    cancel: CancelToken | None,
    on_event: OnEvent | None,
) -> LineProfile:
    kernel, spec = await _kernel_and_spec(text, name)
    token = cancel or CancelToken()
    token.on_cancel(lambda: in_thread(profiler.cancel, "cuda-llm-profile-cancel"))
    _emit(on_event, Step("compiling and running the timed case under ncu"))

    def profile() -> LineProfile:
        return profile_lines(text, path, kernel, spec, settings, profiler)

    try:
        if gpus is None:
            return await asyncio.to_thread(profile)
        with await _lease(gpus, token, name) as lease:
            return await asyncio.to_thread(lease.alone, profile)
    except ProfileUnavailable as exc:
        raise _Refused(Refusal("no_profiler", name, str(exc))) from exc
    except ProfileError as exc:
        raise _Refused(Refusal("profile_failed", name, str(exc))) from exc
