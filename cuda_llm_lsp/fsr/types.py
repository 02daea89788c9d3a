"""Plain data of an optimization run: config, progress events and the result."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from cuda_llm_lsp.config import DEFAULT_MAX_TOKENS, Settings
from cuda_llm_lsp.evaluate.types import EvalResult, Status
from cuda_llm_lsp.source.kernels import Kernel
from cuda_llm_lsp.source.spec import TestSpec
from cuda_llm_lsp.source.spec.launch import LaunchConfig


@dataclass(frozen=True, kw_only=True)
class OptimizeConfig:
    rounds: int = 4
    candidates: int = 4
    model: str = "gpt-4o-mini"
    base_url: str | None = None  # None: the openai SDK reads OPENAI_BASE_URL
    api_key: str | None = field(default=None, repr=False)  # None: OPENAI_API_KEY
    request_timeout_s: float = 180.0
    max_retries: int = 4
    concurrency: int = 4  # LLM requests in flight at once
    temperature: float | None = None  # None: not sent (reasoning models refuse one)
    max_output_tokens: int = DEFAULT_MAX_TOKENS  # reasoning and answer together
    reasoning_effort: str | None = None  # None: not sent; "low" / "medium" / "high" ...
    top_k: int = 2  # candidates carried into the next round
    patience: int = 2  # rounds without gain before stopping early
    time_budget_s: float | None = None
    token_budget: int | None = None
    record_dir: str | None = None
    replay_dir: str | None = None
    # a replay waits as long as each recorded reply took, times this (0: answers at once; the
    # demo: 1, so its rounds can be watched)
    replay_pace: float = 0.0
    sanitize_winner: bool = True
    profile: bool = True  # where ncu is on PATH, profile the best kernel for the next prompt
    strategy: Literal["fsr", "plan"] = "fsr"  # plan: planner -> coders -> debugger (CUDAMaster)
    launch: Literal["auto", "keep", "free"] = "auto"  # candidates' own launch: fsr.launch
    repairs: int = 3  # repair attempts for a failing candidate before it counts as failed
    # a correct candidate whose launch block declares tunables is tuned before it is ranked
    # (fsr/tuning.py): at most this many configurations (0: not tuned, its default ranks) ...
    tune_points: int = 16
    tune_budget_s: float = 60.0  # ... within this many seconds of search per candidate


def config_from_settings(settings: Settings, **overrides: Any) -> OptimizeConfig:
    """The run's config from the shared settings (model, endpoint, rounds, candidates, sampling);
    `overrides` that are None keep the settings' values."""
    values: dict[str, Any] = {
        "rounds": settings.rounds,
        "candidates": settings.candidates,
        "model": settings.model,
        "base_url": settings.base_url,
        "api_key": settings.api_key,
        "max_output_tokens": settings.max_tokens,
        "temperature": settings.temperature,
        "reasoning_effort": settings.reasoning_effort,
        "strategy": settings.strategy,
        "launch": settings.launch,
        "repairs": settings.repairs,
    }
    values.update({k: v for k, v in overrides.items() if v is not None})
    return OptimizeConfig(**values)


@dataclass(frozen=True, kw_only=True)
class OptimizeRequest:
    """What to optimize: one kernel of one file's text (as the editor or the disk has it)."""

    file_text: str
    kernel: str
    path: Path | None = None  # where the text lives; its directory resolves includes and inputs
    settings: Settings = field(default_factory=Settings)
    seed: int | None = None  # None: a fresh random seed (recorded in the result)
    # the kernel and its spec as the caller's gate found them (`engine.actions`): `prepare`
    # takes them; None (the loop run by itself: tests, scripts) has `prepare` find them
    found: tuple[Kernel, TestSpec] | None = None


@dataclass(frozen=True)
class CandidateTuning:
    """What tuning a candidate's tunables found (`tune.search.TuneResult`, summed up)."""

    strategy: str  # "exhaustive" / "sample"
    measured: int  # configurations measured
    failed: int  # of those, not correct (compile errors, wrong output, launches the GPU refuses)
    space_size: int  # configurations before restrictions
    default: dict[str, int]  # the candidate's own default configuration
    default_ms: float | None  # its time (None: it was not measured correct)
    best: dict[str, int] | None  # the fastest finalist that passed again; None: none did
    best_ms: float | None
    spread: float | None  # slowest correct configuration's time / fastest's
    stopped: str | None  # "budget" when the search was cut short
    feedback: str  # what the next prompt tells the model (`tune.candidate.feedback`)

    def to_json(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "points": self.measured,
            "failed": self.failed,
            "space_size": self.space_size,
            "best": self.best,
            "best_ms": self.best_ms,
            "default": self.default,
            "default_ms": self.default_ms,
            "spread": self.spread,
            "stopped": self.stopped,
        }


@dataclass(frozen=True)
class CandidateOutcome:
    round: int  # 1-based
    index: int  # 1-based within the round
    status: Status
    ms: float | None
    message: str
    source: str  # the kernel text proposed (may be "" for llm_error)
    speedup: float | None = None
    tokens: int = 0
    registers: int | None = None
    gpu: str = ""  # the GPU that judged it, when several can: "gpu1 (NVIDIA H200)"
    launch: LaunchConfig | None = None  # its own launch block's configuration; None: the original
    # its tunables' search; then `source` and `launch` carry the best configuration, and `ms` /
    # `speedup` are that configuration's
    tuning: CandidateTuning | None = None
    reply_hash: str = ""  # `reply_hash` of the reply's code ("" without one: an llm_error)
    # what was dropped from the reply or rewritten before it was built (`source.device_only`:
    # `main`, a host launcher, `__host__`), said to the model in the next prompts
    changed: str = ""


def reply_hash(code: str) -> str:
    """A short name of a reply's extracted code (12 hex digits of its SHA-256): matches a run's
    candidates to the replies that made them, whatever their order."""
    return hashlib.sha256(code.encode("utf-8", "surrogatepass")).hexdigest()[:12]


@dataclass(frozen=True)
class RunStarted:
    kernel: str
    baseline: EvalResult
    rounds: int
    candidates: int
    launch: str = ""  # the run's word on the launch (`LaunchRule.notice`)
    launch_fixed: str | None = None  # why the launch stays fixed; None: candidates may choose


@dataclass(frozen=True)
class RoundStarted:
    round: int
    rounds: int


@dataclass(frozen=True)
class CandidateEvaluated:
    outcome: CandidateOutcome
    best: CandidateOutcome | None  # best correct candidate so far


@dataclass(frozen=True)
class CandidateStage:
    """A candidate moved on: its request was sent, its reply arrived, its evaluation began, or
    (correct, with tunables) its tuning measured `done` of `configurations`."""

    round: int
    index: int  # 0: the round's planner
    stage: Literal["requested", "generated", "evaluating", "tuning"]
    role: Literal["coder", "planner", "debugger"] = "coder"
    gpu: str = ""  # "evaluating" on several GPUs: which one ("gpu1", "node-a:gpu0")
    attempt: int = 0  # the debugger's repair attempt, 1-based
    configurations: int = 0  # "tuning": configurations planned (the space, or at most)
    done: int = 0  # "tuning": configurations measured so far


@dataclass(frozen=True)
class RunFinished:
    result: OptimizeResult


ProgressEvent = RunStarted | RoundStarted | CandidateStage | CandidateEvaluated | RunFinished


@dataclass(frozen=True)
class OptimizeResult:
    kernel: str
    baseline_ms: float | None
    best_ms: float | None
    speedup: float | None
    accepted: bool  # a candidate beat the baseline beyond noise and passed re-validation
    candidates: tuple[CandidateOutcome, ...]
    best_source: str | None
    message: str  # plain words: "1.84x faster, 4/4 cases" / "no improvement: ..." / errors
    cases_passed: int = 0
    cases_total: int = 0
    run_id: int | None = None
    seed: int | None = None
    tokens: int = 0
    baseline_result: EvalResult | None = None
    best_result: EvalResult | None = None
    cancelled: bool = False
    error: str | None = None  # why the run could not proceed (no spec, endpoint down...)
    best_launch: LaunchConfig | None = None  # the winner's own launch; None: the original's
    launch_fixed: str | None = None  # why candidates could not choose their launch this run
    # Nsight Compute's top lines ([profile]): {"original": {"lines": [...]}, "best": {"round",
    # "index", "lines": [...]}}, each line {"line", "kernel_line", "text", "kinds", ...}
    profile_lines: dict[str, Any] | None = None
    # which compiler built the original and the candidates: "nvrtc", else "nvcc" where NVRTC
    # could not build the file (`evaluate.nvcc_build`); None when nothing was built
    builder: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The CLI contract's JSON object."""
        return {
            "kernel": self.kernel,
            "baseline_ms": self.baseline_ms,
            "best_ms": self.best_ms,
            "speedup": self.speedup,
            "accepted": self.accepted,
            "candidates": [
                {
                    "round": c.round,
                    "index": c.index,
                    "status": c.status,
                    "ms": c.ms,
                    "message": c.message,
                    "launch": _launch_json(c.launch),
                    "tuning": c.tuning.to_json() if c.tuning else None,
                    "reply_hash": c.reply_hash,
                }
                for c in self.candidates
            ],
            "best_source": self.best_source,
            "launch": _launch_json(self.best_launch),
            "launch_fixed": self.launch_fixed,
            "profile_lines": self.profile_lines,
            "builder": self.builder,
        }


def _launch_json(config: LaunchConfig | None) -> dict[str, Any] | None:
    """A candidate's own launch in the CLI contract's JSON; None: the original's."""
    if config is None:
        return None
    return {"grid": list(config.grid), "block": list(config.block), "smem": config.smem}
