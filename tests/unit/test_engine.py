"""`engine.make_evaluator` reads `CUDA_LLM_EVALUATOR` by `evaluator_problem`'s rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_llm_lsp.engine import evaluator_problem, make_evaluator
from cuda_llm_lsp.evaluate.recorded import RecordedEvaluator


def test_make_evaluator_refuses_what_evaluator_problem_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "nowhere.json"
    monkeypatch.setenv("CUDA_LLM_EVALUATOR", f"recorded:{missing}")
    said = evaluator_problem()
    assert said is not None and "no recording at" in said
    with pytest.raises(ValueError) as raised:
        make_evaluator()
    assert str(raised.value) == said  # at start, in the same words, not at the first benchmark
    recording = tmp_path / "outcomes.json"
    recording.write_text('{"baseline": {"ms": 1.0}}')
    monkeypatch.setenv("CUDA_LLM_EVALUATOR", f"recorded:{recording}")
    assert evaluator_problem() is None and isinstance(make_evaluator(), RecordedEvaluator)


#: What `engine` passes through from the layers below, each for the reason docs/design.md gives
#: ("The engine"): the one cancel token, and the FSR loop's events inside the `Event` union.
FORWARDED = {
    "CancelToken",
    "CandidateEvaluated",
    "CandidateStage",
    "RoundStarted",
    "RunFinished",
    "RunStarted",
}


def test_the_engine_exports_its_own_names_and_a_handful_forwarded() -> None:
    import inspect

    import cuda_llm_lsp.engine as engine

    below = set()
    for name in engine.__all__:
        value = getattr(engine, name)  # constants and type aliases are checked by lint-imports
        own = not (inspect.isclass(value) or inspect.isfunction(value))
        if not own and not value.__module__.startswith("cuda_llm_lsp.engine."):
            below.add(name)
    assert below == FORWARDED
    assert not any(getattr(engine, n, None) for n in ("peaks", "vendor", "shared_pool"))
