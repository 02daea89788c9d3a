"""The nvcc tier (`cuda-llm check --nvcc`): nvcc's whole-file verdict replaces the fast tier's.

Planted errors the fast tier cannot see (they appear only when host code instantiates a
template) are reported; a fast-tier error nvcc does not report is withdrawn.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_llm_lsp.compile.nvcc import find_nvcc

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(
    find_nvcc() is None or shutil.which("g++") is None, reason="needs nvcc and g++"
)


def check(tmp_path: Path, files: dict[str, str], *flags: str) -> tuple[int, dict]:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["CUDA_LLM_CACHE_DIR"] = str(tmp_path / "cache")
    done = subprocess.run(
        [sys.executable, "-m", "cuda_llm_lsp.cli", "check", "--format", "json",
         "--compile-timeout", "300", *flags, "main.cu"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, json.loads(done.stdout)


HOST_TEMPLATE = {
    "util.h": "#pragma once\n"
    "template <typename T> __host__ __device__ T half_of(T x) { return x.value / 2; }\n",
    "nested/deep.h": "#pragma once\n"
    "template <typename T> __device__ T twice(T x) { return x.missing * 2; }\n"
    "template <typename T> __global__ void apply(T* o) { o[0] = twice(o[0]); }\n",
    "main.cu": '#include "util.h"\n#include "nested/deep.h"\n'
    "__global__ void k(float* o) { o[threadIdx.x] = 1.0f; }\n"
    "int main() {\n  int bad = half_of(4);\n  apply<int><<<1, 1>>>(nullptr);\n"
    "  k<<<1, 1>>>(nullptr);\n  return bad;\n}\n",
}


def test_errors_only_host_instantiation_shows_are_reported_with_nvcc(tmp_path: Path) -> None:
    """The issue's missed kinds: a __host__ __device__ header template called from host code,
    a __device__ template in a nested header reached through a launched template kernel."""
    _, fast = check(tmp_path, HOST_TEMPLATE)
    fast_errors = [d for d in fast["diagnostics"] if d["severity"] == "error"]
    status_nvcc, full = check(tmp_path, HOST_TEMPLATE, "--nvcc")
    errors = [d["message"] for d in full["diagnostics"] if d["severity"] == "error"]
    assert status_nvcc == 1
    assert any('util.h" line 2' in e and "class type" in e for e in errors), errors
    assert any('deep.h" line 2' in e and "class type" in e for e in errors), errors
    assert len(errors) > len(fast_errors)


def test_a_fast_tier_error_nvcc_does_not_report_is_withdrawn(tmp_path: Path) -> None:
    files = {
        "main.cu": "#ifdef __CUDACC_RTC__\n#error only NVRTC defines __CUDACC_RTC__\n#endif\n"
        "__global__ void k(float* o) { o[0] = 1.0f; }\n"
    }
    status, fast = check(tmp_path, files)
    assert status == 1 and fast["diagnostics"][0]["line"] == 2
    status, full = check(tmp_path, files, "--nvcc")
    assert status == 0 and full["diagnostics"] == [], full
    assert full["kernels"][0]["name"] == "k"
