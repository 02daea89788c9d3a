"""benchmarks/launch_optimize.py on the CPU, so the H100 acceptance of [launch] cannot rot between
GPU runs: every candidate through real NVRTC, the script's own launch reader against the
project's, and the whole plumbing (scripted endpoint, the real `cuda-llm optimize --launch auto
--write`, its launch-block parser, nvcc on the written programs) with recorded outcomes."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks.launch_optimize import (
    HERE,
    ORIGINALS,
    Candidate,
    block_table,
    dry_recording,
    launches,
    load_candidates,
    value,
)
from cuda_llm_lsp.compile.candidate_policy import strip_spec_comments
from cuda_llm_lsp.compile.nvcc import find_nvcc
from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.evaluate.candidate import CandidateRejected, build_binary, find_kernel
from cuda_llm_lsp.source.spec import parse_spec
from cuda_llm_lsp.source.spec.launch import parse_launch_block

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "launch_optimize.py"
ALL = [c for name in ORIGINALS for c in load_candidates(name)]


def original(name: str) -> str:
    return (HERE / f"{name}.cu").read_text()


@functools.cache
def _builds_at_all() -> bool:
    """Whether NVRTC is here (it builds the transpose original)."""
    built = build_binary(original("transpose"), None, "transpose", Settings(), arch="sm_90")
    return not isinstance(built, CandidateRejected)


def test_the_candidates_cover_the_acceptance() -> None:
    statuses = {"winner", "ok", "slower", "bad_launch", "unwritten_output"}
    for c in ALL:
        assert c.why and set(c.expect) <= statuses, (c.label, c.expect)
    for name in ORIGINALS:
        winners = [c for c in ALL if c.original == name and "winner" in c.expect]
        assert len(winners) == 1 and block_table(winners[0].text, launch=True), name
    own = {c.label: block_table(c.text, launch=True) or {} for c in ALL}
    bad = {c.label for c in ALL if c.expect == ("bad_launch",)}
    assert any(own[b].get("block") == 2048 for b in bad)
    assert any(own[b].get("smem") == 300000 for b in bad)
    assert any("N" in str(own[b].get("grid")) for b in bad)  # not a size of the matmul spec
    assert {c.original for c in ALL if c.expect == ("unwritten_output",)} >= {"softmax", "matmul"}


def test_the_scripts_expression_reader_computes_as_c_does() -> None:
    sizes = {"rows": 7, "cols": 33}
    assert value("cdiv(cols, 32)", sizes) == 2 and value(" rows / 2 ", sizes) == 3
    assert value("-7 / 2", sizes) == -3 and value("-7 % 2", sizes) == -1  # truncation, as C
    assert value("max(rows, min(cols, 4)) * 4", sizes) == 28 and value(300000, sizes) == 300000
    for hostile in ("__import__('os')", "rows.real", "[rows][0]", "lambda: 1", "rows ** 2"):
        with pytest.raises((ValueError, SyntaxError)):
            value(hostile, sizes)


@pytest.mark.parametrize(
    "c", [c for c in ALL if block_table(c.text, launch=True)], ids=lambda c: c.label
)
def test_the_scripts_launches_are_the_projects(c: Candidate) -> None:
    """The independent timer launches with what the script reads; it must be what the evaluator
    launches (the project's parser applied to the spec), case by case; the two blocks the loop
    must refuse are refused by the project's parser."""
    text = original(c.original)
    spec, errors = parse_spec(find_kernel(text, c.original), text)  # type: ignore[arg-type]
    assert spec is not None, errors
    kernel = find_kernel(c.text, c.original)
    assert kernel is not None
    config, errors = parse_launch_block(kernel, spec, c.text)
    if c.before_evaluation:
        assert config is None and errors
        return
    assert config is not None, errors

    def pad(dims: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(dims) + (1,) * (3 - len(dims))

    project = [(pad(k.grid), pad(k.block), k.smem) for k in config.applied_to(spec).cases()]
    spec_table = block_table(text, launch=False)
    assert spec_table is not None
    ours = [
        (pad(x.grid), pad(x.block), x.smem)
        for x in launches(spec_table, block_table(c.text, launch=True))
    ]
    assert ours == project


@pytest.mark.skipif(not _builds_at_all(), reason="NVRTC is not available here")
@pytest.mark.parametrize("c", ALL, ids=lambda c: c.label)
def test_each_candidate_compiles(c: Candidate) -> None:
    built = build_binary(
        original(c.original),
        None,
        c.original,
        Settings(),
        kernel_source=strip_spec_comments(c.text).code,
        arch="sm_90",
    )
    assert not isinstance(built, CandidateRejected), built


def run(tmp_path: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    out = tmp_path / "summary.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(out), *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    print(done.stdout[-5000:], done.stderr[-2000:])
    return done.returncode, json.loads(out.read_text()), done.stdout


@pytest.mark.skipif(not _builds_at_all() or find_nvcc() is None, reason="needs NVRTC and nvcc")
def test_the_dry_run_passes_and_writes_consistent_programs(tmp_path: Path) -> None:
    code, summary, stdout = run(tmp_path, "--dry-run", "--keep", str(tmp_path / "kept"))
    assert code == 0, summary
    rows = {r["candidate"]: r for r in summary["rows"]}
    assert len(rows) == len(ALL) + len(ORIGINALS)
    assert all(r["verdict"] == "PASS" for r in rows.values())
    # refused by the loop's own parser: the recording says wrong_output for these
    assert "2048" in rows["softmax/02_block_2048"]["note"]
    assert "unknown name 'N'" in rows["matmul/02_unknown_size_names"]["note"]
    for name in ORIGINALS:
        assert summary["runs"][name]["launch"] is not None
        program = rows[f"{name}: written program"]
        assert program["got"] == "builds" and program["host_diff"]
        assert (tmp_path / "kept" / f"{name}.cu").is_file()
    sites = rows["transpose: written program"]["launch_sites"]["written"]
    assert sites == [
        "dim3((C + 31) / 32, (R + 31) / 32), dim3(32, 8)",
        "dim3((R + 31) / 32, (C + 31) / 32), dim3(32, 8)",
    ]
    written = (tmp_path / "kept" / "matmul.cu").read_text()
    assert "matmul<<<grid, block, (16 * 65 + 16 * 64) * 4>>>(dA, dB, dC, M, N, K);" in written
    assert "launch sites, original -> written" in stdout


@pytest.mark.skipif(not _builds_at_all() or find_nvcc() is None, reason="needs NVRTC and nvcc")
def test_a_winner_that_does_not_win_fails_the_run(tmp_path: Path) -> None:
    recording = dry_recording(["softmax"])
    for entry in recording["candidates"]:
        if "01_block_per_row" in entry["contains"]:
            entry.update(status="wrong_output", message="planted disagreement")
    (tmp_path / "outcomes.json").write_text(json.dumps(recording))
    code, summary, _ = run(
        tmp_path, "--targets", "softmax", "--evaluator", f"recorded:{tmp_path / 'outcomes.json'}"
    )
    rows = {r["candidate"]: r for r in summary["rows"]}
    assert code == 1
    assert rows["softmax/01_block_per_row"]["verdict"] == "FAIL"
    assert rows["softmax/04_warp_per_row"]["winner"]  # the honest one kept the launch and won
    assert rows["softmax: written program"]["verdict"] == "FAIL"
    assert "not the winner's" in rows["softmax: written program"]["note"]
