"""The CLI's one renderer of the engine's event stream, on stderr: the FSR loop's rounds x
candidates table (redrawn in place on a terminal, plain lines otherwise) and a tune search's
configurations; and `interrupt_cancels`, Ctrl-C as the run's cancel.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TextIO

from cuda_llm_lsp.engine import (
    CancelToken,
    CandidateEvaluated,
    CandidateStage,
    ConfigurationMeasured,
    Event,
    RoundStarted,
    RunFinished,
    RunStarted,
    TuneStarted,
)
from cuda_llm_lsp.fsr.types import CandidateOutcome
from cuda_llm_lsp.source.spec.tunables import describe
from cuda_llm_lsp.tune.types import Measured


@contextmanager
def interrupt_cancels(token: CancelToken, command: str) -> Iterator[None]:
    """Within: Ctrl-C cancels `token`, so the run stops at once and still reports what it has,
    instead of the process dying (the exit code is then 130)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signals reach the main thread only
        return

    def interrupted(signum: int, frame: Any) -> None:
        if not token.cancelled:
            print(f"cuda-llm {command}: interrupted; stopping", file=sys.stderr)
        # Off the handler: it may have interrupted this thread inside the token's own lock.
        threading.Thread(target=token.cancel, name="cuda-llm-interrupt", daemon=True).start()

    previous = signal.signal(signal.SIGINT, interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def configuration_line(m: Measured) -> str:
    """'BLOCK=256: ok 0.5 ms (2.00x)', or the configuration's status and first line of why."""
    if m.status != "ok":
        return f"{describe(m.config)}: {m.status}: {m.message.splitlines()[0] if m.message else ''}"
    return f"{describe(m.config)}: ok {m.ms:.4g} ms ({m.speedup or 0:.2f}x)"


_SHORT = {
    "ok": "ok", "compile_error": "compile", "signature_mismatch": "signature",
    "bad_launch": "bad-launch", "wrong_output": "wrong", "unwritten_output": "unwritten",
    "out_of_bounds": "oob",
    "input_modified": "input-mod", "nondeterministic": "nondet", "stale_after_timing": "stale",
    "timeout": "timeout", "fault": "fault", "launch_error": "launch", "sanitizer": "sanitizer",
    "llm_error": "llm-error", "slower": "slower",
}  # fmt: skip


@dataclass
class Display:
    """Shows the events on `stream`: a redrawn table on a terminal, else plain lines (a tune
    search's, always plain lines)."""

    stream: TextIO
    live: bool
    rounds: int = 0
    candidates: int = 0
    cells: dict[tuple[int, int], str] = field(default_factory=dict)
    header: str = ""
    best: CandidateOutcome | None = None
    round: int = 0
    _drawn: int = 0

    def __call__(self, event: Event) -> None:
        if isinstance(event, TuneStarted):
            default = describe(event.default)
            self._say(
                f"tuning {event.kernel} on {event.device}: default {default}, "
                f"{event.space_size} configurations before restrictions"
            )
            return
        if isinstance(event, ConfigurationMeasured):
            self._say(f"  [{event.done}/{event.planned}] {configuration_line(event.latest)}")
            return
        if isinstance(event, RunStarted):
            self.rounds, self.candidates = event.rounds, event.candidates
            timing = event.baseline.timing
            figure = f"{timing.median_ms:.4f} ms (±{timing.spread_pct:.1f}%)" if timing else "?"
            self.header = (
                f"{event.kernel}: baseline {figure}, {len(event.baseline.cases)} cases; "
                f"{_plural(event.rounds, 'round')} x {_plural(event.candidates, 'candidate')}"
            )
            self._line(self.header)
            if event.launch:
                self._line(event.launch)
        elif isinstance(event, RoundStarted):
            self.round = event.round
            if not self.live:
                self._line(f"round {event.round}/{event.rounds}")
        elif isinstance(event, CandidateStage):
            if event.role == "planner":
                if not self.live and event.stage == "requested":
                    self._line(f"  round {event.round}: planning")
                return
            if event.stage == "tuning":
                cell = f"tuning {event.done}/{event.configurations}"
                if not self.live and event.done == 0:
                    self._line(
                        f"  {event.round}.{event.index} tuning "
                        f"({_plural(event.configurations, 'configuration')})"
                    )
                self.cells[(event.round, event.index)] = cell
                if self.live:
                    self._redraw()
                return
            self.cells[(event.round, event.index)] = (
                {
                    "requested": "writing",
                    "generated": "building",
                    "evaluating": "timing",
                }[event.stage]
                if event.role != "debugger"
                else "repairing"
            )
            if event.role == "debugger" and event.stage == "requested" and not self.live:
                self._line(f"  {event.round}.{event.index} repairing (attempt {event.attempt})")
            if event.gpu:  # several GPUs: which one judges it
                self.cells[(event.round, event.index)] += f" {event.gpu}"
                self._line(f"  {event.round}.{event.index} on {event.gpu}")
        elif isinstance(event, CandidateEvaluated):
            o = event.outcome
            self.best = event.best
            cell = _SHORT.get(o.status, o.status)
            if o.status in ("ok", "slower") and o.speedup is not None:
                cell += f" {o.speedup:.2f}x"
            self.cells[(o.round, o.index)] = cell
            if not self.live:
                self._line(f"  {o.round}.{o.index} {self._plain(o)}")
        elif isinstance(event, RunFinished):
            if self.live and self._drawn:
                self._redraw()
                for o in event.result.candidates:  # the table has no room for the reasons
                    if o.status not in ("ok", "slower") and o.message.strip():
                        reason = o.message.strip().splitlines()[0][:160]
                        print(f"  {o.round}.{o.index} {o.status}: {reason}", file=self.stream)
            return
        if self.live:
            self._redraw()

    def _plain(self, o: CandidateOutcome) -> str:
        text: str = o.status
        if o.ms is not None:
            text += f" {o.ms:.4f} ms"
        if o.speedup is not None:
            text += f" {o.speedup:.2f}x"
        if o.tuning is not None and o.tuning.best is not None:
            text += " with " + " ".join(f"{k}={v}" for k, v in o.tuning.best.items())
        if o.status not in ("ok", "slower") and o.message:
            text += ": " + o.message.strip().splitlines()[0][:160]
        if self.best is not None and self.best.speedup is not None:
            text += f"  (best {self.best.speedup:.2f}x)"
        return text

    def _line(self, text: str) -> None:
        if not self.live:
            self._say(text)

    def _say(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def _redraw(self) -> None:
        width = 14
        lines = [self.header]
        lines.append(
            "round  " + "".join(f"{f'#{i}':<{width}}" for i in range(1, self.candidates + 1))
        )
        for r in range(1, self.round + 1):
            row = [self.cells.get((r, i), "") for i in range(1, self.candidates + 1)]
            lines.append(f"{r:<7}" + "".join(f"{c[: width - 1]:<{width}}" for c in row))
        if self.best is not None and self.best.speedup is not None:
            lines.append(
                f"best: {self.best.speedup:.2f}x (round {self.best.round} "
                f"candidate {self.best.index})"
            )
        out = ""
        if self._drawn:
            out += f"\x1b[{self._drawn}F\x1b[J"
        out += "\n".join(lines) + "\n"
        self.stream.write(out)
        self.stream.flush()
        self._drawn = len(lines)
