"""Nothing written to disk holds a secret (issue 25, finding 2): the writers redact."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from cuda_llm_lsp import redact
from cuda_llm_lsp.cachefiles import write_json_atomic
from cuda_llm_lsp.compile.cache import redacted
from cuda_llm_lsp.compile.types import CompileResult, Diagnostic

KEY = "sk-planted-0123456789abcdef"
TOKEN = "ghp_plantedtoken987654321"


@pytest.fixture(autouse=True)
def planted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("MY_SERVICE_TOKEN", TOKEN)
    monkeypatch.setenv("HARMLESS_AUTH", "1")  # too short to be a secret: left alone


def test_secret_looking_variables_are_hidden() -> None:
    text = f"OPENAI_API_KEY={KEY}\0MY_SERVICE_TOKEN={TOKEN}\0HARMLESS_AUTH=1\0PATH=/bin"
    clean = redact.redact(text)
    assert KEY not in clean and TOKEN not in clean
    assert "HARMLESS_AUTH=1" in clean and "PATH=/bin" in clean


def test_a_registered_key_is_hidden() -> None:
    redact.register_secret("sk-from-init-options-42")
    assert "sk-from-init-options-42" not in redact.redact("key sk-from-init-options-42 here")


def test_cache_files_never_hold_a_secret(tmp_path: Path) -> None:
    target = tmp_path / "entry.json"
    write_json_atomic(target, {"log": f"  {KEY}\n", KEY: [TOKEN, 1]})
    written = target.read_text()
    assert KEY not in written and TOKEN not in written
    assert json.loads(written)["log"] == "  <redacted>\n"


def test_compile_results_are_redacted() -> None:
    result = CompileResult(
        ok=False,
        arch="sm_90",
        diagnostics=(Diagnostic(1, 1, 1, 2, "error", f'identifier "{KEY}" is undefined'),),
        log=f"a.cu(1): error: {TOKEN}\n",
    )
    clean = redacted(result)
    assert KEY not in clean.diagnostics[0].message and TOKEN not in clean.log


def test_log_records_and_tracebacks_are_redacted(tmp_path: Path) -> None:
    path = tmp_path / "log.txt"
    handler = logging.FileHandler(path)
    handler.addFilter(redact.RedactSecrets())
    logger = logging.getLogger("test_redact")
    logger.addHandler(handler)
    try:
        logger.warning("request %s", {"apiKey": "sk-unknown-but-named"})
        try:
            raise ValueError(f"bad {TOKEN}")
        except ValueError:
            logger.exception("failed with %s", KEY)
    finally:
        logger.removeHandler(handler)
        handler.close()
    written = path.read_text()
    assert KEY not in written and TOKEN not in written and "sk-unknown-but-named" not in written
    assert "ValueError" in written


def test_the_history_database_never_holds_a_secret(tmp_path: Path) -> None:
    from cuda_llm_lsp.fsr.history import RunHistory
    from cuda_llm_lsp.fsr.types import CandidateOutcome

    path = tmp_path / "h.sqlite3"
    history = RunHistory(path)
    run_id = history.start_run(file=f"/w/{TOKEN}.cu", kernel="k", model="m", seed=1)
    outcome = CandidateOutcome(1, 1, "compile_error", None, f"echo: {KEY}", f"// {TOKEN}\n")
    history.add_candidate(run_id, outcome)
    written = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert KEY.encode() not in written and TOKEN.encode() not in written
    assert history.candidates(run_id)[0].message == "echo: <redacted>"
