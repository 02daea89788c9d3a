"""The real language server with a GPU worker that is stuck: its benchmark never returns and
its cancel takes `STUCK_CANCEL_S` (a worker process holding a CUDA context that will not die).

Usage: python tests/lsp/servers/stuck_server.py MARKER_FILE
`MARKER_FILE` is written when the stuck call has started, so a test knows the job is on the
"GPU". Everything else (the server, NVRTC, hover) is real.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from cuda_llm_lsp.cancel import CancelToken, relayed
from cuda_llm_lsp.evaluate.recorded import DEFAULT_DEVICE
from cuda_llm_lsp.evaluate.types import DeviceFacts
from cuda_llm_lsp.lsp.app import create_server, serve_stdio

STUCK_CANCEL_S = 30.0


class StuckGpu:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def device_facts(self) -> DeviceFacts:
        return DEFAULT_DEVICE

    def benchmark(self, *args: object, stop: CancelToken | None = None, **kwargs: object) -> object:
        with relayed(stop, self.cancel):  # the call's own token reaches the stuck worker
            self.marker.write_text("started")
            threading.Event().wait()  # never returns: the worker is stuck
        raise AssertionError("unreachable")

    evaluate = benchmark

    def cancel(self) -> None:
        time.sleep(STUCK_CANCEL_S)  # killing the stuck worker takes this long

    def close(self) -> None:
        pass


def main() -> int:
    marker = Path(sys.argv[1])
    server = create_server(evaluator_factory=lambda _settings: StuckGpu(marker))
    serve_stdio(server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
