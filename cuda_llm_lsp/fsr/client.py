"""What crosses the model boundary: the prompt, the reply, the client protocol, and the kernel
taken from a reply's text.

The loop, the endpoint client (`endpoint`) and recording / replay (`replay`) all speak these
types; none of them needs the others.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Prompt:
    """The chat messages for one candidate, and which candidate they are for."""

    kernel: str
    round: int  # 1-based
    index: int  # 1-based within the round
    messages: tuple[dict[str, str], ...]

    @property
    def text(self) -> str:
        return "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in self.messages)


@dataclass(frozen=True)
class LlmReply:
    """One reply: the kernel source taken from it, or why there is none."""

    text: str  # the reply's content as received ("" on errors)
    code: str | None  # the complete kernel from the fenced block; None when `error` is set
    error: str | None = None
    fatal: bool = False  # the endpoint cannot serve this run at all (bad key, unknown model...)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None
    model: str | None = None

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class LlmClient(Protocol):
    """What the loop needs from a model: the real endpoint, a recording or a replay."""

    async def complete(self, prompt: Prompt) -> LlmReply: ...

    async def close(self) -> None: ...


# ---------------------------------------------------------------------------------------------
# Extracting the kernel from a reply

_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w+#.-]*)[^\n]*$", re.MULTILINE)
_CODE_LANGS = {"", "cuda", "cu", "cpp", "c++", "cxx", "c", "cc", "h", "hpp", "cuh"}


@dataclass(frozen=True)
class _Block:
    lang: str
    body: str
    closed: bool


def _fenced_blocks(text: str) -> list[_Block]:
    blocks: list[_Block] = []
    position = 0
    while True:
        opening = _FENCE.search(text, position)
        if opening is None:
            return blocks
        fence = opening.group(1)
        lang = opening.group(2).lower()
        start = opening.end() + 1
        closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.MULTILINE)
        end = closing.search(text, start)
        if end is None:
            blocks.append(_Block(lang, text[start:], closed=False))
            return blocks
        blocks.append(_Block(lang, text[start : end.start()], closed=True))
        position = end.end()


def _defines_kernel(code: str, kernel: str) -> bool:
    pattern = rf"__global__[^;{{}}]*?\b{re.escape(kernel)}\s*(<[^;{{}}]*>)?\s*\("
    return re.search(pattern, code, re.DOTALL) is not None


def extract_kernel(
    text: str, kernel: str, finish_reason: str | None = None
) -> tuple[str | None, str | None]:
    """(code, None) with the fenced block defining `__global__ ... kernel(`, or (None, why not)."""
    blocks = [b for b in _fenced_blocks(text) if b.lang in _CODE_LANGS]
    truncated = finish_reason == "length"
    defining = [b for b in blocks if _defines_kernel(b.body, kernel)]
    if defining:
        block = defining[-1] if all(b.closed for b in defining) else defining[0]
        if not block.closed and truncated:
            return (
                None,
                "reply truncated: the model hit its output token limit inside the code block",
            )
        code = block.body.strip("\n")
        if "{" not in code or code.count("{") != code.count("}"):
            if truncated:
                return (
                    None,
                    "reply truncated: the model hit its output token limit inside the kernel",
                )
            return None, f"the code block defining {kernel} has unbalanced braces"
        return code.rstrip() + "\n", None
    if truncated:
        return (
            None,
            "reply truncated: the model hit its output token limit before finishing the kernel",
        )
    if not blocks:
        return None, (
            f"no code block in the reply: expected the full kernel `__global__ void {kernel}(...)` "
            "inside one ```cuda fenced block"
        )
    return None, f"no code block in the reply defines `__global__ void {kernel}(...)`"
