"""The GPU worker started before a command's imports (`evaluate/worker_start.py`): a module of
its own, light to import, for the CLI to call first thing (`cuda-llm bench`)."""

from __future__ import annotations

from cuda_llm_lsp.evaluate.worker_start import start_early

__all__ = ["start_early"]
