"""The application layer: every use case written once, one way to reach the GPUs, one way to
cancel (docs/design.md "Engine").

Front ends (`cli`, `lsp`, `suite`) import this package and the plain `*.types` modules of the
layers below, nothing else of them (`lint-imports` holds them to it). They make a `GpuService`
for their settings, a `CancelToken` per use case, call an action (`benchmark_in_file`,
`tune_in_file`, `optimize_in_file`) and render what comes back: the `events` as they come, then
the outcome or the `Refusal`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cuda_llm_lsp.cancel import CancelToken
    from cuda_llm_lsp.compile.analysis import (
        DEFAULT_MAX_FILE_CHARS,
        CompiledKernel,
        FileAnalysis,
        KernelInfo,
        add_resources,
        analyze,
        analyze_syntax,
    )
    from cuda_llm_lsp.compile.arch import normalize_arch
    from cuda_llm_lsp.compile.flags import (
        Trust,
        allowed_flags,
        define_problem,
        include_dir_problem,
        set_workspace,
    )
    from cuda_llm_lsp.compile.isolated import (
        DEFAULT_TIMEOUT_S,
        TIMEOUT_CODE,
        close_shared_pool,
        shared_pool,
    )
    from cuda_llm_lsp.compile.nvcc import NvccResult, NvccUnavailable, find_nvcc, nvcc_missing
    from cuda_llm_lsp.compile.nvcc_tier import carry_nvcc, merge_nvcc, run_nvcc, with_nvcc
    from cuda_llm_lsp.engine import peaks, vendor
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
    from cuda_llm_lsp.evaluate import roofline
    from cuda_llm_lsp.evaluate.format import ABOVE_PEAK_REASON, format_ms, peak_note, summary_line
    from cuda_llm_lsp.evaluate.line_profile import LineProfile, Profiler
    from cuda_llm_lsp.evaluate.recorded import RecordedEvaluator, RecordingError
    from cuda_llm_lsp.evaluate.timing import Plan as TimingPlan
    from cuda_llm_lsp.fsr.apply import build_check, write_check
    from cuda_llm_lsp.fsr.edit import unified_diff
    from cuda_llm_lsp.fsr.history import RunHistory, record_decision
    from cuda_llm_lsp.fsr.replay import recorded_shape

#: Where each name lives; imported on first use, so that `cuda-llm --help` and the helper
#: processes (`python -m cuda_llm_lsp.engine.peaks`) do not import the whole engine.
_WHERE = {
    "ABOVE_PEAK_REASON": "cuda_llm_lsp.evaluate.format",
    "BenchmarkOutcome": "cuda_llm_lsp.engine.outcomes",
    "CancelToken": "cuda_llm_lsp.cancel",
    "CandidateEvaluated": "cuda_llm_lsp.engine.events",
    "CandidateStage": "cuda_llm_lsp.engine.events",
    "ConfigurationMeasured": "cuda_llm_lsp.engine.events",
    "DEFAULT_MAX_FILE_CHARS": "cuda_llm_lsp.compile.analysis",
    "DEFAULT_TIMEOUT_S": "cuda_llm_lsp.compile.isolated",
    "DEMO_LABEL": "cuda_llm_lsp.engine.build",
    "EVALUATOR_ENV": "cuda_llm_lsp.engine.build",
    "Event": "cuda_llm_lsp.engine.events",
    "FileAnalysis": "cuda_llm_lsp.compile.analysis",
    "FileEdit": "cuda_llm_lsp.engine.outcomes",
    "GpuLease": "cuda_llm_lsp.engine.gpu_service",
    "GpuService": "cuda_llm_lsp.engine.gpu_service",
    "KernelInfo": "cuda_llm_lsp.compile.analysis",
    "LlmFactory": "cuda_llm_lsp.engine.build",
    "OptimizeOutcome": "cuda_llm_lsp.engine.outcomes",
    "RecordedEvaluator": "cuda_llm_lsp.evaluate.recorded",
    "RecordingError": "cuda_llm_lsp.evaluate.recorded",
    "Refusal": "cuda_llm_lsp.engine.outcomes",
    "RoundStarted": "cuda_llm_lsp.engine.events",
    "RunFinished": "cuda_llm_lsp.engine.events",
    "RunHistory": "cuda_llm_lsp.fsr.history",
    "RunStarted": "cuda_llm_lsp.engine.events",
    "Step": "cuda_llm_lsp.engine.events",
    "TuneOutcome": "cuda_llm_lsp.engine.outcomes",
    "TuneStarted": "cuda_llm_lsp.engine.events",
    "add_resources": "cuda_llm_lsp.compile.analysis",
    "analyze": "cuda_llm_lsp.compile.analysis",
    "analyze_syntax": "cuda_llm_lsp.compile.analysis",
    "benchmark_in_file": "cuda_llm_lsp.engine.actions",
    "build_check": "cuda_llm_lsp.fsr.apply",
    "write_check": "cuda_llm_lsp.fsr.apply",
    "close_shared_pool": "cuda_llm_lsp.compile.isolated",
    "demo_label": "cuda_llm_lsp.engine.build",
    "detached": "cuda_llm_lsp.engine.threads",
    "evaluator_for": "cuda_llm_lsp.engine.build",
    "evaluator_problem": "cuda_llm_lsp.engine.build",
    "format_ms": "cuda_llm_lsp.evaluate.format",
    "peak_note": "cuda_llm_lsp.evaluate.format",
    "TimingPlan": "cuda_llm_lsp.evaluate.timing:Plan",
    "gpu_evaluator": "cuda_llm_lsp.engine.build",
    "gpu_missing": "cuda_llm_lsp.engine.build",
    "gpus_problem": "cuda_llm_lsp.engine.build",
    "endpoint_key_missing": "cuda_llm_lsp.engine.build",
    "history_for_run": "cuda_llm_lsp.engine.build",
    "make_evaluator": "cuda_llm_lsp.engine.build",
    "make_llm": "cuda_llm_lsp.engine.build",
    "DEMO_PACE_ENV": "cuda_llm_lsp.engine.build",
    "demo_pace": "cuda_llm_lsp.engine.build",
    "job_label": "cuda_llm_lsp.engine.build",
    "demo_for": "cuda_llm_lsp.engine.build",
    "demo_example": "cuda_llm_lsp.engine.build",
    "demo_evaluator": "cuda_llm_lsp.engine.build",
    "demo_config": "cuda_llm_lsp.engine.build",
    "make_profiler": "cuda_llm_lsp.engine.build",
    "normalize_arch": "cuda_llm_lsp.compile.arch",
    "define_problem": "cuda_llm_lsp.compile.flags",
    "Trust": "cuda_llm_lsp.compile.flags",
    "allowed_flags": "cuda_llm_lsp.compile.flags",
    "include_dir_problem": "cuda_llm_lsp.compile.flags",
    "set_workspace": "cuda_llm_lsp.compile.flags",
    "open_history": "cuda_llm_lsp.engine.build",
    "optimize_in_file": "cuda_llm_lsp.engine.actions",
    "profile_in_file": "cuda_llm_lsp.engine.actions",
    "LineProfile": "cuda_llm_lsp.evaluate.line_profile",
    "Profiler": "cuda_llm_lsp.evaluate.line_profile",
    "peaks": "cuda_llm_lsp.engine.peaks",
    "record_decision": "cuda_llm_lsp.fsr.history",
    "recorded_shape": "cuda_llm_lsp.fsr.replay",
    "roofline": "cuda_llm_lsp.evaluate.roofline",
    "run_fsr": "cuda_llm_lsp.engine.build",
    "shared_pool": "cuda_llm_lsp.compile.isolated",
    "TIMEOUT_CODE": "cuda_llm_lsp.compile.isolated",
    "NvccUnavailable": "cuda_llm_lsp.compile.nvcc",
    "NvccResult": "cuda_llm_lsp.compile.nvcc",
    "find_nvcc": "cuda_llm_lsp.compile.nvcc",
    "nvcc_missing": "cuda_llm_lsp.compile.nvcc",
    "CompiledKernel": "cuda_llm_lsp.compile.analysis",
    "merge_nvcc": "cuda_llm_lsp.compile.nvcc_tier",
    "carry_nvcc": "cuda_llm_lsp.compile.nvcc_tier",
    "run_nvcc": "cuda_llm_lsp.compile.nvcc_tier",
    "with_nvcc": "cuda_llm_lsp.compile.nvcc_tier",
    "summary_line": "cuda_llm_lsp.evaluate.format",
    "tune_in_file": "cuda_llm_lsp.engine.actions",
    "unified_diff": "cuda_llm_lsp.fsr.edit",
    "vendor": "cuda_llm_lsp.engine.vendor",
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, _, attribute = where.partition(":")  # "module:attribute" for a renamed one
    found = importlib.import_module(module)
    value = found if module.endswith(f".{name}") else getattr(found, attribute or name)
    globals()[name] = value
    return value


__all__ = [
    "ABOVE_PEAK_REASON",
    "DEFAULT_MAX_FILE_CHARS",
    "DEFAULT_TIMEOUT_S",
    "DEMO_LABEL",
    "DEMO_PACE_ENV",
    "EVALUATOR_ENV",
    "TIMEOUT_CODE",
    "BenchmarkOutcome",
    "CancelToken",
    "CandidateEvaluated",
    "CandidateStage",
    "CompiledKernel",
    "ConfigurationMeasured",
    "Event",
    "FileAnalysis",
    "FileEdit",
    "GpuLease",
    "GpuService",
    "KernelInfo",
    "LineProfile",
    "LlmFactory",
    "NvccResult",
    "NvccUnavailable",
    "OptimizeOutcome",
    "Profiler",
    "RecordedEvaluator",
    "RecordingError",
    "Refusal",
    "RoundStarted",
    "RunFinished",
    "RunHistory",
    "RunStarted",
    "Step",
    "TimingPlan",
    "Trust",
    "TuneOutcome",
    "TuneStarted",
    "add_resources",
    "allowed_flags",
    "analyze",
    "analyze_syntax",
    "benchmark_in_file",
    "build_check",
    "carry_nvcc",
    "close_shared_pool",
    "define_problem",
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
    "find_nvcc",
    "format_ms",
    "gpu_evaluator",
    "gpu_missing",
    "gpus_problem",
    "history_for_run",
    "include_dir_problem",
    "job_label",
    "make_evaluator",
    "make_llm",
    "make_profiler",
    "merge_nvcc",
    "normalize_arch",
    "nvcc_missing",
    "open_history",
    "optimize_in_file",
    "peak_note",
    "peaks",
    "profile_in_file",
    "record_decision",
    "recorded_shape",
    "roofline",
    "run_fsr",
    "run_nvcc",
    "set_workspace",
    "shared_pool",
    "summary_line",
    "tune_in_file",
    "unified_diff",
    "vendor",
    "with_nvcc",
    "write_check",
]
