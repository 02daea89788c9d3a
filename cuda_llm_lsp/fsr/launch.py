"""Whether a run's candidates may choose their own launch, and a candidate's launch block.

docs/design.md "Candidate launch block": a candidate may carry `/* @cuda-llm launch */` above
its kernel. The policy (`cudaLlm.launch` / `--launch`, one of `config.LAUNCH_POLICIES`): `keep`
forbids it (a block is ignored), `free` allows it whatever the file's launch sites are, `auto`
(default) allows it only when every launch site of the kernel in the file can be rewritten safely
(`rewrite_launches(...).safe`), so that an accepted launch change leaves the program consistent;
otherwise the prompt says the original launch must be kept, and why.
"""

from __future__ import annotations

from dataclasses import dataclass

from cuda_llm_lsp.source.kernels import find_kernels
from cuda_llm_lsp.source.launch_sites import rewrite_launches
from cuda_llm_lsp.source.spec import TestSpec
from cuda_llm_lsp.source.spec.launch import LaunchConfig, parse_launch_block


@dataclass(frozen=True)
class LaunchRule:
    """What this run's prompt says about the launch, and whether a candidate's block is used."""

    allowed: bool
    reason: str  # why the original launch must be kept ("" when allowed or policy `keep`)
    original: LaunchConfig
    sizes: tuple[str, ...]  # the names a launch block may use

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
        reason = "the file has no launch site of the kernel to rewrite"
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
