"""An `Evaluator` that answers from recorded outcomes: CPU tests, demos and CI, never for real use.

It runs nothing. Each kernel it is asked about is identified by `KernelBinary.kernel_source`
(the text the binary was built from), and the first matching entry of the recording gives the
outcome. The format (JSON file, or the same structure as a dict):

```json
{
  "device": {"name": "NVIDIA H100 80GB HBM3", "sm_count": 132},
  "baseline": {"ms": 1.0, "spread_pct": 0.5},
  "candidates": [
    {"contains": "variant: tiled", "status": "ok", "ms": 0.5},
    {"sha256": "<hex digest of the kernel source>", "status": "wrong_output",
     "message": "case 2 (n=1000): out[17] expected 1.0, got 0.0"},
    {"contains": "variant: flaky", "status": "ok", "ms": 0.4,
     "later": {"status": "nondeterministic", "message": "second run differs"}}
  ],
  "default": {"status": "wrong_output", "message": "no recorded outcome for this kernel"}
}
```

- `device`: `DeviceFacts` fields overriding a fixed H100-like default (optional).
- `baseline`: the original kernel's latency (`ms`, optional `spread_pct`, `status`, `message`).
- `candidates`: entries matched in order, by `contains` (a substring of the kernel source: tests
  put a marker comment such as `// variant: tiled` in planted candidates) or by `sha256` (of the
  UTF-8 kernel source). Fields: `status` (a contract status), `ms` (for correct ones),
  `spread_pct`, `message`, `case` (index of the failing case, default the last), `delay_s`
  (seconds the "GPU" takes, interrupted by `cancel()`), and `later`: the fields that change on
  the second and later evaluation of the same kernel (re-validation).
- `default`: the outcome of kernels no entry matches (default: `wrong_output`).
- `defines` (in an entry, with or without `contains`): `{"BLOCK": 128}` matches a binary compiled
  with `-DBLOCK=128` (`KernelBinary.defines`): per-configuration outcomes for the tuner.
  `benchmark` answers from the same entries (the tuner's baseline is a configuration too).
- `launch` (in an entry, with `contains` or `sha256`): `"grid=rows block=256 smem=0"`
  (`LaunchConfig.describe()`) matches only a candidate run with that launch (`candidate_spec`),
  so one kernel text can pass with its own launch block and fail with the original launch.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cuda_llm_lsp.cancel import CancelToken, relayed
from cuda_llm_lsp.evaluate.types import (
    STATUSES,
    CaseOutcome,
    DeviceFacts,
    EvalResult,
    EvaluationCancelled,
    KernelBinary,
    Timing,
)
from cuda_llm_lsp.source.spec import TestSpec
from cuda_llm_lsp.source.spec.launch import LaunchConfig

DEFAULT_DEVICE = DeviceFacts(
    name="NVIDIA H100 80GB HBM3 (recorded)",
    compute_capability=(9, 0),
    arch="sm_90",
    sm_count=132,
    max_threads_per_block=1024,
    shared_per_block=48 * 1024,
    shared_per_block_optin=227 * 1024,
    shared_per_sm=228 * 1024,
    registers_per_block=65536,
    registers_per_sm=65536,
    l2_bytes=50 * 1024 * 1024,
    memory_bytes=80 * 1024**3,
    clock_khz=1_980_000,
    memory_clock_khz=2_619_000,
    memory_bus_width=5120,
    copy_bandwidth_gbs=2900.0,
)


class RecordingError(ValueError):
    """The recording cannot be read or does not follow the format."""


class RecordedEvaluator:
    """Outcomes from a recording (a JSON file path or a dict in the format above)."""

    def __init__(self, recording: str | Path | Mapping[str, Any]) -> None:
        if isinstance(recording, str | Path):
            try:
                data = json.loads(Path(recording).read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise RecordingError(f"cannot read recorded outcomes {recording}: {exc}") from exc
        else:
            data = dict(recording)
        if not isinstance(data, dict):
            raise RecordingError("recorded outcomes must be a JSON object")
        self._data = data
        self._entries: list[dict[str, Any]] = list(data.get("candidates") or [])
        for entry in [data.get("baseline") or {}, data.get("default") or {}, *self._entries]:
            status = entry.get("status", "ok")
            if status not in STATUSES:
                raise RecordingError(f"unknown status {status!r} in recorded outcomes")
        fields = {f.name for f in dataclasses.fields(DeviceFacts)}
        overrides = {k: v for k, v in (data.get("device") or {}).items() if k in fields}
        if "compute_capability" in overrides:
            overrides["compute_capability"] = tuple(overrides["compute_capability"])
        self._device = dataclasses.replace(DEFAULT_DEVICE, **overrides)
        self._seen: dict[str, int] = {}
        self._cancel = threading.Event()
        self.calls: list[tuple[str, str]] = []  # (method, kernel source) for assertions
        self.launched: list[TestSpec] = []  # the candidate's spec of each `evaluate`
        self.closed = False

    # -- the Evaluator protocol -------------------------------------------------------------

    def device_facts(self) -> DeviceFacts:
        return self._device

    def benchmark(
        self,
        kernel: KernelBinary,
        spec: TestSpec,
        *,
        spec_dir: Path | None = None,
        seed: int | None = None,
        stop: CancelToken | None = None,
    ) -> EvalResult:
        self.calls.append(("benchmark", kernel.kernel_source))
        entry = self._match(kernel.kernel_source, kernel.defines) or self._baseline()
        self._wait(entry, stop)
        timing = self._timing(entry)
        status = entry.get("status", "ok")
        return EvalResult(
            status=status,
            message=str(entry.get("message", "")),
            seed=seed or 0,
            cases=self._cases(spec, status, entry),
            baseline=timing if status == "ok" else None,
        )

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
    ) -> EvalResult:
        self.calls.append(("evaluate", candidate.kernel_source))
        self.launched.append(candidate_spec or spec)
        launch = LaunchConfig.of_spec(candidate_spec or spec).describe()
        entry = self._match(candidate.kernel_source, candidate.defines, launch) or dict(
            self._data.get("default")
            or {"status": "wrong_output", "message": "no recorded outcome for this kernel"}
        )
        built = "\0".join((candidate.kernel_source, *candidate.defines))  # one per configuration
        key = hashlib.sha256(built.encode("utf-8")).hexdigest()
        self._seen[key] = self._seen.get(key, 0) + 1
        if self._seen[key] > 1 and isinstance(entry.get("later"), dict):
            entry = {**entry, **entry["later"]}
        self._wait(entry, stop)
        status = entry.get("status", "ok")
        base = self._timing(self._baseline())
        if status != "ok":
            return EvalResult(
                status=status,
                message=str(entry.get("message", "")),
                seed=seed or 0,
                cases=self._cases(spec, status, entry),
            )
        timing = self._timing(entry)
        return EvalResult(
            status="ok",
            message=str(entry.get("message", "")),
            seed=seed or 0,
            cases=self._cases(spec, "ok", entry),
            baseline=base,
            candidate=timing,
            speedup=base.median_ms / timing.median_ms,
        )

    def cancel(self) -> None:
        self._cancel.set()

    def close(self) -> None:
        self.closed = True

    # -- helpers ----------------------------------------------------------------------------

    def _baseline(self) -> dict[str, Any]:
        return dict(self._data.get("baseline") or {"ms": 1.0})

    def _match(
        self, source: str, defines: tuple[str, ...] = (), launch: str | None = None
    ) -> dict[str, Any] | None:
        digest = hashlib.sha256(source.encode("utf-8")).hexdigest()
        for entry in self._entries:
            if "launch" in entry and entry["launch"] != launch:
                continue  # an outcome for another launch of this kernel
            wanted = entry.get("defines")
            if isinstance(wanted, dict):
                if not {f"{k}={v}" for k, v in wanted.items()} <= set(defines):
                    continue
                if "contains" not in entry and "sha256" not in entry:
                    return dict(entry)
            if "contains" in entry and str(entry["contains"]) in source:
                return dict(entry)
            if "sha256" in entry and str(entry["sha256"]).lower() == digest:
                return dict(entry)
        return None

    def _wait(self, entry: Mapping[str, Any], stop: CancelToken | None) -> None:
        """The recorded call's `delay_s`, cut short by `cancel` or by `stop` (the call's own
        token: relayed only after the earlier call's cancel is forgotten, so it is never lost)."""
        self._cancel.clear()
        delay = float(entry.get("delay_s", 0.0) or 0.0)
        with relayed(stop, self._cancel.set):
            if (delay > 0 and self._cancel.wait(delay)) or (stop is not None and stop.cancelled):
                self._cancel.clear()
                raise EvaluationCancelled("evaluation cancelled")

    @staticmethod
    def _timing(entry: Mapping[str, Any]) -> Timing:
        ms = float(entry.get("ms", 1.0))
        spread = float(entry.get("spread_pct", 0.5))
        return Timing(
            median_ms=ms,
            spread_pct=spread,
            min_ms=ms * (1 - spread / 200),
            max_ms=ms * (1 + spread / 200),
            samples=100,
        )

    @staticmethod
    def _cases(spec: TestSpec, status: str, entry: Mapping[str, Any]) -> tuple[CaseOutcome, ...]:
        count = spec.case_count
        failing = int(entry.get("case", count - 1)) if status != "ok" else -1
        cases = []
        for index in range(count):
            sizes = {name: values[index] for name, values in spec.sizes.items()}
            bad = index == failing
            cases.append(
                CaseOutcome(
                    index,
                    sizes,
                    status if bad else "ok",  # type: ignore[arg-type]
                    str(entry.get("message", "")) if bad else "",
                )
            )
        return tuple(cases)
