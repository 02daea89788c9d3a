"""The application layer: every use case written once, one way to reach the GPUs, one way to
cancel (docs/design.md "Engine").

Front ends (`cli`, `lsp`, `suite`) import this package, its modules and the plain `*.types`
modules of the layers below, nothing else of them (`lint-imports` holds them to it). They make a
`GpuService` for their settings, a `CancelToken` per use case, call an action
(`benchmark_in_file`, `tune_in_file`, `optimize_in_file`, `profile_in_file`; the analysis in
`engine.analysis`) and render what comes back: the `events` as they come, then the outcome or
the `Refusal`.

This package exports the engine's own names, and one name from below: `CancelToken`, which
lives under every layer (`cuda_llm_lsp/cancel.py`) so that each can take it. What an engine
module passes through from a lower layer (a plain dataclass, a rule) it names in its docstring.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cuda_llm_lsp.cancel import CancelToken
    from cuda_llm_lsp.engine.actions import (
        benchmark_in_file,
        optimize_in_file,
        profile_in_file,
        tune_in_file,
    )
    from cuda_llm_lsp.engine.build import (
        DEMO_LABEL,
        DEMO_PACE_ENV,
        EVALUATOR_ENV,
        LlmFactory,
        demo_config,
        demo_evaluator,
        demo_example,
        demo_for,
        demo_label,
        demo_pace,
        endpoint_key_missing,
        evaluator_for,
        evaluator_problem,
        gpu_evaluator,
        gpu_missing,
        gpus_problem,
        history_for_run,
        job_label,
        make_evaluator,
        make_llm,
        make_profiler,
        open_history,
        run_fsr,
    )
    from cuda_llm_lsp.engine.events import (
        CandidateEvaluated,
        CandidateStage,
        ConfigurationMeasured,
        Event,
        RoundStarted,
        RunFinished,
        RunStarted,
        Step,
        TuneStarted,
    )
    from cuda_llm_lsp.engine.gpu_service import GpuLease, GpuService
    from cuda_llm_lsp.engine.outcomes import (
        BenchmarkOutcome,
        FileEdit,
        OptimizeOutcome,
        Refusal,
        TuneOutcome,
    )
    from cuda_llm_lsp.engine.threads import detached

#: Where each name lives; imported on first use, so that `cuda-llm --help` and the helper
#: processes do not import the whole engine. The same names as the block above.
_NAMES = {
    "cuda_llm_lsp.cancel": ("CancelToken",),
    "cuda_llm_lsp.engine.actions": (
        "benchmark_in_file",
        "optimize_in_file",
        "profile_in_file",
        "tune_in_file",
    ),
    "cuda_llm_lsp.engine.build": (
        "DEMO_LABEL",
        "DEMO_PACE_ENV",
        "EVALUATOR_ENV",
        "LlmFactory",
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
        "run_fsr",
    ),
    # the FSR loop's events as they are, with the engine's own: the one `Event` union
    "cuda_llm_lsp.engine.events": (
        "CandidateEvaluated",
        "CandidateStage",
        "ConfigurationMeasured",
        "Event",
        "RoundStarted",
        "RunFinished",
        "RunStarted",
        "Step",
        "TuneStarted",
    ),
    "cuda_llm_lsp.engine.gpu_service": ("GpuLease", "GpuService"),
    "cuda_llm_lsp.engine.outcomes": (
        "BenchmarkOutcome",
        "FileEdit",
        "OptimizeOutcome",
        "Refusal",
        "TuneOutcome",
    ),
    "cuda_llm_lsp.engine.threads": ("detached",),
}
_WHERE = {name: module for module, names in _NAMES.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "DEMO_LABEL",
    "DEMO_PACE_ENV",
    "EVALUATOR_ENV",
    "BenchmarkOutcome",
    "CancelToken",
    "CandidateEvaluated",
    "CandidateStage",
    "ConfigurationMeasured",
    "Event",
    "FileEdit",
    "GpuLease",
    "GpuService",
    "LlmFactory",
    "OptimizeOutcome",
    "Refusal",
    "RoundStarted",
    "RunFinished",
    "RunStarted",
    "Step",
    "TuneOutcome",
    "TuneStarted",
    "benchmark_in_file",
    "demo_config",
    "demo_evaluator",
    "demo_example",
    "demo_for",
    "demo_label",
    "demo_pace",
    "detached",
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
    "optimize_in_file",
    "profile_in_file",
    "run_fsr",
    "tune_in_file",
]
