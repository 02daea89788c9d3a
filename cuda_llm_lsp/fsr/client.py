"""What crosses the model boundary: the prompt, the reply, the client protocol, and the kernel
taken from a reply's text.

The loop, the endpoint client (`endpoint`) and recording / replay (`replay`) all speak these
types; none of them needs the others.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from cuda_llm_lsp.source.kernels import find_kernels


@dataclass(frozen=True)
class Prompt:
    """The chat messages for one candidate, and which candidate they are for."""

    kernel: str
    round: int  # 1-based
    index: int  # 1-based within the round; 0 for the round's planner
    messages: tuple[dict[str, str], ...]
    role: str = "candidate"  # "candidate" (FSR and plan coders), "planner", "debugger"
    attempt: int = 0  # the debugger's repair attempt, 1-based

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
    refusal: str | None = None  # the message's `refusal` field, where the endpoint sends one
    reasoning: str | None = None  # `reasoning_content` / `reasoning`, kept for recordings

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class LlmClient(Protocol):
    """What the loop needs from a model: the real endpoint, a recording or a replay."""

    async def complete(self, prompt: Prompt) -> LlmReply: ...

    async def close(self) -> None: ...


# ---------------------------------------------------------------------------------------------
# Extracting the kernel from a reply
#
# Replies come in many shapes (tests/data/replies/ holds one of each): CRLF line endings,
# reasoning inside `<think>` (with its own sketches) or in a separate `reasoning_content`, drafts
# before the final version, helpers in their own block, refusals, cut-off replies. The rules:
# reasoning is never the answer; the last block that defines the kernel is the final version,
# joined with the blocks of helpers it uses; a reply cut off inside its last code block is
# reported as truncated, never answered with an earlier draft. A closing fence may follow the
# code's last character on its line (`}```): the block ends there, the fence is never code.

_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w+#.-]*)[^\n]*$", re.MULTILINE)
_CODE_LANGS = {"", "cuda", "cu", "cpp", "c++", "cxx", "c", "cc", "h", "hpp", "cuh"}
_THINK_OPEN = re.compile(r"<(think|thinking|reasoning)>", re.IGNORECASE)
_HOST_CODE = re.compile(r"<<<|\bint\s+main\s*\(|\bcuda(Malloc|Memcpy|Free|DeviceSynchronize)\b")
_DEFINED_NAMES = (
    re.compile(r"__device__[^;{}()]*?\b(\w+)\s*\([^;{}]*\)[\s\w]*\{"),  # device function bodies
    re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)", re.MULTILINE),
    re.compile(r"\b(?:struct|class|union|namespace)\s+(\w+)"),
    re.compile(r"\busing\s+(\w+)\s*="),
    re.compile(r"\btypedef\b[^;]*?\b(\w+)\s*;"),
    re.compile(r"\b(?:constexpr|__constant__)\b[^;=(){}]*?\b(\w+)\s*(?:=|\[|\{)"),
)
MAX_REFUSAL_CHARS = 400


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
        mark = re.escape(fence[0])
        closing = re.compile(rf"^[ \t]*{mark}{{{len(fence)},}}[ \t]*$", re.MULTILINE)
        # a fence closing the code's last line (`}```): the code ends before it
        trailing = re.compile(
            rf"(?<=[^\s{mark}])[ \t]*{mark}{{{len(fence)},}}[ \t]*$", re.MULTILINE
        )
        ends = [m for m in (closing.search(text, start), trailing.search(text, start)) if m]
        if not ends:
            blocks.append(_Block(lang, text[start:], closed=False))
            return blocks
        end = min(ends, key=lambda m: m.start())
        blocks.append(_Block(lang, text[start : end.start()], closed=True))
        position = end.end()


def split_reasoning(text: str) -> tuple[str, str, bool]:
    """(answer, reasoning, reasoning still open) of a reply that may think aloud in `<think>`.

    Also handles servers that strip the opening tag (the reply starts inside the reasoning and
    only `</think>` marks its end)."""
    answer: list[str] = []
    reasoning: list[str] = []
    first_close = re.search(r"</(think|thinking|reasoning)>", text, re.IGNORECASE)
    first_open = _THINK_OPEN.search(text)
    if first_close and (first_open is None or first_close.start() < first_open.start()):
        reasoning.append(text[: first_close.start()])
        text = text[first_close.end() :]
    position = 0
    while True:
        opening = _THINK_OPEN.search(text, position)
        if opening is None:
            answer.append(text[position:])
            return "".join(answer), "\n".join(reasoning), False
        answer.append(text[position : opening.start()])
        closing = re.compile(rf"</{opening.group(1)}>", re.IGNORECASE).search(text, opening.end())
        if closing is None:
            reasoning.append(text[opening.end() :])
            return "".join(answer), "\n".join(reasoning), True
        reasoning.append(text[opening.end() : closing.start()])
        position = closing.end()


def _defines_kernel(code: str, kernel: str) -> bool:
    pattern = rf"__global__[^;{{}}]*?\b{re.escape(kernel)}\s*(<[^;{{}}]*>)?\s*\("
    if re.search(pattern, code, re.DOTALL) is not None:
        return True
    # braces inside the declaration (CuTe's `__launch_bounds__(size(Layout{}))`): the parser's
    return "__global__" in code and any(k.name == kernel for k in find_kernels(code))


def _kernels_defined(code: str) -> list[str]:
    return re.findall(r"__global__[^;{}]*?\b(\w+)\s*(?:<[^;{}]*>)?\s*\([^;{}]*\)\s*\{", code)


def _code_only(code: str) -> str:
    """`code` without comments, string and character literals (for counting braces)."""
    return re.sub(
        r"//[^\n]*|/\*.*?(\*/|\Z)|\"(\\.|[^\"\\\n])*\"|'(\\.|[^'\\\n])*'",
        " ",
        code,
        flags=re.DOTALL,
    )


def _balanced(code: str) -> bool:
    bare = _code_only(code)
    return "{" in bare and bare.count("{") == bare.count("}")


def _defined_names(code: str) -> set[str]:
    bare = _code_only(code)
    return {name for pattern in _DEFINED_NAMES for name in pattern.findall(bare)}


def _is_device_code(block: _Block) -> bool:
    return block.lang in _CODE_LANGS and not _HOST_CODE.search(_code_only(block.body))


def _only_preprocessor(code: str) -> bool:
    lines = [line.strip() for line in _code_only(code).splitlines() if line.strip()]
    return bool(lines) and all(line.startswith("#") for line in lines)


def _with_helpers(blocks: list[_Block], chosen: int, since: int) -> str:
    """The chosen block, preceded by the blocks of helpers it uses (from the same answer).

    Blocks "belong together" when the kernel (or a helper already joined) names something they
    define, or when they are only `#include`s and the kernel block has none; host code (launches,
    `main`, `cudaMalloc`) never joins."""
    kernel_code = blocks[chosen].body.strip("\n")
    candidates = [
        i
        for i in range(since, len(blocks))
        if i != chosen
        and _is_device_code(blocks[i])
        and blocks[i].closed
        and not _kernels_defined(blocks[i].body)
    ]
    joined: set[int] = set()
    has_includes = re.search(r"^[ \t]*#[ \t]*include\b", kernel_code, re.MULTILINE) is not None
    used_text = _code_only(kernel_code)
    own = _defined_names(kernel_code)
    changed = True
    while changed:
        changed = False
        for i in candidates:
            if i in joined:
                continue
            body = blocks[i].body
            names = _defined_names(body) - own
            uses = any(re.search(rf"\b{re.escape(n)}\b", used_text) for n in names)
            if uses or (_only_preprocessor(body) and not has_includes):
                joined.add(i)
                used_text += "\n" + _code_only(body)
                changed = True
    parts = [blocks[i].body.strip("\n") for i in sorted(joined)]
    return "\n\n".join([*parts, kernel_code])


def _truncation(what: str) -> str:
    return (
        f"reply truncated (finish_reason length) {what}: raise the output token limit "
        "(cudaLlm.maxTokens / --max-tokens) or lower cudaLlm.reasoningEffort"
    )


def _brief_text(text: str) -> str:
    one = " ".join(text.split())
    return one if len(one) <= MAX_REFUSAL_CHARS else one[: MAX_REFUSAL_CHARS - 3] + "..."


def extract_kernel(
    text: str,
    kernel: str,
    finish_reason: str | None = None,
    *,
    refusal: str | None = None,
    reasoning: str | None = None,
) -> tuple[str | None, str | None]:
    """(code, None) with the reply's final kernel `__global__ ... kernel(` and the helpers it
    uses, or (None, why there is none). `refusal`, `reasoning`: the message's own fields
    (`refusal`, `reasoning_content`) where the endpoint sends them."""
    if refusal and refusal.strip():
        return None, f"the model refused: {_brief_text(refusal)}"
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if finish_reason == "content_filter":
        shown = f": {_brief_text(text)}" if text.strip() and "```" not in text else ""
        return None, f"the endpoint's content filter stopped the reply{shown}"
    truncated = finish_reason == "length"
    answer, thought, thinking = split_reasoning(text)
    if thinking and truncated:
        return None, _truncation("while the model was still reasoning (<think> never closed)")
    if thinking and not answer.strip():
        answer = thought  # the model never closed its reasoning: its answer is in there
    if not answer.strip():
        if truncated:
            return None, _truncation("while the model was still reasoning, before any answer")
        if (reasoning and reasoning.strip()) or thought.strip():
            return None, "the reply has reasoning but no answer (empty content)"
        return None, "the reply was empty"
    blocks = [b for b in _fenced_blocks(answer) if b.lang in _CODE_LANGS]
    defining = [i for i, b in enumerate(blocks) if _defines_kernel(b.body, kernel)]
    if truncated and blocks and not blocks[-1].closed:
        drafts = [i for i in defining if blocks[i].closed]
        earlier = (
            f"; the {len(drafts)} complete earlier draft(s) before it were not taken"
            if drafts
            else ""
        )
        return None, _truncation(f"inside its last code block{earlier}")
    if defining:
        chosen = defining[-1]
        since = defining[-2] + 1 if len(defining) > 1 else 0
        code = _with_helpers(blocks, chosen, since)
        if not _balanced(code):
            if truncated:
                return None, _truncation("inside the kernel")
            return None, f"the code block defining {kernel} has unbalanced braces"
        return code.rstrip() + "\n", None
    if truncated:
        return None, _truncation("before the kernel was written")
    others = [b for b in blocks if _kernels_defined(b.body)]
    if others:
        # a kernel under another name: the judge rejects it as `signature_mismatch`
        last = others[-1]
        if _balanced(last.body):
            return last.body.strip("\n").rstrip() + "\n", None
    if any(_defines_kernel(b.body, kernel) for b in _fenced_blocks(thought)):
        return None, (
            f"the kernel {kernel} appears only in the model's reasoning (<think>), "
            "not in its answer"
        )
    if not blocks:
        return None, (
            f"no code block in the reply: expected the full kernel `__global__ void {kernel}(...)` "
            "inside one ```cuda fenced block"
        )
    return None, f"no code block in the reply defines `__global__ void {kernel}(...)`"
