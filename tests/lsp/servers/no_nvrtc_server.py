"""The real server, except that loading NVRTC fails (as on a machine without the toolkit wheels)."""

from __future__ import annotations

import sys

from cuda_llm_lsp.compile import nvrtc
from cuda_llm_lsp.compile.types import NvrtcUnavailable


def _missing() -> None:
    raise NvrtcUnavailable("libnvrtc.so.13: cannot open shared object file (simulated)")


nvrtc.nvrtc_module = _missing  # type: ignore[assignment]

if __name__ == "__main__":
    from cuda_llm_lsp.__main__ import main

    sys.exit(main())
