"""Which `nvcc` is in use: a leaf module, so that the device unit can ask which toolkit's
headers nvcc would read (`headers.nvcc_include_dirs`) without importing the compilers."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from cuda_llm_lsp.compile.tools import find_tool, usable_program

#: Environment variable naming an `nvcc` to use instead of the one found.
NVCC_ENV = "CUDA_LLM_NVCC"


def find_nvcc() -> Path | None:
    """`$CUDA_LLM_NVCC` (an absolute path), else the toolkit wheels' `nvcc` next to this Python,
    else `PATH`'s (`tools.find_tool`: never a relative entry, never in the workspace)."""
    given = os.environ.get(NVCC_ENV)
    if given:
        return Path(given) if usable_program(given) else None
    for root in _site_roots():
        for candidate in sorted(root.glob("nvidia/cu*/bin/nvcc"), reverse=True):
            if usable_program(candidate):
                return candidate
        legacy = root / "nvidia" / "cuda_nvcc" / "bin" / "nvcc"
        if usable_program(legacy):
            return legacy
    found = find_tool("nvcc")
    return Path(found) if found else None


def _site_roots() -> list[Path]:
    roots = [Path(p) for p in sys.path if p.endswith("site-packages") and os.path.isabs(p)]
    return [r for r in roots if (r / "nvidia").is_dir()]
