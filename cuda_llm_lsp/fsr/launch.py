"""Whether a run's candidates may choose their own launch, and a candidate's launch block.

docs/design.md "Candidate launch block": a candidate may carry `/* @cuda-llm launch */` above
its kernel. The policy (`cudaLlm.launch` / `--launch`, one of `config.LAUNCH_POLICIES`): `keep`
forbids it, `free` allows it whatever the file's launch sites are, `auto` (default) allows it
only when every launch site of the kernel in the file can be rewritten safely
(`rewrite_launches(...).safe`), so that an accepted launch change leaves the program consistent.
A file with no launch site of the kernel keeps its launch under `auto`: its launches live
elsewhere (another translation unit, Python host code, a library's caller) where the edit cannot
follow, so a changed launch would silently break them; `free` is the user saying the spec's
launch is the only one.

A launch block is never silently dropped (issue [judge]): where the launch stays fixed the run
says so at its start (`LaunchRule.notice`), the prompt offers no launch freedom, and a candidate
that still carries a block is `bad_launch` with the reason (`fixed_launch_message`); a block
placed elsewhere than directly above the kernel (above the reply's helpers) is moved there when
it is the reply's only one, else the candidate is `bad_launch` saying where it belongs
(`placed_launch_block`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cuda_llm_lsp.compile.candidate_policy import strip_spec_comments
from cuda_llm_lsp.source.kernels import find_kernels
from cuda_llm_lsp.source.launch_sites import rewrite_launches
from cuda_llm_lsp.source.spec import TestSpec
from cuda_llm_lsp.source.spec.launch import LaunchConfig, parse_launch_block
from cuda_llm_lsp.source.text import offset_of

_LAUNCH_BLOCK = re.compile(r"/\*\s*@cuda-llm\s+launch\b")
KEEP_REASON = "the launch policy is `keep` (cudaLlm.launch / --launch)"


@dataclass(frozen=True)
class LaunchRule:
    """What this run's prompt says about the launch, and whether a candidate's block is used."""

    allowed: bool
    reason: str  # why the original launch must be kept ("" when allowed or policy `keep`)
    original: LaunchConfig
    sizes: tuple[str, ...]  # the names a launch block may use

    @property
    def fixed_reason(self) -> str | None:
        """Why the launch stays fixed this run; None when candidates may choose theirs."""
        if self.allowed:
            return None
        return self.reason or KEEP_REASON

    def notice(self) -> str:
        """The run's first word on the launch (CLI, JSON, LSP progress)."""
        if self.allowed:
            return ("launch: candidates may choose their own grid, block and shared memory "
                    f"(original {self.original.describe()})")  # fmt: skip
        return f"launch: fixed to the original ({self.original.describe()}): {self.fixed_reason}"

    def fixed_launch_message(self) -> str:
        """The `bad_launch` message of a candidate with a launch block while the launch is
        fixed: it was written for a launch it would not get."""
        return (f"the reply carries a `@cuda-llm launch` block, but the launch is fixed for this "
                f"run ({self.fixed_reason}): the kernel must work with the original launch "
                f"({self.original.describe()}); write it for that launch, without a launch "
                "block")  # fmt: skip

    def prompt_text(self) -> str:
        """The task's paragraph on the launch configuration."""
        if not self.allowed:
            why = f" ({self.reason})" if self.reason else ""
            return (f"Launch: keep the original launch configuration ({self.original.describe()})"
                    f"{why}; do not add a `@cuda-llm launch` block.")  # fmt: skip
        names = ", ".join(self.sizes) or "(none)"
        return (
            "Launch: you may choose your own grid, block and dynamic shared memory (the original "
            f"is {self.original.describe()}). To do so, put this block in your ```cuda block "
            "directly above the kernel (an example; keys you leave out keep the original's "
            "values):\n"
            '```cuda\n/* @cuda-llm launch\ngrid = ["cdiv(N, 64)", "cdiv(M, 64)"]\nblock = 256\n'
            'smem = "64 * 16 * 4"\n*/\n```\n'
            "`grid` and `block`: an integer, an expression string, or a list of up to 3; `smem`: "
            "bytes of dynamic shared memory. Expressions use + - * / (integer division) %, "
            f"cdiv(a, b), min, max, and only these size names: {names}. Every case must launch "
            "within this GPU's limits, and the launch must write every output element.\n"
            "Numbers you are unsure of can be tuned: `tune.NAME = [64, 128, 256]` in the block "
            '(integers; optionally `restrict = ["NAME * ITEMS <= 1024"]`) compiles your '
            "kernel with -DNAME=value for each configuration, and NAME may appear in grid, "
            "block and smem. A correct kernel is timed in every configuration and ranks with "
            "its fastest correct one. The default is the first value, or your own guarded "
            "#ifndef NAME / #define NAME value / #endif."
        )


def launch_rule(policy: str, file_text: str, spec: TestSpec) -> LaunchRule:
    """The run's rule for `spec`'s kernel in `file_text` under `policy` (see the module)."""
    original = LaunchConfig.of_spec(spec)
    sizes = tuple(spec.sizes)
    if policy == "keep":
        return LaunchRule(False, "", original, sizes)
    if policy == "free":
        return LaunchRule(True, "", original, sizes)
    try:
        rewrite = rewrite_launches(file_text, spec, original)
    except ValueError as exc:
        return LaunchRule(False, f"its launch cannot be read: {exc}", original, sizes)
    if rewrite.safe:
        return LaunchRule(True, "", original, sizes)
    if not rewrite.refusals or all(r.reason == "no_site" for r in rewrite.refusals):
        reason = ("the file has no launch site of the kernel: it is launched from elsewhere, "
                  "where a changed launch cannot follow (--launch free / cudaLlm.launch "
                  "\"free\" allows it when the spec's launch is the only one)")  # fmt: skip
    else:
        reason = "a launch site of the kernel cannot be rewritten safely: " + "; ".join(
            r.message for r in rewrite.refusals[:3]
        )
    return LaunchRule(False, reason, original, sizes)


def candidate_launch(code: str, kernel: str, spec: TestSpec) -> LaunchConfig | str | None:
    """The launch block of `kernel` in `code` (a candidate with its block: the loop's cleaned
    reply with the block put back, `tune.candidate.with_launch_block`): its configuration, None
    when there is none, or why it is unusable (`bad_launch`, fed back to the model)."""
    found = [k for k in find_kernels(code) if k.name == kernel]
    if len(found) != 1 or found[0].launch_block is None:
        return None
    config, errors = parse_launch_block(found[0], spec, code)
    if config is None:
        return "the launch block is unusable: " + "; ".join(e.message for e in errors[:4])
    return config


def launch_blocks(code: str) -> list[str]:
    """The `/* @cuda-llm launch */` comments of a reply, in order (found by the lexer)."""
    return [b for b in strip_spec_comments(code).blocks if _LAUNCH_BLOCK.match(b)]


def placed_launch_block(code: str, kernel: str) -> tuple[str, str | None]:
    """(`code` with its launch block directly above `kernel`, None), or (`code`, why not).

    A reply's only launch block is used wherever it sits (models put it above their helpers):
    moved to directly above the kernel. Several blocks, or one above the kernel and another
    elsewhere, are ambiguous: the message says where the one block belongs."""
    blocks = launch_blocks(code)
    found = [k for k in find_kernels(code) if k.name == kernel]
    if not blocks or len(found) != 1:
        return code, None  # (no block; or the build reports the kernel's own problem)
    if len(blocks) > 1:
        return code, (
            f"the reply has {len(blocks)} `@cuda-llm launch` blocks: give exactly one, directly "
            f"above `__global__ ... {kernel}(` (only comments between), not above helpers"
        )
    if found[0].launch_block is not None:
        return code, None
    block = blocks[0]
    at = code.find(block)
    end = at + len(block)
    if code[end : end + 1] == "\n" and code.rfind("\n", 0, at) + 1 == at:
        end += 1  # the block's own line goes with it
    moved = code[:at] + code[end:]
    (target,) = [k for k in find_kernels(moved) if k.name == kernel]
    start = offset_of(moved, target.span.start)
    start = moved.rfind("\n", 0, start) + 1
    return moved[:start] + block + "\n" + moved[start:], None
