"""A candidate's launch block: `/* @cuda-llm launch ... */` directly above its kernel.

The contract is docs/design.md's "Candidate launch block": keys `grid`, `block`, `smem` in the
test spec's TOML syntax and expression language, over the spec's size names and nothing else
(not template constants: a launch site can only be rewritten in terms of values it passes). A key
left out keeps the original's value. Parsing never raises on the block's text: every problem is
a `SpecError` at its place in the candidate, as for a spec. `parse_launch_block` also evaluates
the new configuration on every case of the spec (integers, at least 1, CUDA's fixed limits);
the device's own limits (opt-in shared memory) are the evaluator's to check.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace

from cuda_llm_lsp.source.kernels import Kernel, SpecBlock
from cuda_llm_lsp.source.spec.cases import evaluate_cases
from cuda_llm_lsp.source.spec.locate import Locator
from cuda_llm_lsp.source.spec.model import SpecError, TestSpec
from cuda_llm_lsp.source.spec.parse import _expr_text, _SpecParser, _to_error, _toml_error
from cuda_llm_lsp.source.spec.tunables import TUNE_KEYS, Tunables, parse_tunables

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

LAUNCH_KEYS = ("grid", "block", "smem")


@dataclass(frozen=True)
class LaunchConfig:
    """A launch configuration as expressions over size names (source text, as in a spec)."""

    grid: tuple[str, ...]  # 1..3
    block: tuple[str, ...]  # 1..3
    smem: str = "0"
    tunables: Tunables | None = None  # `tune.NAME` / `restrict` in the block (spec/tunables.py)

    @classmethod
    def of_spec(cls, spec: TestSpec) -> LaunchConfig:
        return cls(spec.grid, spec.block, spec.smem, spec.tunables)

    def applied_to(self, spec: TestSpec) -> TestSpec:
        """`spec` launched with this configuration (its cases are the candidate's)."""
        launched = replace(spec, grid=self.grid, block=self.block, smem=self.smem)
        if self.tunables is None or self.tunables is spec.tunables:
            return launched
        return replace(launched, tunables=self.tunables).with_configuration(self.tunables.default)

    def describe(self) -> str:
        """One line for prompts, history and suggestions: `grid=[...] block=[...] smem=...`."""

        def dims(texts: tuple[str, ...]) -> str:
            return texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"

        return f"grid={dims(self.grid)} block={dims(self.block)} smem={self.smem}"


def parse_launch_block(
    kernel: Kernel, spec: TestSpec, source: str
) -> tuple[LaunchConfig | None, list[SpecError]]:
    """The candidate `kernel`'s launch configuration and the problems found in its block.

    `kernel` is found in the candidate's text (`source`), `spec` is the original's. Returns
    (None, []) when the kernel carries no launch block (the original launch holds), and
    (None, errors) when the block is unusable.
    """
    block = kernel.launch_block
    if block is None:
        return None, []
    return parse_launch_text(block, kernel, spec, source)


def parse_launch_text(
    block: SpecBlock, kernel: Kernel, spec: TestSpec, source: str
) -> tuple[LaunchConfig | None, list[SpecError]]:
    """`parse_launch_block` for a block already located (see there)."""
    locator = Locator(block)
    try:
        doc = tomllib.loads(block.toml)
    except tomllib.TOMLDecodeError as e:
        return None, [_toml_error(locator, e)]
    except RecursionError:
        return None, [SpecError(locator.marker(), "TOML nests too deeply: not read")]
    parser = _SpecParser(kernel, source)
    parser.names = set(spec.sizes)
    for key in doc:
        if key not in LAUNCH_KEYS + TUNE_KEYS:
            parser.error(
                (key,),
                f"unknown key {key!r} in the launch block: only "
                f"{', '.join(LAUNCH_KEYS + TUNE_KEYS)} "
                "may be given (the test spec itself is not the candidate's to change)",
            )
    if not any(key in doc for key in LAUNCH_KEYS + TUNE_KEYS):
        parser.error((), "the launch block gives none of grid, block, smem")
    tunables = None
    if "tune" in doc or "restrict" in doc:
        tunables = parse_tunables(parser, doc, set(spec.sizes), source)
        raw = doc.get("tune")
        parser.names |= set(raw) if isinstance(raw, dict) else set()
    grid = parser.parse_dims("grid", doc["grid"]) if "grid" in doc else spec.grid
    dims = parser.parse_dims("block", doc["block"]) if "block" in doc else spec.block
    smem: str | None = spec.smem
    if "smem" in doc:
        smem = _expr_text(doc["smem"])
        if smem is None:
            parser.error(("smem",), "smem must be an integer or an expression string")
        elif parser.expression(("smem",), smem, "smem") is None:
            smem = None
    if parser.has_errors() or grid is None or dims is None or smem is None:
        return None, _errors(locator, parser)
    config = LaunchConfig(grid, dims, smem, tunables or spec.tunables)
    _, problems = evaluate_cases(config.applied_to(spec))
    parser.problems.extend(p for p in problems if p.path and p.path[0] in LAUNCH_KEYS)
    errors = _errors(locator, parser)
    return (None if errors else config), errors


def _errors(locator: Locator, parser: _SpecParser) -> list[SpecError]:
    errors = [_to_error(locator, p) for p in parser.problems]
    errors.sort(key=lambda e: e.span.start)
    return errors
