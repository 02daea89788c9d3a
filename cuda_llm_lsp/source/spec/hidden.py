"""Hidden generalisation cases: what a candidate is also judged on, never shown in a prompt.

Kernels that were correct only where they were tested (a K tail handled up to 8, a constant shift
taken from `init`'s range instead of the row maximum, `float4` loads that assume a 16-byte
aligned base, a dropped `eps`) passed every listed case. `hidden_cases` derives, from a parsed
spec and a seed, deterministically:

- **size** cases (unless `generalize = false`): each size (names whose lists are equal move
  together) at spec size ± 1, at a multiple of 32 while the other sizes keep their tails (a kernel
  that drops its bounds checks when one dimension is "round"), a prime near it and other tail
  residues modulo 32, one at a time from a base case (the largest spec case using at most half
  of `budget_bytes`), plus one with every size at a prime; every case re-evaluated (grid, counts,
  scalars) and kept only if valid and within `budget_bytes` of buffers;
- **range** cases (not with an `inputs` hook): every floating-point input (`in`, `inout`) at
  large magnitudes, constant, or all zero, as `init` overrides. At large magnitudes `atol` is
  scaled by the square of the input scale (`atol_scale`): a product-sum such as a matmul has
  results near zero built from terms a million times larger, and an honest reordering of those
  sums (shared-memory atomics, tree reductions) moves them by far more than the spec's `atol`,
  which was chosen for its own range. Non-finite results and errors relative to large results
  are still caught;
  the constant is a short dyadic value (`simple_constant`: +-m x 2^k, m in 1, 3, 5, inside
  `init`'s range) so that every product and sum of such values up to ~2^19 terms is exact in
  float32 whatever the order: a serial sum and a tree sum of 262,144 copies of 0.123 differ
  (the oracle's serial one is the inaccurate side), of 0.375 they are bit-identical; so are a
  row's mean as sum / n and, for the constant chosen, as sum x (1/n) at every size of the case,
  which makes a constant row's x - mean exactly 0 (what the case is for: a layer norm that
  drops `eps` divides 0 by 0 there);
- an **offset** case (unless `align` is 16 or more): every buffer passed at a base that is
  aligned to its element (or to `align`) but not to 16 bytes, at sizes rounded up to multiples of
  32 where the budget allows (so the vector paths a kernel takes on "round" rows, `float4` loads
  that assume an aligned base, are the ones that run).

Pure: no I/O, no numpy; the evaluator runs them (it must run the oracle first and drop a case the
original itself fails or makes non-finite: a hidden case tests generality, not the spec's
author).
"""

from __future__ import annotations

import dataclasses
import math
import random
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from cuda_llm_lsp.source.c_types import FLOAT_DTYPES, VECTOR_TYPES, normalize_c_type
from cuda_llm_lsp.source.spec.cases import Case, evaluate_cases
from cuda_llm_lsp.source.spec.model import ArgSpec, InitSpec, TestSpec

HiddenKind = Literal["size", "range", "offset"]
DEFAULT_BUDGET_BYTES = 64 * 2**20  # buffers of one hidden case, all together
MAX_SIZE_CASES = 8
TAIL_MODULUS = 32  # tails of warps and of the usual tile widths (8, 16, 32)
ITEMSIZE = {
    "float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int8": 1, "uint8": 1,
    "int32": 4, "uint32": 4, "int64": 8,
}  # fmt: skip
#: How much wider than `init`'s range the large-magnitude case draws (half types overflow sooner).
LARGE_SCALE = {"float16": 30.0, "bfloat16": 1000.0, "float32": 1000.0, "float64": 1000.0}


@dataclass(frozen=True)
class HiddenCase:
    """One hidden case. `case.index` is past the spec's own cases (its inputs' seed stream)."""

    kind: HiddenKind
    what: str  # for the failure message: "n = 1001 (spec size + 1)", "all-zero inputs", ...
    case: Case
    init: dict[str, InitSpec] = field(default_factory=dict)  # range cases: per pointer
    offsets: dict[str, int] = field(default_factory=dict)  # offset case: bytes past an aligned base
    atol_scale: float = 1.0  # the spec's atol times this (large-magnitude inputs)

    def describe(self) -> str:
        return f"hidden {self.kind} case ({self.what}; {self.case.describe()})"


def hidden_cases(
    spec: TestSpec,
    seed: int,
    *,
    budget_bytes: int = DEFAULT_BUDGET_BYTES,
    max_size_cases: int = MAX_SIZE_CASES,
) -> list[HiddenCase]:
    """The hidden cases of `spec` for `seed` (the same seed gives the same cases). None for
    `"@captured"` arguments: their bytes (sizes, strides, addresses) fit the captured launch
    alone, so no other sizes, values or offsets can be made for them."""
    if any(a.is_captured for a in spec.args):
        return []
    rng = random.Random(f"hidden-cases:{seed}")
    cases = spec.cases()
    fitting = [c for c in cases if buffer_bytes(spec, c) <= budget_bytes]
    if not fitting:
        return []
    # the largest case with room to grow (primes, tails) within the budget
    roomy = [c for c in fitting if 2 * buffer_bytes(spec, c) <= budget_bytes]
    base = (roomy or fitting)[-1]
    out: list[HiddenCase] = []
    if spec.generalize and spec.sizes:
        out += _size_cases(spec, base, rng, budget_bytes, max_size_cases)
    if spec.inputs is None:
        out += _range_cases(spec, base, rng)
    offset = _offset_case(spec, _rounded(spec, base, budget_bytes))
    if offset is not None:
        out.append(offset)
    first = spec.case_count
    return [
        dataclasses.replace(h, case=dataclasses.replace(h.case, index=first + i))
        for i, h in enumerate(out)
    ]


def buffer_bytes(spec: TestSpec, case: Case) -> int:
    """Bytes of all of `case`'s buffers."""
    return sum(
        case.counts.get(a.name, 0) * ITEMSIZE.get(a.dtype or "float32", 8)
        for a in spec.args
        if a.is_pointer
    )


def _size_groups(spec: TestSpec) -> list[tuple[str, ...]]:
    """Size names whose lists are equal in every case (a square matrix's rows and cols)."""
    groups: dict[tuple[int, ...], list[str]] = {}
    for name, values in spec.sizes.items():
        groups.setdefault(tuple(values), []).append(name)
    return [tuple(names) for names in groups.values()]


def _size_cases(
    spec: TestSpec, base: Case, rng: random.Random, budget: int, limit: int
) -> list[HiddenCase]:
    listed = {tuple(spec.sizes[n][i] for n in spec.sizes) for i in range(spec.case_count)}
    first: list[tuple[dict[str, int], str]] = []  # ± 1: the tails a kernel most often misses
    rest: list[tuple[dict[str, int], str]] = []
    groups = _size_groups(spec)
    for names in groups:
        v = base.sizes[names[0]]
        shown = " = ".join(names)
        for value, why in _variants(v, rng):
            sizes = {**base.sizes, **dict.fromkeys(names, value)}
            (first if why.startswith(("spec size", "a multiple")) else rest).append(
                (sizes, f"{shown} = {value} ({why})")
            )
    rng.shuffle(rest)
    if len(groups) > 1:
        primes = {n: _prime_near(base.sizes[g[0]], rng) for g in groups for n in g}
        shown = ", ".join(f"{k}={v}" for k, v in primes.items())
        rest.insert(0, (primes, f"every size prime: {shown}"))
    out: list[HiddenCase] = []
    seen = set(listed)
    for sizes, what in first + rest:
        key = tuple(sizes[n] for n in spec.sizes)
        if key in seen or len(out) >= limit:
            continue
        seen.add(key)
        case = _evaluate(spec, sizes)
        if case is not None and buffer_bytes(spec, case) <= budget:
            out.append(HiddenCase("size", what, case))
    return out


def _variants(v: int, rng: random.Random) -> list[tuple[int, str]]:
    found = [(v + 1, "spec size + 1")]
    if v > 1:
        found.append((v - 1, "spec size - 1"))
    if v % TAIL_MODULUS:
        found.append((_round_up(v), f"a multiple of {TAIL_MODULUS}"))
    found.append((_prime_near(v, rng), "a prime"))
    if v > TAIL_MODULUS:
        residue = v % TAIL_MODULUS
        near = {residue, (residue + 1) % TAIL_MODULUS, (residue - 1) % TAIL_MODULUS}
        others = [r for r in range(1, TAIL_MODULUS) if r not in near]
        for r in rng.sample(others, 2):
            found.append((v - residue + r, f"tail {r} of {TAIL_MODULUS}"))
    return [(value, why) for value, why in found if value >= 1 and value != v]


def _round_up(v: int) -> int:
    return -(-v // TAIL_MODULUS) * TAIL_MODULUS


def _rounded(spec: TestSpec, base: Case, budget: int) -> Case:
    """`base` with every size rounded up to a multiple of 32, if valid and within the budget."""
    sizes = {n: _round_up(v) for n, v in base.sizes.items()}
    if sizes == base.sizes:
        return base
    case = _evaluate(spec, sizes)
    return case if case is not None and buffer_bytes(spec, case) <= budget else base


def _prime_near(v: int, rng: random.Random) -> int:
    """A prime a little above or below `v` (not `v` ± 1, which have their own cases)."""
    step = 1 if v < 5 or rng.random() < 0.5 else -1
    n = v + 2 * step
    while n > 1 and not _is_prime(n):
        n += step
    return n if n > 1 else _next_prime(v + 2)


def _next_prime(n: int) -> int:
    while not _is_prime(n):
        n += 1
    return n


def _is_prime(n: int) -> bool:
    if n < 2:
        return False
    if n % 2 == 0:
        return n == 2
    return all(n % d for d in range(3, math.isqrt(n) + 1, 2))


def _evaluate(spec: TestSpec, sizes: dict[str, int]) -> Case | None:
    variant = dataclasses.replace(spec, sizes={n: [sizes[n]] for n in spec.sizes})
    cases, problems = evaluate_cases(variant)
    return None if problems or not cases else cases[0]


def _float_inputs(spec: TestSpec) -> list[ArgSpec]:
    return [
        a
        for a in spec.args
        if a.is_pointer and a.role in ("in", "inout", None) and a.dtype in FLOAT_DTYPES
    ]


def _init_bounds(init: InitSpec | None) -> tuple[float, float]:
    if init is None or init.kind in ("arange", "zeros", "ones"):
        return -1.0, 1.0
    if init.kind == "normal":
        return init.a - 3 * abs(init.b), init.a + 3 * abs(init.b)
    return min(init.a, init.b), max(init.a, init.b)


def _range_cases(spec: TestSpec, base: Case, rng: random.Random) -> list[HiddenCase]:
    args = _float_inputs(spec)
    if not args:
        return []
    large: dict[str, InitSpec] = {}
    constant: dict[str, InitSpec] = {}
    widest = 1.0  # the largest factor an input's range grew by
    for a in args:
        lo, hi = _init_bounds(a.init)
        scale = LARGE_SCALE.get(a.dtype or "float32", 1000.0)
        widest = max(widest, scale)
        magnitude = max(abs(lo), abs(hi), 1.0) * scale
        large[a.name] = InitSpec("uniform", -magnitude, magnitude)
        c = simple_constant(lo, hi, rng, _mean_lengths(base)) if hi > lo else lo
        constant[a.name] = InitSpec("uniform", c, c)
    zeros = {a.name: InitSpec("zeros") for a in args}
    return [
        HiddenCase(
            "range",
            "inputs of large magnitude, beyond the spec's init range",
            base,
            large,
            atol_scale=widest**2,
        ),
        HiddenCase("range", "constant inputs (every element equal)", base, constant),
        HiddenCase("range", "all-zero inputs", base, zeros),
    ]


MANTISSAS = (1, 3, 5)  # at most 3 significant bits: products <= 5 bits, exact sums to 2^19 terms


def simple_constant(lo: float, hi: float, rng: random.Random, lengths: Sequence[int] = ()) -> float:
    """A nonzero +-m x 2^k (m in MANTISSAS) inside [lo, hi] and within a factor 8 of its largest
    magnitude, drawn by `rng`; preferring values whose mean over n copies is exact as
    sum x float32(1/n) too, for every n in `lengths` (a layer norm's mean of a constant row is
    then the constant, however the kernel divides). A range holding none gets its shortest
    dyadic value (the fewest significant bits), then `lo`."""
    top = max(abs(lo), abs(hi))
    if top == 0:
        return lo
    high = math.frexp(top)[1]  # top < 2^high
    found = sorted(
        {
            sign * m * 2.0**k
            for m in MANTISSAS
            for k in range(high - 6, high + 1)
            for sign in (1, -1)
            if lo <= sign * m * 2.0**k <= hi and m * 2.0**k * 8 >= top
        }
    )
    exact = [c for c in found if all(_mean_exact(c, n) for n in lengths)]
    if exact or found:
        return rng.choice(exact or found)
    for bits in range(1, 25):  # a narrow range: its value with the fewest significant bits
        step = 2.0 ** (high - bits)
        first, last = math.ceil(lo / step), math.floor(hi / step)
        if first <= last:
            multiples = [j * step for j in range(first, min(last, first + 64) + 1) if j]
            if multiples:
                return rng.choice(multiples)
    return lo


def _f32(x: float) -> float:
    return struct.unpack("f", struct.pack("f", x))[0]


def _mean_exact(c: float, n: int) -> bool:
    """Whether float32 (c n) x (1/n) and (c^2 n) x (1/n) round back to c and c^2 (the sums
    themselves are exact for MANTISSAS)."""
    inv = _f32(1.0 / n)
    return all(_f32(_f32(v * n) * inv) == v for v in (c, c * c) if abs(v * n) < 2.0**100)


def _mean_lengths(case: Case) -> list[int]:
    """Lengths a kernel may average over: each size of the case and each product of two."""
    values = sorted({v for v in case.sizes.values() if v > 1})
    products = {a * b for i, a in enumerate(values) for b in values[i:]}
    return sorted({*values, *(p for p in products if p <= 2**24)})


def _offset_case(spec: TestSpec, base: Case) -> HiddenCase | None:
    if spec.align is not None and spec.align >= 16:
        return None
    offsets: dict[str, int] = {}
    for a in spec.args:
        if not a.is_pointer:
            continue
        c_type = normalize_c_type(a.c_type)
        c_type = normalize_c_type(spec.template_args.get(c_type, c_type))
        element, lanes = VECTOR_TYPES.get(c_type, (a.dtype or "float32", 1))
        natural = ITEMSIZE.get(element, 8) * lanes
        offset = max(natural, spec.align or 1)
        if offset % 16:
            offsets[a.name] = offset
    if not offsets:
        return None
    sizes = ", ".join(f"{k} +{v} B" for k, v in offsets.items())
    return HiddenCase("offset", f"buffers not 16-byte aligned: {sizes}", base, offsets=offsets)
