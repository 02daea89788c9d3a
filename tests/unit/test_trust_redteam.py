"""Red-team reproducers for issue 36's fixes: a cloned repository's names and text never make
nvcc or NVRTC read a special file or a file outside an untrusted workspace.

Real nvcc and NVRTC; the hostile names are planted in `tmp_path`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_llm_lsp.compile import flags
from cuda_llm_lsp.compile.nvcc import compile_file, find_nvcc
from cuda_llm_lsp.compile.nvcc_inputs import prepare

needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="needs nvcc (the nvcc extra)")


@pytest.fixture(autouse=True)
def _trusted_after() -> object:
    yield
    flags.set_workspace(flags.Trust())


# --- nvcc splits a list option's value at commas ------------------------------------------------


def test_a_comma_in_an_include_directory_never_reaches_nvcc(tmp_path: Path) -> None:
    """nvcc reads `-I /ws/a,/proc/self` as two directories: `/ws/a` and `/proc/self`."""
    own = tmp_path / "a," / "proc" / "self"
    own.mkdir(parents=True)
    project = tmp_path / "inc,"
    (project / "dev").mkdir(parents=True)
    inputs = prepare(tmp_path, own / "k.cu", [str(project / "dev")], [])
    directories = inputs.include_args[1::2]
    assert len(directories) == 2, inputs.include_args
    assert all("," not in d for d in directories), inputs.include_args


@needs_nvcc
def test_a_directory_named_to_split_into_proc_is_not_searched_by_nvcc(tmp_path: Path) -> None:
    """A repository's `a,/proc/self/k.cu` including `<comm>`: nvcc's host compiler would read
    /proc/self/comm (or `<zero>` under `x,/dev`: gigabytes)."""
    own = tmp_path / "a," / "proc" / "self"
    own.mkdir(parents=True)
    path = own / "k.cu"
    text = "#include <comm>\n__global__ void k(float* x) { x[0] = 1.0f; }\n"
    path.write_text(text)
    result = compile_file(text, path, timeout=300)
    # only the file's own (empty) directory was searched: `<comm>` is not found there
    assert not result.ok and len(result.errors) == 1, result.log
    assert "comm" in result.errors[0].message, result.log
