"""The environment of every process we start to compile or run device code.

Compile, worker, sanitizer, profiler and vendor-library processes run or read model-written code;
they once inherited the whole environment, `OPENAI_API_KEY` included, and a candidate could read
it back (`/proc/self/environ`). They get only what CUDA, Python and our own switches need: an
allow-list by name and prefix, and, even under an allowed prefix, no name that looks like a
secret.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

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
#: Never passed on, whatever the prefix: names that look like credentials.
_SECRET = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION", re.IGNORECASE)


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
    env.update(extra or {})
    return env
