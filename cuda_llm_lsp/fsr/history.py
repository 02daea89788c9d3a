"""Run history: every optimization run and its candidates in SQLite, and the user's decision.

The database lives in the platformdirs data directory (`CUDA_LLM_DATA_DIR` overrides it).
Calls block: the loop and the language server call them from a thread. Each call opens its own
connection, so any thread may call any method.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from cuda_llm_lsp.fsr.types import CandidateOutcome, OptimizeResult

Decision = Literal["accept", "reject"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    file TEXT NOT NULL,
    kernel TEXT NOT NULL,
    model TEXT NOT NULL,
    started REAL NOT NULL,
    finished REAL,
    seed INTEGER,
    baseline_ms REAL,
    best_ms REAL,
    speedup REAL,
    accepted INTEGER,
    cancelled INTEGER,
    tokens INTEGER,
    outcome TEXT,
    error TEXT,
    best_source TEXT,
    decision TEXT,
    decided_at REAL
);
CREATE TABLE IF NOT EXISTS candidates (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    round INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    status TEXT NOT NULL,
    ms REAL,
    speedup REAL,
    message TEXT,
    tokens INTEGER,
    source TEXT,
    launch TEXT,
    tuning TEXT,
    reply_hash TEXT,
    PRIMARY KEY (run_id, round, idx)
);
CREATE INDEX IF NOT EXISTS runs_by_file ON runs(file);
"""


def data_dir() -> Path:
    """Where the history lives: `CUDA_LLM_DATA_DIR`, else the platform's user data directory."""
    override = os.environ.get("CUDA_LLM_DATA_DIR")
    if override:
        return Path(override)
    import platformdirs

    return Path(platformdirs.user_data_dir("cuda-llm-lsp"))


@dataclass(frozen=True)
class RunRecord:
    id: int
    file: str
    kernel: str
    model: str
    started: float
    finished: float | None
    seed: int | None
    baseline_ms: float | None
    best_ms: float | None
    speedup: float | None
    accepted: bool | None
    cancelled: bool
    tokens: int
    outcome: str | None
    error: str | None
    decision: Decision | None
    decided_at: float | None
    candidates: int = 0

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "file": self.file,
            "kernel": self.kernel,
            "model": self.model,
            "started": self.started,
            "finished": self.finished,
            "seed": self.seed,
            "baseline_ms": self.baseline_ms,
            "best_ms": self.best_ms,
            "speedup": self.speedup,
            "accepted": self.accepted,
            "cancelled": self.cancelled,
            "tokens": self.tokens,
            "outcome": self.outcome,
            "error": self.error,
            "decision": self.decision,
            "decided_at": self.decided_at,
            "candidates": self.candidates,
        }


@dataclass(frozen=True)
class CandidateRecord:
    round: int
    index: int
    status: str
    ms: float | None
    speedup: float | None
    message: str
    tokens: int
    source: str
    launch: str | None = None  # its own launch (`LaunchConfig.describe`); None: the original's
    tuning: dict[str, Any] | None = None  # its tuning (`CandidateTuning.to_json`); None: untuned
    reply_hash: str = ""  # the reply's code's `fsr.types.reply_hash` ("" for none / older runs)


class RunHistory:
    """The history database at `path` (default: `<data dir>/history.sqlite3`)."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else data_dir() / "history.sqlite3"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.executescript(_SCHEMA)
            columns = {row[1] for row in db.execute("PRAGMA table_info(candidates)")}
            if "launch" not in columns:  # a database from before issue [launch]
                db.execute("ALTER TABLE candidates ADD COLUMN launch TEXT")
            if "tuning" not in columns:  # a database from before tuning in the loop ([tune])
                db.execute("ALTER TABLE candidates ADD COLUMN tuning TEXT")
            if "reply_hash" not in columns:  # a database from before reply hashes ([judge])
                db.execute("ALTER TABLE candidates ADD COLUMN reply_hash TEXT")

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.path, timeout=10.0)
        try:
            db.execute("PRAGMA foreign_keys = ON")
            with db:
                yield db
        finally:
            db.close()

    def start_run(self, *, file: str, kernel: str, model: str, seed: int) -> int:
        with self._connect() as db:
            cursor = db.execute(
                "INSERT INTO runs (file, kernel, model, started, seed) VALUES (?, ?, ?, ?, ?)",
                (_normalise(file), kernel, model, time.time(), seed),
            )
            return int(cursor.lastrowid or 0)

    def add_candidate(self, run_id: int, outcome: CandidateOutcome) -> None:
        with self._connect() as db:
            db.execute(
                "INSERT OR REPLACE INTO candidates "
                "(run_id, round, idx, status, ms, speedup, message, tokens, source, launch, "
                "tuning, reply_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    outcome.round,
                    outcome.index,
                    outcome.status,
                    outcome.ms,
                    outcome.speedup,
                    outcome.message,
                    outcome.tokens,
                    outcome.source,
                    outcome.launch.describe() if outcome.launch else None,
                    json.dumps(outcome.tuning.to_json()) if outcome.tuning else None,
                    outcome.reply_hash or None,
                ),
            )

    def finish_run(self, run_id: int, result: OptimizeResult) -> None:
        """The outcome; candidates are written again as the result has them (final statuses)."""
        with self._connect() as db:
            db.execute(
                "UPDATE runs SET finished = ?, baseline_ms = ?, best_ms = ?, speedup = ?, "
                "accepted = ?, cancelled = ?, tokens = ?, outcome = ?, error = ?, best_source = ? "
                "WHERE id = ?",
                (
                    time.time(),
                    result.baseline_ms,
                    result.best_ms,
                    result.speedup,
                    int(result.accepted),
                    int(result.cancelled),
                    result.tokens,
                    result.message,
                    result.error,
                    result.best_source,
                    run_id,
                ),
            )
        for outcome in result.candidates:
            self.add_candidate(run_id, outcome)

    def record_decision(self, run_id: int, decision: str | None) -> None:
        """The user's accept / reject of the run's suggestion (None clears it)."""
        decision = _DECISIONS.get(decision, "?") if decision is not None else None
        if decision == "?":
            raise ValueError("decision must be 'accept', 'reject' or None")
        with self._connect() as db:
            db.execute(
                "UPDATE runs SET decision = ?, decided_at = ? WHERE id = ?",
                (decision, time.time() if decision else None, run_id),
            )

    def runs(self, file: str | Path | None = None, limit: int | None = None) -> list[RunRecord]:
        """Runs, newest first; only those of `file` when given."""
        if file is None:
            return self._select("", [], limit)
        return self._select("WHERE r.file = ?", [_normalise(str(file))], limit)

    def run(self, run_id: int, file: str | Path | None = None) -> RunRecord | None:
        """One run by its id (of `file`, when given); None when there is no such run."""
        where = "WHERE r.id = ?"
        params: list[object] = [int(run_id)]
        if file is not None:
            where += " AND r.file = ?"
            params.append(_normalise(str(file)))
        found = self._select(where, params, 1)
        return found[0] if found else None

    def _select(self, where: str, params: list[object], limit: int | None) -> list[RunRecord]:
        """Runs matching the SQL `where` (placeholders only: `params` carry the values)."""
        query = (
            "SELECT r.id, r.file, r.kernel, r.model, r.started, r.finished, r.seed, "
            "r.baseline_ms, r.best_ms, r.speedup, r.accepted, r.cancelled, r.tokens, r.outcome, "
            "r.error, r.decision, r.decided_at, "
            "(SELECT COUNT(*) FROM candidates c WHERE c.run_id = r.id) FROM runs r "
            f"{where} ORDER BY r.started DESC, r.id DESC"
        )
        params = list(params)
        if limit is not None:
            query += " LIMIT ?"
            params.append(int(limit))
        with self._connect() as db:
            rows = db.execute(query, params).fetchall()
        return [
            RunRecord(
                id=row[0],
                file=row[1],
                kernel=row[2],
                model=row[3],
                started=row[4],
                finished=row[5],
                seed=row[6],
                baseline_ms=row[7],
                best_ms=row[8],
                speedup=row[9],
                accepted=None if row[10] is None else bool(row[10]),
                cancelled=bool(row[11]),
                tokens=row[12] or 0,
                outcome=row[13],
                error=row[14],
                decision=row[15],
                decided_at=row[16],
                candidates=row[17],
            )
            for row in rows
        ]

    def candidates(self, run_id: int) -> list[CandidateRecord]:
        with self._connect() as db:
            rows = db.execute(
                "SELECT round, idx, status, ms, speedup, message, tokens, source, launch, tuning, "
                "reply_hash "
                "FROM candidates "
                "WHERE run_id = ? ORDER BY round, idx",
                (run_id,),
            ).fetchall()
        return [
            CandidateRecord(
                row[0],
                row[1],
                row[2],
                row[3],
                row[4],
                row[5] or "",
                row[6] or 0,
                row[7] or "",
                row[8],
                _tuning(row[9]),
                row[10] or "",
            )
            for row in rows
        ]


_DECISIONS = {"accept": "accept", "accepted": "accept", "reject": "reject", "rejected": "reject"}


def record_decision(run_id: int, decision: str | None, path: str | Path | None = None) -> None:
    """The user's decision on run `run_id` ("accept"/"accepted", "reject"/"rejected", None)."""
    RunHistory(path).record_decision(run_id, decision)


def _tuning(text: str | None) -> dict[str, Any] | None:
    """A candidate's recorded tuning; None when untuned (or unreadable: a record, not a run)."""
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _normalise(file: str) -> str:
    """Absolute paths, so runs of one file are found from any working directory."""
    if not file:
        return ""
    try:
        return str(Path(file).expanduser().resolve())
    except OSError:
        return file
