"""Cases: a spec's expressions evaluated for every size index.

`evaluate_cases` turns the sizes, launch, shared memory, counts, scalar values and `flops` of a
spec into concrete `Case`s and reports what fails (a non-integer grid, a block over the limit, a
value out of its C type's range) as `Problem`s by key path. The parser calls it so a spec it
returns has valid cases; `TestSpec.cases()` calls it again. It reads a spec through the
`CaseSource` protocol: model.py imports this module, so this one may not import model.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

from cuda_llm_lsp.source.c_types import FLOAT_DTYPES, INT_RANGES
from cuda_llm_lsp.source.expr import Expr, ExprError, Number, parse_expr
from cuda_llm_lsp.source.spec.locate import Problem
from cuda_llm_lsp.source.templates import template_constants

MAX_THREADS_PER_BLOCK = 1024
MAX_COUNT = 2**36  # elements of one buffer: beyond what any GPU holds
_INT64 = 2**63
_BLOCK_LIMITS = (1024, 1024, 64)
_GRID_LIMITS = (2**31 - 1, 65535, 65535)


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
    flops: int | float | None = None  # the spec's `flops` for this case, if given

    def describe(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.sizes.items()) or f"case {self.index}"


class CaseArg(Protocol):
    """What case evaluation reads of an argument (`ArgSpec`)."""

    @property
    def name(self) -> str: ...
    @property
    def c_type(self) -> str: ...
    @property
    def is_pointer(self) -> bool: ...
    @property
    def dtype(self) -> str | None: ...
    @property
    def count(self) -> str | None: ...
    @property
    def value(self) -> str | None: ...
    @property
    def is_captured(self) -> bool: ...  # `"@captured"`: bytes from the capture, no value


class CaseSource(Protocol):
    """What case evaluation reads of a spec (`TestSpec`)."""

    @property
    def sizes(self) -> Mapping[str, Sequence[int]]: ...
    @property
    def grid(self) -> Sequence[str]: ...
    @property
    def block(self) -> Sequence[str]: ...
    @property
    def smem(self) -> str: ...
    @property
    def args(self) -> Sequence[CaseArg]: ...
    @property
    def flops(self) -> str | None: ...
    @property
    def template_args(self) -> Mapping[str, str]: ...
    @property
    def case_count(self) -> int: ...


def evaluate_cases(spec: CaseSource) -> tuple[list[Case], list[Problem]]:
    """Every case of `spec`, and the first problem per key (evaluation-time errors).

    Long because it evaluates the spec's keys in the order they depend on each other, one
    block per key."""
    constants = template_constants(spec.template_args)
    problems: dict[tuple[str, ...], Problem] = {}
    cases: list[Case] = []

    def fail(path: tuple[str, ...], message: str, needle: str | None = None) -> None:
        problems.setdefault(path, Problem(path, message, needle))

    parsed: dict[str, Expr] = {}

    def value(
        path: tuple[str, ...], text: str, env: Mapping[str, Number], what: str, where: str
    ) -> Number | None:
        try:
            expr = parsed.get(text) or parse_expr(text)
            parsed[text] = expr
            result = expr.evaluate(env)
        except ExprError as e:
            fail(path, f"{what}: {e.message} in {where}", text)
            return None
        if not _fits(result):
            fail(path, f"{what} = {text!r} is beyond 64-bit integers in {where}", text)
            return None
        return result

    def integer(
        path: tuple[str, ...], text: str, env: Mapping[str, Number], what: str, where: str
    ) -> int | None:
        result = value(path, text, env, what, where)
        if result is None:
            return None
        if isinstance(result, float):
            if not result.is_integer():
                fail(path, f"{what} = {text!r} is {result}, not an integer, in {where}", text)
                return None
            result = int(result)
            if not _fits(result):
                fail(path, f"{what} = {text!r} is beyond 64-bit integers in {where}", text)
                return None
        return result

    for index in range(spec.case_count):
        sizes = {name: values[index] for name, values in spec.sizes.items()}
        env: dict[str, Number] = {**constants, **sizes}
        where = f"case {index} ({', '.join(f'{k}={v}' for k, v in sizes.items()) or 'no sizes'})"
        dims: dict[str, tuple[int, int, int]] = {}
        for key, texts, limits in (
            ("grid", spec.grid, _GRID_LIMITS),
            ("block", spec.block, _BLOCK_LIMITS),
        ):
            got: list[int] = []
            for axis, text in enumerate(texts):
                what = f"{key}[{axis}]" if len(texts) > 1 else key
                n = integer((key,), text, env, what, where)
                if n is None:
                    break
                if n < 1:
                    fail(
                        (key,),
                        f"{what} = {text!r} is {n} in {where}; every dimension must be at least 1",
                        text,
                    )
                    break
                if n > limits[axis]:
                    fail(
                        (key,),
                        f"{what} = {text!r} is {n} in {where}; "
                        f"the limit for axis {'xyz'[axis]} is {limits[axis]}",
                        text,
                    )
                    break
                got.append(n)
            else:
                padded = (*got, 1, 1, 1)[:3]
                dims[key] = cast(tuple[int, int, int], padded)
        block = dims.get("block")
        if block is not None and block[0] * block[1] * block[2] > MAX_THREADS_PER_BLOCK:
            fail(
                ("block",),
                f"block has {block[0] * block[1] * block[2]} threads ({block[0]} x {block[1]} x "
                f"{block[2]}) in {where}; the limit is {MAX_THREADS_PER_BLOCK}",
            )
            block = None
        smem = integer(("smem",), spec.smem, env, "smem", where)
        if smem is not None and smem < 0:
            fail(("smem",), f"smem is {smem} in {where}; it must not be negative", spec.smem)
            smem = None
        counts: dict[str, int] = {}
        scalars: dict[str, int | float] = {}
        ok = True
        for arg in spec.args:
            path = ("args", arg.name)
            if arg.is_pointer:
                count = integer(path, arg.count or "", env, f"args.{arg.name} count", where)
                if count is not None and count > MAX_COUNT:
                    fail(
                        path,
                        f"args.{arg.name} count {arg.count!r} is {count} in {where}: over the "
                        f"limit of {MAX_COUNT} (2^36) elements, more than a GPU holds",
                        arg.count,
                    )
                    count = None
                if count is not None and count < 0:
                    fail(
                        path,
                        f"args.{arg.name} count {arg.count!r} is {count} in {where}; "
                        "it must not be negative",
                        arg.count,
                    )
                    count = None
                if count is None:
                    ok = False
                else:
                    counts[arg.name] = count
                continue
            if arg.is_captured:
                continue  # bytes from the capture, no value to evaluate
            scalar = _scalar_value(arg, env, where, fail, value)
            if scalar is None:
                ok = False
            else:
                scalars[arg.name] = scalar
        flops: Number | None = None
        if spec.flops is not None:
            flops = value(("flops",), spec.flops, env, "flops", where)
            if flops is not None and flops < 0:
                fail(
                    ("flops",), f"flops is {flops} in {where}; it must not be negative", spec.flops
                )
                flops = None
            if flops is None:
                ok = False
        grid = dims.get("grid")
        if grid is None or block is None or smem is None or not ok:
            continue
        cases.append(Case(index, sizes, grid, block, smem, counts, scalars, flops))
    return cases, list(problems.values())


def _scalar_value(
    arg: CaseArg, env: Mapping[str, Number], where: str, fail: Any, value: Any
) -> int | float | None:
    path = ("args", arg.name)
    text = arg.value or ""
    result = value(path, text, env, f"args.{arg.name}", where)
    if result is None:
        return None
    dtype = arg.dtype or "float32"
    if dtype in FLOAT_DTYPES:
        return float(result)
    if isinstance(result, float):
        if not result.is_integer():
            fail(
                path,
                f"args.{arg.name} = {text!r} is {result} in {where}, "
                f"but {arg.c_type.strip()} needs an integer",
                text,
            )
            return None
        result = int(result)
    low, high = INT_RANGES.get(dtype, (-(2**63), 2**63 - 1))
    if not low <= result <= high:
        fail(
            path,
            f"args.{arg.name} = {text!r} is {result} in {where}, "
            f"outside the range of {arg.c_type.strip()} ({dtype})",
            text,
        )
        return None
    return result


def _fits(value: Number) -> bool:
    """Whether an integer result fits in 64 bits (floats are bounded by their own range; an
    integer of thousands of digits cannot even be shown in a message)."""
    return not isinstance(value, int) or -_INT64 <= value < _INT64
