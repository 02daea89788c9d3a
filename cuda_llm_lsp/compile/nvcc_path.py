"""Which `nvcc` is in use: a leaf module, so that the device unit can ask which toolkit's
headers nvcc would read (`headers.nvcc_include_dirs`) without importing the compilers."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

#: Environment variable naming an `nvcc` to use instead of the one found.
NVCC_ENV = "CUDA_LLM_NVCC"


def find_nvcc() -> Path | None:
    """`$CUDA_LLM_NVCC`, else the toolkit wheels' `nvcc` next to this Python, else `PATH`'s."""
    given = os.environ.get(NVCC_ENV)
    if given:
        return Path(given) if Path(given).is_file() else None
    for root in _site_roots():
        for candidate in sorted(root.glob("nvidia/cu*/bin/nvcc"), reverse=True):
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return candidate
        legacy = root / "nvidia" / "cuda_nvcc" / "bin" / "nvcc"
        if legacy.is_file():
            return legacy
    found = shutil.which("nvcc")
    return Path(found) if found else None


def _site_roots() -> list[Path]:
    roots = [Path(p) for p in sys.path if p.endswith("site-packages")]
    return [r for r in roots if (r / "nvidia").is_dir()]
