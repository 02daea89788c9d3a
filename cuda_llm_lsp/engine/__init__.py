"""The application layer: every use case written once, one way to reach the GPUs, one way to
cancel (docs/design.md "Engine").

Front ends (`cli`, `lsp`, `suite`) import this package and the plain `*.types` modules of the
layers below, nothing else of them (`lint-imports` holds them to it). They make a `GpuService`
for their settings, a `CancelToken` per use case, call an action (`benchmark_in_file`,
`tune_in_file`, `optimize_in_file`) and render what comes back: the `events` as they come, then
the outcome or the `Refusal`.
"""

from __future__ import annotations

from cuda_llm_lsp.cancel import CancelToken
from cuda_llm_lsp.compile.analysis import (
    DEFAULT_MAX_FILE_CHARS,
    FileAnalysis,
    KernelInfo,
    add_resources,
    analyze,
    analyze_syntax,
)
from cuda_llm_lsp.compile.arch import normalize_arch
from cuda_llm_lsp.compile.isolated import DEFAULT_TIMEOUT_S, close_shared_pool, shared_pool
from cuda_llm_lsp.engine import peaks, vendor
from cuda_llm_lsp.engine.actions import benchmark_in_file, optimize_in_file, tune_in_file
from cuda_llm_lsp.engine.build import (
    DEMO_LABEL,
    EVALUATOR_ENV,
    LlmFactory,
    demo_label,
    evaluator_for,
    evaluator_problem,
    gpu_evaluator,
    history_for_run,
    make_evaluator,
    make_llm,
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
from cuda_llm_lsp.evaluate import roofline
from cuda_llm_lsp.evaluate.format import ABOVE_PEAK_REASON, format_ms, summary_line
from cuda_llm_lsp.evaluate.recorded import RecordedEvaluator, RecordingError
from cuda_llm_lsp.fsr.apply import build_check
from cuda_llm_lsp.fsr.edit import unified_diff
from cuda_llm_lsp.fsr.history import RunHistory, record_decision
from cuda_llm_lsp.fsr.replay import recorded_shape

__all__ = [
    "ABOVE_PEAK_REASON",
    "DEFAULT_MAX_FILE_CHARS",
    "DEFAULT_TIMEOUT_S",
    "DEMO_LABEL",
    "EVALUATOR_ENV",
    "BenchmarkOutcome",
    "CancelToken",
    "CandidateEvaluated",
    "CandidateStage",
    "ConfigurationMeasured",
    "Event",
    "FileAnalysis",
    "FileEdit",
    "GpuLease",
    "GpuService",
    "KernelInfo",
    "LlmFactory",
    "OptimizeOutcome",
    "RecordedEvaluator",
    "RecordingError",
    "Refusal",
    "RoundStarted",
    "RunFinished",
    "RunHistory",
    "RunStarted",
    "Step",
    "TuneOutcome",
    "TuneStarted",
    "add_resources",
    "analyze",
    "analyze_syntax",
    "benchmark_in_file",
    "build_check",
    "close_shared_pool",
    "demo_label",
    "detached",
    "evaluator_for",
    "evaluator_problem",
    "format_ms",
    "gpu_evaluator",
    "history_for_run",
    "make_evaluator",
    "make_llm",
    "normalize_arch",
    "open_history",
    "optimize_in_file",
    "peaks",
    "record_decision",
    "recorded_shape",
    "roofline",
    "run_fsr",
    "shared_pool",
    "summary_line",
    "tune_in_file",
    "unified_diff",
    "vendor",
]
