"""Test specs: the `/* @cuda-llm */` TOML block above a kernel (format: DESIGN.md, a contract).

Parsing never raises on user input: every problem becomes a `SpecError` at the offending line
inside the block. Expressions are parsed by `source.expr` (never `eval`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from cuda_llm_lsp.source.kernels import Kernel
from cuda_llm_lsp.source.text import Span

Role = Literal["in", "out", "inout"]
DType = Literal[
    "float32", "float64", "float16", "bfloat16", "int8", "uint8", "int32", "uint32", "int64"
]
DTYPES: tuple[str, ...] = (
    "float32", "float64", "float16", "bfloat16", "int8", "uint8", "int32", "uint32", "int64",
)  # fmt: skip


@dataclass(frozen=True)
class SpecError:
    span: Span  # file coordinates (0-based), inside the spec block
    message: str


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
    value: str | None = None  # scalars: literal or expression (source text)
    init: InitSpec | None = None


@dataclass(frozen=True)
class Case:
    """One concrete test case: every expression evaluated for size index `index`."""

    index: int
    sizes: dict[str, int]
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem: int
    counts: dict[str, int]  # pointer arg -> element count
    scalars: dict[str, int | float]  # scalar arg -> value

    def describe(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.sizes.items()) or f"case {self.index}"


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
    instance: str | None = None
    inputs: str | None = None  # "path/to/file.py:function", relative to the .cu file
    flops: str | None = None  # optional FLOP count expression (suite floor)
    extra: dict[str, object] = field(default_factory=dict)

    __test__ = False  # not a pytest class

    @property
    def case_count(self) -> int:
        return len(next(iter(self.sizes.values()), [0]))

    def cases(self) -> list[Case]:
        """All cases; the last is the timed one."""
        raise NotImplementedError

    def arg(self, name: str) -> ArgSpec | None:
        return next((a for a in self.args if a.name == name), None)


def parse_spec(kernel: Kernel, source: str) -> tuple[TestSpec | None, list[SpecError]]:
    """The kernel's spec (from `kernel.spec`) and the problems found in it.

    `source` is the whole file text (roles of unprefixed pointers are decided from the body).
    Returns (None, []) when the kernel has no spec block; spec is None whenever it is unusable.
    """
    raise NotImplementedError


def draft_spec(kernel: Kernel, source: str) -> str:
    """A reviewable `/* @cuda-llm ... */` block for a kernel without one; it must parse."""
    raise NotImplementedError
