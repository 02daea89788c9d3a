"""Start a compile process without address-space randomization (issue 38, PCHs kept across
sessions): `python -P -m cuda_llm_lsp.compile.fixed_addresses` sets `personality(
ADDR_NO_RANDOMIZE)` for itself and executes `compile.isolated` in its place, where the flag
holds (it applies from the next exec). No shell, no `setarch`; the standard library alone, so
the detour costs an interpreter start (~40 ms), not the package's imports.

It runs nothing else: the module executed is fixed here, never taken from the command line or
the environment. Where the flag cannot be set (not Linux, a seccomp rule refusing
`personality`) it says so on stderr (the server's log) and starts the compile process all the
same: that process reads /proc/self/personality (`isolated.main`), finds randomization on, and
the pool keeps no PCH across sessions.
"""

from __future__ import annotations

import os
import sys

ADDR_NO_RANDOMIZE = 0x0040000  # <linux/personality.h>
TARGET = "cuda_llm_lsp.compile.isolated"


def personality() -> int:
    """This process's personality flags (Linux's /proc/self/personality, hexadecimal); 0 if
    unknown (randomization then counts as on)."""
    try:
        with open("/proc/self/personality", encoding="ascii") as flags:
            return int(flags.read().strip(), 16)
    except (OSError, ValueError):
        return 0


def _turn_off() -> None:
    """Set ADDR_NO_RANDOMIZE, or say on stderr why not."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.personality.restype = ctypes.c_int
        libc.personality.argtypes = [ctypes.c_ulong]
        current = libc.personality(0xFFFFFFFF)
        if current == -1 or libc.personality(current | ADDR_NO_RANDOMIZE) == -1:
            raise OSError(ctypes.get_errno(), "personality() refused")
    except (OSError, AttributeError) as exc:
        print(f"compile process: address-space randomization stays on: {exc}", file=sys.stderr)


def main() -> None:
    if sys.platform.startswith("linux"):
        _turn_off()
    safe = ["-P"] if getattr(sys.flags, "safe_path", False) else []
    sys.stdout.flush()
    os.execv(sys.executable, [sys.executable, *safe, "-m", TARGET])


if __name__ == "__main__":
    main()
