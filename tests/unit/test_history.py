"""Run history in SQLite: runs, candidates, outcomes and the user's decision."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from cuda_llm_lsp.fsr import history as history_module
from cuda_llm_lsp.fsr.history import RunHistory, data_dir, record_decision
from cuda_llm_lsp.fsr.types import CandidateOutcome, OptimizeResult


def result(run_id: int, accepted: bool = True) -> OptimizeResult:
    candidates = (
        CandidateOutcome(1, 1, "ok", 0.5, "2.00x", "src-a", speedup=2.0, tokens=120),
        CandidateOutcome(1, 2, "compile_error", None, "line 3: error", "src-b", tokens=90),
    )
    return OptimizeResult(
        kernel="saxpy",
        baseline_ms=1.0,
        best_ms=0.5 if accepted else None,
        speedup=2.0 if accepted else None,
        accepted=accepted,
        candidates=candidates,
        best_source="src-a" if accepted else None,
        message="2.00x faster",
        run_id=run_id,
        tokens=210,
    )


def test_a_run_is_recorded_with_candidates_and_outcome(tmp_path: Path) -> None:
    history = RunHistory(tmp_path / "h.sqlite3")
    run_id = history.start_run(file=str(tmp_path / "k.cu"), kernel="saxpy", model="m", seed=5)
    [open_run] = history.runs()
    assert open_run.finished is None and open_run.accepted is None
    history.add_candidate(run_id, result(run_id).candidates[0])
    history.finish_run(run_id, result(run_id))
    [run] = history.runs(tmp_path / "k.cu")
    assert (run.kernel, run.model, run.seed, run.accepted, run.speedup) == (
        "saxpy",
        "m",
        5,
        True,
        2.0,
    )
    assert run.finished is not None and run.tokens == 210 and run.candidates == 2
    assert run.outcome == "2.00x faster" and run.decision is None
    rows = history.candidates(run_id)
    assert [(r.round, r.index, r.status, r.source, r.tokens) for r in rows] == [
        (1, 1, "ok", "src-a", 120),
        (1, 2, "compile_error", "src-b", 90),
    ]


def test_runs_filter_by_file_and_come_newest_first(tmp_path: Path) -> None:
    history = RunHistory(tmp_path / "h.sqlite3")
    a = history.start_run(file="a.cu", kernel="k", model="m", seed=1)
    b = history.start_run(file="b.cu", kernel="k", model="m", seed=2)
    c = history.start_run(file="a.cu", kernel="k2", model="m", seed=3)
    assert [r.id for r in history.runs()] == [c, b, a]
    assert [r.id for r in history.runs("a.cu")] == [c, a]
    assert [r.id for r in history.runs(limit=1)] == [c]
    one = history.run(b)
    assert one is not None and one.id == b and one.kernel == "k" and one.seed == 2
    assert history.run(b, "b.cu") is not None and history.run(b, "a.cu") is None
    assert history.run(c + 100) is None


def test_decisions_are_recorded_and_validated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_LLM_DATA_DIR", str(tmp_path / "data"))
    assert data_dir() == tmp_path / "data"
    history = RunHistory()
    assert history.path == tmp_path / "data" / "history.sqlite3"
    run_id = history.start_run(file="k.cu", kernel="k", model="m", seed=1)
    record_decision(run_id, "accepted")  # the language server's wording
    [run] = history.runs()
    assert run.decision == "accept" and run.decided_at is not None
    history.record_decision(run_id, "reject")
    assert history.runs()[0].decision == "reject"
    history.record_decision(run_id, None)
    assert history.runs()[0].decision is None
    with pytest.raises(ValueError):
        history.record_decision(run_id, "maybe")


def test_default_location_is_the_platform_data_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    import platformdirs

    monkeypatch.delenv("CUDA_LLM_DATA_DIR", raising=False)
    assert history_module.data_dir() == Path(platformdirs.user_data_dir("cuda-llm-lsp"))


def test_concurrent_writers_from_threads(tmp_path: Path) -> None:
    history = RunHistory(tmp_path / "h.sqlite3")
    run_id = history.start_run(file="k.cu", kernel="k", model="m", seed=1)

    def write(index: int) -> None:
        history.add_candidate(run_id, CandidateOutcome(1, index, "ok", 1.0, "", f"s{index}"))

    threads = [threading.Thread(target=write, args=(i,)) for i in range(1, 9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(history.candidates(run_id)) == 8
