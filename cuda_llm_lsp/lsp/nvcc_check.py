"""The nvcc tier in the editor: nvcc on the whole file in the background, merged over the fast
tier's analysis of the same text (`compile.nvcc_tier`).

When: after a document opens and after each save (`cudaLlm.nvccCheck` `save`, the default), also
after `PAUSE_S` without typing (`pause`), or never (`off`). The check on open gives a file
nvcc's figures before its first save (the text opened is the one on disk). It never holds the
fast pass up: one nvcc runs at a time in a thread of its own, and a change, a close or a
settings change stops a running one (its process group is killed) and drops its result; after a
settings change every open document is checked again under the new flags. A result is kept per
document with the text it compiled and stays the arbiter of every line unchanged since
(`compile.nvcc_tier.carry_nvcc`): while typing, the fast tier's diagnostics show only on the
lines edited since the check, so an error nvcc refuted never flickers back; the next check
(a save) judges the whole text again. Where no nvcc is found the tier
says so once in the log and stays quiet; in an untrusted workspace it is off (it runs the host
compiler on the workspace's files).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from lsprotocol import types
from pygls.workspace import TextDocument

from cuda_llm_lsp.config import Settings, nvcc_check_mode
from cuda_llm_lsp.engine.analysis import (
    FileAnalysis,
    NvccResult,
    NvccUnavailable,
    Trust,
    carry_nvcc,
    check_nvcc,
)

log = logging.getLogger(__name__)

#: `pause`: quiet time after the last change before nvcc checks the file.
PAUSE_S = 2.0


@dataclass(frozen=True)
class NvccOutcome:
    """nvcc's verdict on one text of a document, under the settings it ran with."""

    text: str
    settings: Settings
    result: NvccResult


def _flags(settings: Settings) -> tuple[Any, ...]:
    """What nvcc's verdict depends on besides the text."""
    return (
        settings.arch, settings.include_paths, settings.defines, settings.nvrtc_flags,
        settings.std, settings.compile_commands_dir,
    )  # fmt: skip


class _Server(Protocol):
    """What the checker needs of `lsp.state.CudaLlmServer` (which owns it)."""

    settings: Settings
    trust: Trust

    def document(self, uri: str) -> TextDocument | None: ...
    def path_of(self, uri: str) -> Path | None: ...
    def spawn(self, coro: Coroutine[Any, Any, Any], what: str) -> asyncio.Task[Any]: ...
    def show_analysis(self, uri: str) -> None: ...
    def window_log_message(self, params: types.LogMessageParams) -> None: ...


class NvccChecker:
    """Runs and remembers the nvcc tier for the server's open documents."""

    def __init__(self, server: _Server) -> None:
        self.server = server
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cuda-llm-nvcc")
        self.outcomes: dict[str, NvccOutcome] = {}
        self.generations: dict[str, int] = {}
        self.stopped = False
        self.unavailable: str | None = None  # why no nvcc, once found out

    @property
    def mode(self) -> str:
        """`off` in an untrusted workspace: a host compiler does not run on its files unasked."""
        if not self.server.trust.trusted:
            return "off"
        return nvcc_check_mode(self.server.settings)

    def saved(self, uri: str) -> None:
        if self.mode != "off":
            self._schedule(uri, 0.0)

    def changed(self, uri: str) -> None:
        """A change: a running check of the old text stops; `pause` checks the new one later."""
        self._bump(uri)
        if self.mode == "pause":
            self._schedule(uri, PAUSE_S)

    def opened(self, uri: str) -> None:
        """Checked after `PAUSE_S`: a document opened and closed at once (a peek) costs nothing."""
        if self.mode != "off":
            self._schedule(uri, PAUSE_S)

    def forget(self, uri: str) -> None:
        self._bump(uri)
        self.outcomes.pop(uri, None)

    def forget_all(self, open_uris: list[str] | None = None) -> None:
        """Settings changed: every result is of other flags; the open documents are checked
        again under the new ones (else their nvcc view would be gone until the next save)."""
        for uri in list(self.generations):
            self._bump(uri)
        self.outcomes.clear()
        if self.mode != "off":
            for uri in open_uris or ():
                self._schedule(uri, PAUSE_S)

    def stop(self) -> None:
        self.stopped = True
        self.pool.shutdown(wait=False, cancel_futures=True)

    def merged(self, uri: str, analysis: FileAnalysis) -> FileAnalysis:
        """`analysis` with the last nvcc verdict on the document merged in: the whole of it
        when nvcc checked this very text, else on the lines unchanged since (`carry_nvcc`);
        unchanged when there is no verdict under the current flags."""
        outcome = self.outcomes.get(uri)
        if analysis is None or outcome is None:
            return analysis
        if _flags(outcome.settings) != _flags(self.server.settings):
            return analysis
        timeout = outcome.settings.nvcc_timeout_s
        return carry_nvcc(analysis, outcome.text, outcome.result, timeout)

    # --- running ---------------------------------------------------------------------------

    def _bump(self, uri: str) -> int:
        self.generations[uri] = self.generations.get(uri, 0) + 1
        return self.generations[uri]

    def _schedule(self, uri: str, delay_s: float) -> None:
        if self.stopped or self.unavailable is not None:
            return
        generation = self._bump(uri)
        self.server.spawn(self._check_later(uri, generation, delay_s), f"nvcc check of {uri}")

    async def _check_later(self, uri: str, generation: int, delay_s: float) -> None:
        if delay_s > 0:
            await asyncio.sleep(delay_s)
        doc = self.server.document(uri)
        if doc is None or self.generations.get(uri) != generation:
            return
        text, settings, path = doc.source, self.server.settings, self.server.path_of(uri)
        done = self.outcomes.get(uri)
        if done is not None and done.text == text and _flags(done.settings) == _flags(settings):
            return  # saved twice without a change: nothing new to check

        def current() -> bool:
            return not self.stopped and self.generations.get(uri) == generation

        def check() -> NvccResult | None:
            if not current():  # queued behind another document's check, and superseded
                return None
            return check_nvcc(text, path, settings, settings.nvcc_timeout_s, lambda: not current())

        loop = asyncio.get_running_loop()
        try:
            result = await loop.run_in_executor(self.pool, check)
        except NvccUnavailable as exc:
            self._missing(str(exc))
            return
        except RuntimeError as exc:  # the pool was shut down: the server is stopping
            log.debug("nvcc check of %s dropped: %s", uri, exc)
            return
        if result is None or result.stopped or not current():
            return
        doc = self.server.document(uri)
        if doc is None or doc.source != text:
            return
        verdict = "ok" if result.ok else "errors"
        log.info("nvcc checked %s in %.1f s (%s)", uri, result.seconds, verdict)
        self.outcomes[uri] = NvccOutcome(text, settings, result)
        self.server.show_analysis(uri)

    def _missing(self, detail: str) -> None:
        if self.unavailable is None:
            self.unavailable = detail
            self.server.window_log_message(
                types.LogMessageParams(
                    type=types.MessageType.Info,
                    message=f"cuda-llm: the nvcc check is off: {detail}",
                )
            )
