"""The real-world corpus runner (benchmarks/realworld_corpus.py), and zero false errors.

`test_runner_*` run here on a small corpus made in the test: a file nvcc accepts that used to
give false errors (a project header reached with `<...>` through -I, glibc's `uint`), one
that nvcc rejects (not counted), kernels against ptxas's count.

`test_zero_false_errors_on_the_real_corpus` checks every nvcc-clean file of a corpus of real
projects' files (llm.c, cuda-samples, SGEMM_CUDA, GPU MODE's lectures: see
benchmarks/RESULTS.md) with the fast tier, in parallel within a bounded time. The corpus is
not part of the repository (other projects' code is not vendored): point
`CUDA_LLM_REALWORLD_CORPUS` at a directory holding its `manifest.toml`; marked `slow`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "realworld_corpus", ROOT / "benchmarks" / "realworld_corpus.py"
)
assert _spec is not None and _spec.loader is not None
corpus_runner = importlib.util.module_from_spec(_spec)
sys.modules["realworld_corpus"] = corpus_runner
_spec.loader.exec_module(corpus_runner)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_LLM_CACHE_DIR", str(tmp_path / "cache"))


def make_corpus(root: Path) -> None:
    files = {
        "proj/Common/helper.h": "#pragma once\n#include <fstream>\n"
        'inline bool ok() { std::ofstream f("x"); return f.good(); }\n'
        "__device__ inline uint twice(uint x) { return 2u * x; }\n",
        "proj/good.cu": "#include <helper.h>\n"
        "__global__ void a(uint* o) { o[threadIdx.x] = twice(o[threadIdx.x]); }\n"
        "__global__ void b(uint* o) { o[0] = 1u; }\n"
        "int main() { return ok() ? 0 : 1; }\n",
        "proj/bad.cu": "__global__ void c(float* o) { o[0] = missing; }\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    entries = [
        corpus_runner.Entry("proj/good.cu", "proj", ["proj/Common"], [], "c++17", "clean", 2,
                            {"_Z1aPj": 8, "_Z1bPj": 8}),
        corpus_runner.Entry("proj/bad.cu", "proj", [], [], "c++17", "error", 0, {}),
    ]  # fmt: skip
    corpus_runner.write_manifest(root, entries)


def test_runner_reads_back_what_it_writes(tmp_path: Path) -> None:
    make_corpus(tmp_path)
    entries = corpus_runner.load_manifest(tmp_path)
    assert [e.path for e in entries] == ["proj/good.cu", "proj/bad.cu"]
    assert entries[0].ptxas_registers == {"_Z1aPj": 8, "_Z1bPj": 8}
    assert entries[0].include_dirs == ["proj/Common"] and entries[1].nvcc == "error"


def test_runner_counts_false_errors_kernels_and_time(tmp_path: Path) -> None:
    make_corpus(tmp_path)
    out = tmp_path / "report.json"
    status = corpus_runner.main([str(tmp_path), "--json", str(out)])
    report = json.loads(out.read_text())
    summary = report["summary"]
    assert status == 0, report
    assert summary["files"] == 1  # bad.cu is not nvcc-clean: not counted
    assert summary["false_errors"] == 0
    assert summary["ptxas_kernels"] == 2 and summary["kernels_with_resources"] == 2
    assert summary["files_registers_equal"] == 1
    assert summary["median_s"] >= summary["syntax_median_s"] > 0 and summary["timeouts"] == 0


def test_runner_reports_a_false_error(tmp_path: Path) -> None:
    """A manifest whose flags miss the header's directory: the file's error is counted."""
    make_corpus(tmp_path)
    entries = corpus_runner.load_manifest(tmp_path)
    entries[0].include_dirs = []
    corpus_runner.write_manifest(tmp_path, entries)
    assert corpus_runner.main([str(tmp_path)]) == 1


CORPUS = os.environ.get("CUDA_LLM_REALWORLD_CORPUS")


@pytest.mark.slow
@pytest.mark.skipif(not CORPUS, reason="CUDA_LLM_REALWORLD_CORPUS names no corpus directory")
def test_zero_false_errors_on_the_real_corpus(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    jobs = str(max(1, min(4, os.cpu_count() or 1)))
    status = corpus_runner.main([str(CORPUS), "--jobs", jobs, "--json", str(out)])
    summary = json.loads(out.read_text())["summary"]
    assert summary["files"] >= 100
    assert summary["false_errors"] == 0 and status == 0, summary
