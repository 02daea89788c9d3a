"""Settings shared by the CLI and the language server.

Frozen, keyword-only, with defaults; `settings_from_mapping` never raises on bad input: it
returns the defaults for what it could not read and a list of messages to show. JSON lets a
client send anything (`1e400` parses as infinity, NaN, 10**30, objects, megabyte strings):
each value is checked for its type, range and size before it is converted.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

DEFAULT_ARCH = "sm_90"
DEFAULT_MODEL = "gpt-4o-mini"
DEFAULT_MAX_TOKENS = 32768  # room for a reasoning model's thinking and the kernel after it
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
STRATEGIES = ("fsr", "plan")  # FSR rounds; CUDAMaster's planner -> coders -> debugger
LAUNCH_POLICIES = ("auto", "keep", "free")  # a candidate's own launch: docs/design.md [launch]
# C++ dialects NVRTC compiles (`-std=`); c++17 is nvcc's default, torch 2.x headers need c++20
STDS = ("c++11", "c++14", "c++17", "c++20")
DEFAULT_STD = "c++17"
# when the editor runs nvcc on the whole file (`lsp.nvcc_check`): after a save, also after a
# longer pause in typing, or never; nvcc found nowhere turns it off
NVCC_CHECKS = ("save", "pause", "off")
NVCC_CHECK_ENV = "CUDA_LLM_NVCC_CHECK"  # the default, for a server started without settings


@dataclass(frozen=True, kw_only=True)
class Settings:
    arch: str | None = None  # None: the local GPU's, else DEFAULT_ARCH
    include_paths: tuple[str, ...] = ()
    defines: tuple[str, ...] = ()
    nvrtc_flags: tuple[str, ...] = ()
    std: str | None = None  # one of STDS; None: the project's (compile_commands.json), else c++17
    compile_commands_dir: str | None = None  # where compile_commands.json is (clang's -p)
    model: str = field(default_factory=lambda: os.environ.get("CUDA_LLM_MODEL", DEFAULT_MODEL))
    base_url: str | None = None  # None: OPENAI_BASE_URL, read by the SDK
    api_key: str | None = field(default=None, repr=False)  # None: OPENAI_API_KEY
    rounds: int = 4
    candidates: int = 4
    max_tokens: int = DEFAULT_MAX_TOKENS  # output tokens per request (reasoning included)
    temperature: float | None = None  # None: not sent, the model's default
    reasoning_effort: str | None = None  # None: not sent; one of REASONING_EFFORTS
    strategy: str = "fsr"  # one of STRATEGIES
    launch: str = "auto"  # one of LAUNCH_POLICIES: may candidates choose their own launch
    repairs: int = 3  # a failing candidate's repair attempts (both strategies) before it fails
    debounce_ms: int = 100  # benchmarks/lsp_latency.py: ~175 ms change -> diagnostics on 2 cores
    compile_timeout_s: int = 10  # one NVRTC compile, past which its process is killed
    nvcc_check: str | None = None  # one of NVCC_CHECKS; None: `nvcc_check_mode`'s default
    # one whole-file nvcc check, past which it is stopped: a PyTorch extension's takes 1-5 min
    # of one core (causal-conv1d's backward file: 307 s), and a stopped one has no verdict
    nvcc_timeout_s: int = 600
    gpus: str = "all"  # local GPUs that judge candidates: "all" or ordinals "0,2"
    cluster: str | None = None  # a Ray cluster's GPUs instead: "ray://HOST:PORT" or "auto"
    # Optimize / Benchmark / Tune answer from the recordings shipped in the package (`demo`):
    # no endpoint, no GPU, every result labelled as a demo. Editors only (`cudaLlm.demo`).
    demo: bool = False
    # "Capture test spec from program" and "Verify in program" (issue 39): the user's program
    # and its arguments, run as a list (never a shell); its working directory (relative: the
    # first workspace folder's; None: that folder). User settings only (`lsp.settings`).
    capture_command: tuple[str, ...] = ()
    capture_cwd: str | None = None
    # Keep the header PCHs of front-end checks across sessions (issue 38): their compile
    # processes run without address-space randomization, so only where the user trusts the
    # code (the VS Code extension: true in a trusted workspace); the CLI never does.
    persistent_pch: bool = False


def nvcc_check_mode(settings: Settings) -> str:
    """`cudaLlm.nvccCheck` as set, else `$CUDA_LLM_NVCC_CHECK`, else `save`."""
    if settings.nvcc_check in NVCC_CHECKS:
        return settings.nvcc_check
    chosen = os.environ.get(NVCC_CHECK_ENV, "").strip().lower()
    return chosen if chosen in NVCC_CHECKS else "save"


@dataclass(frozen=True)
class Setting:
    """One `cudaLlm.*` setting: its key, the `Settings` field it sets, its range or its choices
    (`optional`: empty means unset), the CLI flag that sets it for one run (None: no flag),
    and whether an untrusted workspace's value is ignored (`restricted`: it names programs,
    files or hosts; the extension's `restrictedConfigurations`).

    `SCHEMA` is the one description: the server's checker (`settings_from_mapping`) and the
    CLI's flags read it; tests/unit/test_settings_schema.py fails when the extension's
    `package.json`, README's table or a CLI flag's range disagree with it."""

    key: str
    field: str
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    optional: bool = False
    flag: str | None = None
    restricted: bool = False


SCHEMA: tuple[Setting, ...] = (
    Setting("model", "model", flag="--model"),
    Setting("baseUrl", "base_url", flag="--base-url", restricted=True),
    Setting("rounds", "rounds", 1, 50, flag="--rounds"),
    Setting("candidates", "candidates", 1, 32, flag="--candidates"),
    Setting("strategy", "strategy", choices=STRATEGIES, flag="--strategy"),
    Setting("repairs", "repairs", 0, 10, flag="--repairs"),
    Setting("launch", "launch", choices=LAUNCH_POLICIES, flag="--launch"),
    Setting("maxTokens", "max_tokens", 256, 1_000_000, flag="--max-tokens"),
    Setting("temperature", "temperature", 0, 2, flag="--temperature"),
    Setting(
        "reasoningEffort",
        "reasoning_effort",
        choices=REASONING_EFFORTS,
        optional=True,
        flag="--reasoning-effort",
    ),
    Setting("arch", "arch", flag="--arch"),
    Setting("includePaths", "include_paths", restricted=True),
    Setting("defines", "defines"),
    Setting("nvrtcFlags", "nvrtc_flags", restricted=True),
    Setting("std", "std", choices=STDS, optional=True, flag="--std"),
    Setting("compileCommandsDir", "compile_commands_dir", restricted=True),
    Setting("compileTimeoutS", "compile_timeout_s", 1, 600, flag="--compile-timeout"),
    Setting("debounceMs", "debounce_ms", 0, 5000),
    Setting("nvccCheck", "nvcc_check", choices=NVCC_CHECKS, optional=True),
    Setting("nvccTimeoutS", "nvcc_timeout_s", 5, 1800),
    Setting("apiKey", "api_key"),
    Setting("gpus", "gpus", flag="--gpus"),
    Setting("cluster", "cluster", flag="--cluster", restricted=True),
    Setting("demo", "demo"),  # editors only: the shipped recordings answer
    Setting("captureCommand", "capture_command", restricted=True),  # editors only
    Setting("captureCwd", "capture_cwd", restricted=True),
    Setting("persistentPch", "persistent_pch", restricted=True),  # editors only
)
BY_FIELD = {entry.field: entry for entry in SCHEMA}
_KEYS = {entry.key: entry.field for entry in SCHEMA}  # "cudaLlm.<key>" -> Settings field


def _limits(name: str) -> tuple[float, float]:
    entry = BY_FIELD.get(name)
    if entry is None or entry.low is None or entry.high is None:
        return 0, 10**9
    return entry.low, entry.high


MAX_STRING = 4096  # characters of one string setting (a path, a URL, a flag)
MAX_ITEMS = 256  # entries of one list setting


def _gpus_ok(value: str) -> bool:
    """`all`, or GPU numbers (0-255) separated by commas or spaces."""
    parts = value.replace(",", " ").split()
    if value.strip().lower() == "all":
        return True
    return (
        bool(parts)
        and len(parts) <= MAX_ITEMS
        and all(p.isdigit() and int(p) <= 255 for p in parts)
    )


def _shown(value: Any) -> str:
    """A bad value as repeated in the message: a megabyte string is not echoed whole."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def settings_from_mapping(
    data: Mapping[str, Any] | None, base: Settings | None = None
) -> tuple[Settings, list[str]]:
    """Settings from `{"cudaLlm": {...}}` or the inner mapping; bad values keep `base`'s."""
    base = base or Settings()
    problems: list[str] = []
    if not data:
        return base, problems
    if not isinstance(data, Mapping):
        return base, [f"cudaLlm settings must be an object, got {type(data).__name__}"]
    inner = data.get("cudaLlm", data)
    if inner == []:  # an empty Lua table (Neovim's `{}`) is encoded as a JSON array
        return base, problems
    if not isinstance(inner, Mapping):
        return base, ["cudaLlm settings must be an object"]
    types = {f.name: f.type for f in fields(Settings)}
    changes: dict[str, Any] = {}
    for key, value in inner.items():
        name = _KEYS.get(key)
        if name is None or value is None:
            continue
        kind = types[name]
        try:
            if "tuple" in str(kind):
                if isinstance(value, str):
                    value = [value]
                if not isinstance(value, list | tuple) or not all(
                    isinstance(v, str) for v in value
                ):
                    raise TypeError("a list of strings")
                if len(value) > MAX_ITEMS or any(len(v) > MAX_STRING for v in value):
                    raise ValueError(f"at most {MAX_ITEMS} strings of {MAX_STRING} characters")
                changes[name] = tuple(value)
            elif kind == "bool":
                if not isinstance(value, bool):
                    raise TypeError("true or false")
                changes[name] = value
            elif kind == "int":
                if isinstance(value, bool) or not isinstance(value, int | float):
                    raise TypeError("a number")
                low, high = _limits(name)
                if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
                    raise ValueError(f"a whole number between {low:g} and {high:g}")  # 1e400: inf
                if not low <= value <= high:
                    raise ValueError(f"between {low:g} and {high:g}")
                changes[name] = int(value)
            elif name == "temperature":
                if isinstance(value, bool) or not isinstance(value, int | float):
                    raise TypeError("a number")
                low, high = _limits(name)
                if not low <= value <= high:
                    raise ValueError(f"between {low:g} and {high:g}")
                changes[name] = float(value)
            elif BY_FIELD[name].choices:
                choices, optional = BY_FIELD[name].choices, BY_FIELD[name].optional
                chosen = value.strip().lower() if isinstance(value, str) else None
                if chosen is None or (chosen not in choices and not (optional and chosen == "")):
                    empty = " (or empty)" if optional else ""
                    raise ValueError(f"one of {', '.join(choices)}{empty}")
                changes[name] = chosen or None  # empty (optional only): not sent
            elif name == "gpus":  # "all", "0,2", or a list of GPU numbers
                if isinstance(value, list) and all(
                    isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 255 for v in value
                ):
                    value = ",".join(str(v) for v in value)
                if not isinstance(value, str) or not _gpus_ok(value):
                    raise ValueError("'all' or a list of GPU numbers such as [0, 1]")
                changes[name] = value.strip().lower()
            else:
                if not isinstance(value, str):
                    raise TypeError("a string")
                if len(value) > MAX_STRING:
                    raise ValueError(f"a string of at most {MAX_STRING} characters")
                changes[name] = value.strip() or None if name != "model" else value.strip()
        except (TypeError, ValueError) as exc:
            shown = "<hidden>" if name == "api_key" else _shown(value)
            problems.append(f"cudaLlm.{key}: expected {exc}, got {shown}; using the default")
    if changes.get("model") == "":
        changes.pop("model")
    return replace(base, **changes), problems
