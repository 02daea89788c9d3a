"""What the engine is built of: the evaluator, the LLM client, the run history.

The evaluator (the local GPU, or recorded outcomes for tests and demos), the LLM client (the
endpoint, the endpoint recorded, or a replay of a recording) and the run history. Callers get
these from here and hand them to `fsr.loop.optimize`, which takes them as protocols and never
imports this module.

Passed through as the types of what is built here: `Profiler`, `RecordedEvaluator` and its
`RecordingError`, `RunHistory`, `TimingPlan` (the suite's time budget) and `recorded_shape` (a
recording's rounds and candidates).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from cuda_llm_lsp.cancel import CancelToken
from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.demo import Demo, demos
from cuda_llm_lsp.evaluate import devices, gpu
from cuda_llm_lsp.evaluate.line_profile import NcuProfiler, Profiler, RecordedProfiler
from cuda_llm_lsp.evaluate.recorded import RecordedEvaluator, RecordingError
from cuda_llm_lsp.evaluate.timing import Plan
from cuda_llm_lsp.evaluate.types import Evaluator
from cuda_llm_lsp.evaluate.worker_driver import driver_missing
from cuda_llm_lsp.fsr.client import LlmClient
from cuda_llm_lsp.fsr.endpoint import OpenAiLlm
from cuda_llm_lsp.fsr.history import RunHistory, data_dir
from cuda_llm_lsp.fsr.replay import RecordingLlm, ReplayLlm, recorded_shape
from cuda_llm_lsp.fsr.toolchain import Toolchain
from cuda_llm_lsp.fsr.types import (
    OptimizeConfig,
    OptimizeRequest,
    OptimizeResult,
    ProgressEvent,
    config_from_settings,
)

TimingPlan = Plan
__all__ = [  # what front ends use of this module
    "DEMO_LABEL",
    "DEMO_PACE_ENV",
    "EVALUATOR_ENV",
    "LlmFactory",
    "Profiler",
    "RecordedEvaluator",
    "RecordingError",
    "RunHistory",
    "TimingPlan",
    "demo_config",
    "demo_evaluator",
    "demo_example",
    "demo_for",
    "demo_label",
    "demo_pace",
    "endpoint_key_missing",
    "evaluator_for",
    "evaluator_problem",
    "gpu_evaluator",
    "gpu_missing",
    "gpus_problem",
    "history_for_run",
    "job_label",
    "make_evaluator",
    "make_llm",
    "make_profiler",
    "open_history",
    "recorded_shape",
    "run_fsr",
]

if TYPE_CHECKING:  # imported by `run_fsr` on use: `bench` and `check` start without the loop
    from cuda_llm_lsp.fsr.loop import History

#: `recorded:PATH` replaces the GPU by recorded outcomes (`evaluate.recorded`); `gpu` or unset:
#: the local GPU. Read by `make_evaluator` only: tests and demos of `optimize` and `suite`.
EVALUATOR_ENV = "CUDA_LLM_EVALUATOR"

LlmFactory = Callable[[OptimizeConfig], LlmClient]


#: What every progress, result and suggestion says while recorded outcomes stand in for the
#: GPU: the editors' demo mode (`cudaLlm.demo`), `cuda-llm optimize --demo`, and
#: `CUDA_LLM_EVALUATOR=recorded:PATH` (`demo_label`). One label, so they read alike.
DEMO_LABEL = "DEMO: recorded, not measured"

#: Scales the demo's pacing (`demo_pace`): 0 replays at once (tests), 1 (the default) at the
#: recording's own pace, so a person can follow the rounds.
DEMO_PACE_ENV = "CUDA_LLM_DEMO_PACE"


def evaluator_problem() -> str | None:
    """Why `CUDA_LLM_EVALUATOR` cannot be used (a bad value, a recording that is not a file),
    or None: for a caller to say so at start rather than at the first benchmark."""
    choice = os.environ.get(EVALUATOR_ENV, "").strip()
    if choice.startswith("recorded:"):
        path = choice.removeprefix("recorded:")
        return None if os.path.isfile(path) else f"{EVALUATOR_ENV}: no recording at {path!r}"
    if choice not in ("", "gpu"):
        return f"{EVALUATOR_ENV} must be 'gpu' or 'recorded:PATH', not {choice!r}"
    return None


def gpus_problem(gpus: str | None) -> str | None:
    """Why `gpus` (`--gpus`, `cudaLlm.gpus`) names no GPUs ("all" or numbers such as "0,2"), or
    None: a usage error to say before anything else is checked or started."""
    try:
        devices.parse_gpus(gpus)
    except ValueError as exc:
        return str(exc)
    return None


def gpu_missing() -> str | None:
    """Why no local GPU can answer, known before any compile (no driver library), or None: it
    may (recorded outcomes stand in, or the driver loads). Cheap: no process, no cuInit."""
    if os.environ.get(EVALUATOR_ENV, "").strip().startswith("recorded:"):
        return None
    return driver_missing()


def endpoint_key_missing(settings: Settings) -> bool:
    """No API key for OpenAI's own endpoint (no base URL set anywhere, no key): a real optimize
    run would be refused with 401. A local server (a base URL) needs none."""
    if settings.base_url or os.environ.get("OPENAI_BASE_URL"):
        return False
    return not (settings.api_key or os.environ.get("OPENAI_API_KEY"))


def demo_label() -> str | None:
    """`DEMO_LABEL` while `CUDA_LLM_EVALUATOR=recorded:PATH` replaces the GPU, else None."""
    return DEMO_LABEL if os.environ.get(EVALUATOR_ENV, "").strip().startswith("recorded:") else None


def job_label(settings: Settings) -> str | None:
    """The label a job started now carries: `DEMO_LABEL` under `cudaLlm.demo` or
    `CUDA_LLM_EVALUATOR=recorded:PATH`, else None (real figures)."""
    return DEMO_LABEL if settings.demo else demo_label()


def demo_pace() -> float:
    """`CUDA_LLM_DEMO_PACE` (default 1: the recording's own pace; 0: no waiting); a value that
    is not a number >= 0 counts as 1."""
    try:
        pace = float(os.environ.get(DEMO_PACE_ENV, "1"))
    except ValueError:
        return 1.0
    return pace if pace >= 0 and pace == pace else 1.0


def demo_for(kernel: str) -> Demo:
    """The shipped recording for `kernel`; ValueError naming the demos when there is none."""
    shipped = demos()
    found = shipped.get(kernel)
    if found is None:
        listed = ", ".join(f"{d.kernel} ({d.example})" for d in shipped.values())
        raise ValueError(
            f"demo mode has no recording for {kernel}; it has {listed}. Turn the demo setting "
            "off (cudaLlm.demo) to run on your GPU and model"
        )
    return found


def demo_example() -> tuple[Path, str]:
    """A fresh copy of the first shipped demo's example in the user's data directory (the
    package may be read-only, and a demo's Accept edits the file), and its kernel's name."""
    shipped = [d for d in demos().values() if d.source is not None]
    if not shipped or shipped[0].source is None:
        raise ValueError("this installation has no demo example (reinstall cuda-llm-lsp)")
    source = shipped[0].source
    target = data_dir() / "demo" / source.name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(source.read_bytes())
    return target, shipped[0].kernel


def demo_evaluator(demo: Demo) -> Evaluator:
    """The GPU's recorded answers for the demo's kernel: nothing runs on a GPU."""
    return RecordedEvaluator(demo.outcomes)


def demo_config(demo: Demo, settings: Settings) -> OptimizeConfig:
    """The demo's run: the recorded rounds and candidates, replayed from the package (no
    endpoint, no key); the user's model settings do not apply to a recording, and nothing is
    profiled (Nsight Compute would run the kernel on a GPU, if there is one)."""
    rounds, candidates = recorded_shape(demo.llm_dir, demo.kernel) or (1, 1)
    return config_from_settings(
        Settings(arch=settings.arch),
        rounds=rounds,
        candidates=candidates,
        replay_dir=str(demo.llm_dir),
        replay_pace=demo_pace(),  # the rounds at the recording's pace: a person can follow them
        profile=False,  # ncu would run on a real GPU
    )


def gpu_evaluator(plan: Plan | None = None) -> Evaluator:
    """The local GPU's evaluator, timing by `plan` (None: its default); its worker starts on use."""
    return gpu.GpuEvaluator(plan=plan)


def make_evaluator(
    plan: Plan | None = None, *, gpus: str | None = None, cluster: str | None = None
) -> Evaluator:
    """`gpu_evaluator(plan)`, or recorded outcomes when `CUDA_LLM_EVALUATOR=recorded:PATH`
    (a recording has no timing plan). Raises ValueError with `evaluator_problem()`'s words for
    any other value of the variable, or a recording that is not a file.

    `gpus` (`cudaLlm.gpus`: "all" or "0,2"; None: the first GPU alone) or `cluster`
    (`cudaLlm.cluster`: "ray://HOST:PORT", "auto"): a `GpuPool` of those GPUs, started on use;
    ValueError for a `gpus` that is not "all" or GPU numbers."""
    problem = evaluator_problem()
    if problem is not None:
        raise ValueError(problem)
    choice = os.environ.get(EVALUATOR_ENV, "").strip()
    if choice.startswith("recorded:"):
        return RecordedEvaluator(choice.removeprefix("recorded:"))
    if cluster:
        from cuda_llm_lsp.evaluate.ray_cluster import ray_pool  # imports Ray on use only

        return ray_pool(cluster, plan=plan)
    if gpus is None:
        return gpu_evaluator(plan)
    devices.parse_gpus(gpus)  # a bad value is the caller's usage error, now
    return devices.GpuPool(lambda: devices.local_devices(gpus, plan=plan))


def evaluator_for(settings: Settings, plan: Plan | None = None) -> Evaluator:
    """`make_evaluator` for the language server's settings: `cudaLlm.gpus` and `cudaLlm.cluster`
    reach the builder the CLI's `--gpus` and `--cluster` reach."""
    return make_evaluator(plan, gpus=settings.gpus, cluster=settings.cluster)


def make_llm(config: OptimizeConfig) -> LlmClient:
    """The client a run uses: a replay, or the endpoint (recorded when `record_dir` is set)."""
    if config.replay_dir:
        return ReplayLlm(config.replay_dir, pace=config.replay_pace)
    client: LlmClient = OpenAiLlm(config)
    if config.record_dir:
        client = RecordingLlm(client, config.record_dir)
    return client


def open_history() -> RunHistory:
    """The run history in the user's data directory (`CUDA_LLM_DATA_DIR` overrides it)."""
    return RunHistory()


async def history_for_run(on_error: Callable[[Exception], None]) -> RunHistory | None:
    """The run history, opened off the event loop; None after `on_error(exc)` when it cannot be
    opened: the run matters more than its record."""
    try:
        return await asyncio.to_thread(open_history)
    except Exception as exc:
        on_error(exc)
        return None


async def run_fsr(
    request: OptimizeRequest,
    config: OptimizeConfig,
    evaluator: Evaluator,
    *,
    llm_factory: LlmFactory = make_llm,
    on_event: Callable[[ProgressEvent], None] | None = None,
    cancel: CancelToken | None = None,
    history: History | None = None,
    toolchain: Toolchain | None = None,
) -> OptimizeResult:
    """`fsr.loop.optimize` with an LLM client made for `config` by `llm_factory`, closed after."""
    from cuda_llm_lsp.fsr import loop as fsr_loop  # ~60 ms of imports only runs pay

    llm = llm_factory(config)
    try:
        return await fsr_loop.optimize(
            request,
            config,
            evaluator,
            llm,
            on_event=on_event,
            cancel=cancel,
            history=history,
            toolchain=toolchain,
        )
    finally:
        await llm.close()


def make_profiler(gpus: str | None = None) -> Profiler:
    """ncu on the local GPU `gpus` selects first (`cudaLlm.gpus` / `--gpus`: "all" or None is
    GPU 0, "2,3" is GPU 2), or the profiles of a `CUDA_LLM_EVALUATOR=recorded:PATH` recording
    (CPU tests and demos: real ncu output captured earlier, no GPU). ValueError for a `gpus`
    that is not "all" or GPU numbers."""
    choice = os.environ.get(EVALUATOR_ENV, "").strip()
    if choice.startswith("recorded:"):
        return RecordedProfiler.from_recording(Path(choice.removeprefix("recorded:")))
    ordinals = devices.parse_gpus(gpus)
    return NcuProfiler(device=ordinals[0] if ordinals else 0)
