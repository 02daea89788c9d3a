"""How loaded this machine is, for the few tests that bound a wall-clock time.

README's quick tier runs on CI and on users' machines while other work runs (load 4-9 on 2 cores
is usual): a bound that holds on an idle machine must stretch with the load, or the test fails
for the machine's sake and not the code's. The bounds stay as tight as before when idle.
"""

from __future__ import annotations

import os


def slack() -> float:
    """The factor a wall-clock bound is multiplied by now: the 1-minute load average per core,
    at least 1 (an idle machine: the bound as written)."""
    try:
        load = os.getloadavg()[0]
    except (OSError, AttributeError):
        return 1.0
    return max(1.0, load / (os.cpu_count() or 1))
