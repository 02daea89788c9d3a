"""The test tiers: README's quick command runs `-m "not slow and not editor"`; `.ci/run` runs all.

- `editor`: real editors (headless Neovim in tests/nvim, code-server in Chromium in tests/e2e).
- `slow`: whole-file nvcc builds (any test that skips without nvcc), the optional Ray extra, and
  the suites and realistic-size runs below, each minutes on a 2-core machine.
- `gpu` (tests/gpu): needs a CUDA GPU; skips with one reason elsewhere.

Marked here, by where a test lives and what it needs, so a new test in these files or a new
nvcc test (`skipif(find_nvcc() is None, ...)`) lands in its tier without remembering to.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Servers the tests start run no background nvcc check unless a test asks for one
# (`cudaLlm.nvccCheck`): its verdict, seconds after a save, would race what they assert.
os.environ.setdefault("CUDA_LLM_NVCC_CHECK", "off")
# Demos replay at once here (a person watching gets the recording's pace: test_demo checks it).
os.environ.setdefault("CUDA_LLM_DEMO_PACE", "0")

HERE = Path(__file__).parent
EDITOR_DIRS = ("nvim", "e2e")
SLOW_FILES = {
    "unit/test_ray_cluster.py": "a local Ray cluster",
    "unit/test_realistic_benchmark.py": "realistic sizes end to end",
    "unit/test_realistic_optimize.py": "a 4 x 4 optimize at realistic sizes",
    "unit/test_suite_kernels.py": "every kernel of the suite compiled and checked",
    "unit/test_suite_cli.py": "the suite end to end",
    "unit/test_suite_tune.py": "the suite with tuning",
    "unit/test_tune_examples.py": "the tune examples, nvcc builds",
    "unit/test_launch_benchmark.py": "whole programs built and run",
    "lsp/test_fuzz.py": "the server against generated input",
    "unit/test_adversarial_benchmark.py": "the judge-attack benchmark's plumbing end to end",
}
#: Single tests (node id prefixes) of otherwise quick files: each a whole CLI optimize run.
SLOW_TESTS = ("unit/test_replies.py::test_optimize_reads_every_shape",)


def _needs_nvcc(item: pytest.Item) -> bool:
    return any("nvcc" in str(mark.kwargs.get("reason", "")) for mark in item.iter_markers("skipif"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        where = Path(str(item.path)).resolve().relative_to(HERE).as_posix()
        if where.split("/")[0] in EDITOR_DIRS:
            item.add_marker(pytest.mark.editor)
        elif (
            where in SLOW_FILES
            or _needs_nvcc(item)
            or f"{where}::{item.name}".startswith(SLOW_TESTS)
        ):
            item.add_marker(pytest.mark.slow)
