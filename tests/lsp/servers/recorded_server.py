"""The real language server with a `RecordedEvaluator` (no GPU needed): CPU end-to-end tests.

Usage: python tests/lsp/servers/recorded_server.py RECORDING.json [server options]
Everything else (NVRTC, the FSR loop, the openai SDK against a scripted endpoint) is real.
"""

from __future__ import annotations

import sys

from cuda_llm_lsp.evaluate.recorded import RecordedEvaluator
from cuda_llm_lsp.lsp.app import create_server, serve_stdio


def main() -> int:
    recording = sys.argv[1]
    server = create_server(evaluator_factory=lambda _settings: RecordedEvaluator(recording))
    serve_stdio(server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
