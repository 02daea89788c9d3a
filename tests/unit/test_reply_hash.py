"""Each candidate names the reply it came from ([judge]): `reply_hash`, 12 hex digits of the
SHA-256 of the reply's extracted code, in the outcome, the CLI JSON and the history, so a run
can be matched to its replies whatever their order."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

from cuda_llm_lsp.evaluate.recorded import RecordedEvaluator
from cuda_llm_lsp.fsr.client import extract_kernel
from cuda_llm_lsp.fsr.history import RunHistory
from cuda_llm_lsp.fsr.loop import optimize
from cuda_llm_lsp.fsr.types import OptimizeConfig, OptimizeRequest, reply_hash
from tests.support.fsr_fakes import SAXPY_FILE, FakeLlm, FakeToolchain, saxpy_candidate


def code_of(candidate: str) -> str:
    code, error = extract_kernel(f"Faster:\n```cuda\n{candidate}\n```\n", "saxpy")
    assert code is not None, error
    return code


async def test_outcomes_json_and_history_carry_the_replys_code_hash(tmp_path: Path) -> None:
    ev = RecordedEvaluator({
        "baseline": {"ms": 1.0, "spread_pct": 0.5},
        "candidates": [{"contains": "variant: fast", "status": "ok", "ms": 0.5},
                       {"contains": "variant: wrong", "status": "wrong_output"}],
    })  # fmt: skip
    fast, wrong = saxpy_candidate("fast"), saxpy_candidate("wrong")
    llm = FakeLlm({(1, 1): wrong, (1, 2): fast})  # (1, 3) unscripted: an llm_error
    history = RunHistory(tmp_path / "h.sqlite3")
    result = await optimize(
        OptimizeRequest(file_text=SAXPY_FILE, kernel="saxpy", seed=3),
        OptimizeConfig(rounds=1, candidates=3, profile=False, repairs=0), ev, llm,
        toolchain=FakeToolchain(), history=history,
    )  # fmt: skip
    want = {1: hashlib.sha256(code_of(wrong).encode()).hexdigest()[:12],
            2: hashlib.sha256(code_of(fast).encode()).hexdigest()[:12], 3: ""}  # fmt: skip
    assert {c.index: c.reply_hash for c in result.candidates} == want
    assert {c["index"]: c["reply_hash"] for c in result.to_json()["candidates"]} == want
    assert want[1] != want[2] and all(len(h) == 12 for h in (want[1], want[2]))
    assert result.run_id is not None
    assert {c.index: c.reply_hash for c in history.candidates(result.run_id)} == want


def test_an_older_history_database_gains_the_column(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE candidates (run_id INTEGER, round INTEGER, idx INTEGER, "
               "status TEXT, ms REAL, speedup REAL, message TEXT, tokens INTEGER, source TEXT, "
               "PRIMARY KEY (run_id, round, idx))")  # fmt: skip
    db.commit()
    db.close()
    RunHistory(path)
    columns = {row[1] for row in sqlite3.connect(path).execute("PRAGMA table_info(candidates)")}
    assert "reply_hash" in columns


def test_the_hash_is_of_the_code_alone() -> None:
    assert reply_hash("a") == hashlib.sha256(b"a").hexdigest()[:12]
    assert reply_hash("a") != reply_hash("a\n")
