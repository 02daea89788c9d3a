"""Record every prompt and reply of a run, and replay a run without an endpoint.

A recording is a directory of JSON files, one per candidate, named
`<kernel>-r<round>-c<index>-<hash of the prompt>.json`. Replay matches a request by
(kernel, round, index), never by the prompt's hash: prompts carry measured timings that differ
from run to run. The prompt is kept in the file for people to read; the reply keeps what the
endpoint sent beside the content (a refusal, the reasoning) so that a replay reads it the same.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import time
from pathlib import Path
from typing import Any

from cuda_llm_lsp.fsr.client import LlmClient, LlmReply, Prompt, extract_kernel
from cuda_llm_lsp.redact import redact_data

FORMAT_VERSION = 1
#: The seconds a paced replay waits for a reply recorded without its time (`elapsed_s`).
DEFAULT_REPLY_S = 2.0


def _stem(kernel: str, round_: int, index: int, role: str = "candidate", attempt: int = 0) -> str:
    """The file name's key; a planner's or debugger's request carries its role (and attempt)."""
    safe = re.sub(r"[^A-Za-z0-9_]+", "_", kernel) or "kernel"
    suffix = "" if role == "candidate" else f"-{role}{attempt or ''}"
    return f"{safe}-r{round_:02d}-c{index:02d}{suffix}"


def _prompt_stem(prompt: Prompt) -> str:
    return _stem(prompt.kernel, prompt.round, prompt.index, prompt.role, prompt.attempt)


def recorded_shape(directory: Path, kernel: str) -> tuple[int, int] | None:
    """(rounds, candidates) recorded for `kernel` in `directory`; None when it has no record."""
    if not directory.is_dir():
        return None
    safe = _stem(kernel, 1, 1).rsplit("-r", 1)[0]
    pattern = re.compile(rf"^{re.escape(safe)}-r(\d+)-c(\d+)-.*\.json$")
    keys = [
        m.groups() for f in directory.glob(f"{safe}-r*-c*-*.json") if (m := pattern.match(f.name))
    ]
    if not keys:
        return None
    return max(int(r) for r, _ in keys), max(int(c) for _, c in keys)


def prompt_hash(prompt: Prompt) -> str:
    return hashlib.sha256(prompt.text.encode("utf-8")).hexdigest()[:12]


class RecordingLlm:
    """Passes requests to `inner` and writes each prompt and its reply under `directory`."""

    def __init__(self, inner: LlmClient, directory: str | Path) -> None:
        self.inner = inner
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)

    async def complete(self, prompt: Prompt) -> LlmReply:
        started = time.monotonic()
        reply = await self.inner.complete(prompt)
        elapsed = time.monotonic() - started
        stem = _prompt_stem(prompt)
        for old in self.directory.glob(f"{stem}-*.json"):
            if re.fullmatch(rf"{re.escape(stem)}-[^-]+\.json", old.name):
                old.unlink()  # one file per request: a re-recording replaces it
        record: dict[str, Any] = {
            "format": FORMAT_VERSION,
            "kernel": prompt.kernel,
            "round": prompt.round,
            "index": prompt.index,
            "role": prompt.role,
            "attempt": prompt.attempt,
            "prompt_sha256": prompt_hash(prompt),
            "elapsed_s": round(elapsed, 3),  # how long the model took: a paced replay waits it
            "messages": list(prompt.messages),
            "reply": {
                "text": reply.text,
                "error": reply.error,
                "fatal": reply.fatal,
                "finish_reason": reply.finish_reason,
                "prompt_tokens": reply.prompt_tokens,
                "completion_tokens": reply.completion_tokens,
                "model": reply.model,
                "refusal": reply.refusal,
                "reasoning_content": reply.reasoning,
            },
        }
        path = self.directory / f"{stem}-{prompt_hash(prompt)}.json"
        path.write_text(json.dumps(redact_data(record), indent=2) + "\n", encoding="utf-8")
        return reply

    async def close(self) -> None:
        await self.inner.close()


def recorded_seconds(record: dict[str, Any]) -> float:
    """How long the recorded reply took (`elapsed_s`), or `DEFAULT_REPLY_S` when not recorded."""
    value = record.get("elapsed_s")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < 3600:
        return float(value)
    return DEFAULT_REPLY_S


def replay_seconds(directory: Path, kernel: str) -> float:
    """How long replaying `kernel`'s recording at pace 1 takes: a round's candidates are asked
    at once, so each round lasts its slowest reply (what the demo's pace is checked by)."""
    rounds: dict[int, float] = {}
    safe = _stem(kernel, 1, 1).rsplit("-r", 1)[0]
    for path in directory.glob(f"{safe}-r*-c*-*.json"):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            round_ = int(record["round"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        rounds[round_] = max(rounds.get(round_, 0.0), recorded_seconds(record))
    return sum(rounds.values())


class ReplayLlm:
    """Answers from a recording made by `RecordingLlm`; needs no endpoint. With `pace` > 0 each
    reply comes after its recorded time times `pace` (the demo: the rounds can be watched)."""

    def __init__(self, directory: str | Path, pace: float = 0.0) -> None:
        self.directory = Path(directory)
        self.pace = pace
        self.requests: list[Prompt] = []

    async def complete(self, prompt: Prompt) -> LlmReply:
        self.requests.append(prompt)
        stem = _prompt_stem(prompt)
        if not self.directory.is_dir():
            return LlmReply(
                text="", code=None, error=f"recording {self.directory} not found", fatal=True
            )
        matches = sorted(
            m
            for m in self.directory.glob(f"{stem}-*.json")
            if re.fullmatch(rf"{re.escape(stem)}-[^-]+\.json", m.name)
        )
        if not matches:
            return LlmReply(
                text="",
                code=None,
                error=f"not in recording: round {prompt.round} candidate {prompt.index} "
                f"{'' if prompt.role == 'candidate' else f'({prompt.role}) '}"
                f"of {prompt.kernel} (in {self.directory})",
            )
        try:
            record = json.loads(matches[0].read_text(encoding="utf-8"))
            if self.pace > 0 and isinstance(record, dict):
                await asyncio.sleep(recorded_seconds(record) * self.pace)  # cancellable
            reply = record["reply"]
            text = str(reply.get("text") or "")
            finish = reply.get("finish_reason")
            refusal = reply.get("refusal") or None
            reasoning = reply.get("reasoning_content") or None
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            return LlmReply(text="", code=None, error=f"unreadable recording {matches[0]}: {exc}")
        if reply.get("error") and not (text or refusal or reasoning):
            return LlmReply(
                text="", code=None, error=str(reply["error"]), fatal=bool(reply.get("fatal"))
            )
        code, error = extract_kernel(
            text, prompt.kernel, finish, refusal=refusal, reasoning=reasoning
        )
        return LlmReply(
            text=text,
            code=code,
            error=error,
            finish_reason=finish,
            prompt_tokens=int(reply.get("prompt_tokens") or 0),
            completion_tokens=int(reply.get("completion_tokens") or 0),
            model=reply.get("model"),
            refusal=refusal,
            reasoning=reasoning,
        )

    async def close(self) -> None:
        return None
