"""Small JSON files in the cache directory, written so a reader never sees half a file, and
never holding a secret (`redact`: every string is redacted on the way out)."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import platformdirs

from cuda_llm_lsp.redact import redact_data

CACHE_DIR_ENV = "CUDA_LLM_CACHE_DIR"  # overrides the platformdirs location (tests, benchmarks)


def cache_base() -> Path:
    """The user's cache folder of this package (`$CUDA_LLM_CACHE_DIR`, else platformdirs')."""
    override = os.environ.get(CACHE_DIR_ENV)
    return Path(override) if override else Path(platformdirs.user_cache_dir("cuda-llm-lsp"))


def write_json_atomic(path: Path, data: Any, *, indent: int | None = None) -> bool:
    """Write `data` to `path` through a temporary file and a rename; False if the disk refused.

    Several processes (the language server, the CLI, the suite) share these caches: the rename
    makes each write all-or-nothing, and a read-only or full disk only costs a re-measurement.
    """
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(redact_data(data), handle, indent=indent)
        os.replace(tmp, path)
        return True
    except BaseException as exc:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        if isinstance(exc, OSError):
            return False
        raise
