"""The parsed test spec: what `parse_spec` returns and the evaluator, the suite and the optimizer
read. Plain frozen data; `TestSpec.cases()` evaluates its expressions (cases.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from cuda_llm_lsp.source.roles import Role
from cuda_llm_lsp.source.spec.cases import Case, evaluate_cases
from cuda_llm_lsp.source.spec.tunables import Configuration, Tunables
from cuda_llm_lsp.source.text import Span

CAPTURED = "@captured"  # a by-value argument's value: its bytes from the spec's capture


@dataclass(frozen=True)
class SpecError:
    span: Span  # file coordinates (0-based), inside the spec block
    message: str
    severity: Literal["error", "warning"] = "error"  # a warning leaves the spec usable


@dataclass(frozen=True)
class InitSpec:
    kind: Literal["uniform", "normal", "randint", "arange", "zeros", "ones"]
    a: float = 0.0
    b: float = 0.0


@dataclass(frozen=True)
class ArgSpec:
    name: str
    index: int  # position in the kernel's signature
    c_type: str  # from the signature
    is_pointer: bool
    role: Role | None = None  # pointers only
    dtype: str | None = None  # pointers: element type; scalars: numpy-style type of the C type
    count: str | None = None  # pointers: element count expression (source text)
    value: str | None = None  # scalars: literal or expression (source text), or CAPTURED
    init: InitSpec | None = None
    # `"@captured"` by-value arguments (any C type: a struct, an enum, a cutlass::half_t): their
    # bytes as the program passed them, filled in from the spec's capture (evaluate/captured.py)
    raw: bytes | None = None
    # ...and where this run's buffer addresses go in them: (byte, buffer name, bytes past the
    # buffer's start), one per device address the capture found inside them
    moves: tuple[tuple[int, str, int], ...] = ()
    # a buffer the capture found inside by-value argument `index`: its address is written into
    # that argument's bytes at this byte offset (evaluate/captured.py; never written in a spec)
    within: int | None = None
    # ...and the allocations right after its own that it spans too, each as (parameter, byte)
    joined: tuple[tuple[int, int], ...] = ()

    @property
    def is_captured(self) -> bool:
        """A by-value argument whose bytes come from the capture (`args.X = "@captured"`)."""
        return not self.is_pointer and (self.value or "").split()[:1] == [CAPTURED]

    @property
    def captured_dtype(self) -> str | None:
        """`"@captured float32"`: the element type of the buffers the struct points to."""
        words = (self.value or "").split()
        return words[1] if self.is_captured and len(words) > 1 else None


@dataclass(frozen=True)
class TestSpec:
    kernel: str
    sizes: dict[str, list[int]]
    grid: tuple[str, ...]  # expressions, 1..3
    block: tuple[str, ...]
    args: tuple[ArgSpec, ...]  # in signature order
    smem: str = "0"
    outputs: tuple[str, ...] = ()  # pointers compared after a run
    rtol: float = 1e-4
    atol: float = 1e-5
    # atol is the output type's default (the spec sets none): an absolute error at unit scale,
    # applied times min(1, the buffer's mean |expected|) (evaluate/compare.effective_atol)
    atol_relative: bool = False
    instance: str | None = None
    inputs: str | None = None  # "path/to/file.py:function", relative to the .cu file
    # a capture directory relative to the .cu file (docs/design.md "Capture"): the timed case's
    # data, and the outputs the original must reproduce on it
    capture: str | None = None
    flops: str | None = None  # optional FLOP count expression (suite floor)
    extra: dict[str, object] = field(default_factory=dict)
    # template parameter -> argument text of `instance` (integer ones are names in expressions)
    template_args: dict[str, str] = field(default_factory=dict)
    # hidden generalisation cases (spec/hidden.py): extra sizes unless `generalize = false`;
    # offset (non-16-byte-aligned) buffers unless `align` is 16 or more
    generalize: bool = True
    align: int | None = None  # bytes every buffer's base is aligned to, as the kernel assumes
    # `tune.NAME` / `restrict` (spec/tunables.py): the cases are those of `tunables.default`,
    # bound in `template_args`; `with_configuration` gives another configuration's spec
    tunables: Tunables | None = None

    __test__ = False  # not a pytest class

    @property
    def case_count(self) -> int:
        return len(next(iter(self.sizes.values()), [0]))

    def cases(self) -> list[Case]:
        """All cases; the last is the timed one."""
        cases, problems = evaluate_cases(self)
        if problems:
            raise ValueError(problems[0].message)
        return cases

    def with_configuration(self, config: Configuration) -> TestSpec:
        """This spec with the tunables bound to `config` (its grid, block and smem cases)."""
        return replace(self, template_args={**self.template_args, **Tunables.as_constants(config)})

    def arg(self, name: str) -> ArgSpec | None:
        return next((a for a in self.args if a.name == name), None)
