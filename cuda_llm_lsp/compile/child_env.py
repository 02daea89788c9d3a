"""The environment of every process we start to compile or run device code.

Compile, worker, sanitizer, profiler and vendor-library processes run or read model-written code;
they once inherited the whole environment, `OPENAI_API_KEY` included, and a candidate could read
it back (`/proc/self/environ`). They get only what CUDA, Python and our own switches need: an
allow-list by name and prefix, and, even under an allowed prefix, no name that looks like a
secret. Their `PATH` keeps only absolute entries outside the workspace (`tools.safe_search_path`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from cuda_llm_lsp.compile.tools import safe_search_path
from cuda_llm_lsp.redact import SECRET_NAME

#: Variables passed on by exact name.
KEPT_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "TMPDIR",
        "TMP",
        "TEMP",
        "LANG",
        "LANGUAGE",
        "TZ",
        "LD_LIBRARY_PATH",
        "SYSTEMROOT",
        "WINDIR",
        "COMSPEC",
        "PATHEXT",
        "USERPROFILE",
        "LOCALAPPDATA",
        "APPDATA",
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHONUNBUFFERED",
        "PYTHONNOUSERSITE",
        "PYTHONSAFEPATH",
        "PYTHONDONTWRITEBYTECODE",
        "COVERAGE_PROCESS_START",
    }
)
#: Variables passed on by prefix: the CUDA driver and tools, the container runtime, locale, the
#: XDG directories platformdirs reads, and this project's own switches (`CUDA_LLM_LSP_DRIVER`).
KEPT_PREFIXES = ("CUDA_", "NVIDIA_", "LC_", "XDG_", "CUDA_LLM_")
#: Never passed on, whatever the prefix: names that look like credentials (a substring, in any
#: case: `CUDA_LLM_private_pem`, `NVIDIA_API_KEY`), `redact`'s and a few more.
_SECRET = re.compile(
    rf"{SECRET_NAME.pattern}|PASS|CRED|CERT|SIGNING|BEARER|PAT$|_PAT_", re.IGNORECASE
)


def is_kept(name: str) -> bool:
    """Whether a variable of this name reaches a child process."""
    if _SECRET.search(name):
        return False
    return name in KEPT_NAMES or name.startswith(KEPT_PREFIXES)


def child_env(
    extra: Mapping[str, str] | None = None, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """`environ` (default: this process's) reduced to the allowed variables, plus `extra`."""
    source = os.environ if environ is None else environ
    env = {name: value for name, value in source.items() if is_kept(name)}
    if "PATH" in env:  # no relative entry, none in the workspace: nvcc finds g++ on it
        env["PATH"] = safe_search_path(env["PATH"])
    env.update(extra or {})
    return env
