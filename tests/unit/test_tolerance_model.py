"""The tolerance model (compare.within_tolerance): elements at the edges of each bound, and
numpy simulations of honest reorderings (pass) and precision cheats (fail) of matmul, dot, row
sums, softmax, layer / RMS norm in float32 and bfloat16."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from cuda_llm_lsp.evaluate.compare import (
    OK,
    SCALE_ULPS,
    bf16_from_float,
    bf16_to_float32,
    compare_output,
    effective_atol,
    magnitude_units,
    scale_tolerance,
    typical_magnitude,
    ulp_at,
)

F32 = np.float32
U = 2.0**-24
WHERE = "case 1"


def at_edge(scale: float, e: float, dtype: str = "float32") -> float:
    """The scale-aware bound at an element of value `e` in a buffer of scale `scale`."""
    return SCALE_ULPS * U * scale + float(ulp_at(np.array([e]), dtype)[0])


def test_scale_aware_bound_edges_just_inside_passes_just_outside_fails() -> None:
    """float64 values so the edge is exact: a buffer of scale 4, one element that cancelled
    to 1e-3; its error may reach 512 u x 4 + ulp(1e-3), not atol + rtol x 1e-3."""
    exp = np.array([4.0, -2.0, 1e-3, 0.5])
    bound = SCALE_ULPS * 2.0**-53 * 4.0 + float(ulp_at(np.array([1e-3]), "float64")[0])
    inside = exp.copy()
    inside[2] += bound * (1 - 1e-6)
    assert compare_output("o", exp, inside, "float64", rtol=0, atol=1e-300, where=WHERE) is OK
    outside = exp.copy()
    outside[2] += bound * (1 + 1e-6)
    f = compare_output("o", exp, outside, "float64", rtol=0, atol=1e-300, where=WHERE)
    assert f.status == "wrong_output" and f.bad_count == 1


def test_float32_floor_edges_and_the_spec_bound_edges() -> None:
    exp = np.array([8.0, 1e-4, -3.0], dtype=F32)
    edge = at_edge(8.0, 1e-4)  # > atol 1e-5 + rtol 1e-4 x 1e-4: the floor decides
    assert edge > 1e-5 + 1e-4 * 1e-4
    got = exp.copy()
    got[1] = F32(np.float64(exp[1]) + edge * 0.98)
    assert compare_output("o", exp, got, "float32", rtol=1e-4, atol=1e-5, where=WHERE) is OK
    got[1] = F32(np.float64(exp[1]) + edge * 1.05)
    f = compare_output("o", exp, got, "float32", rtol=1e-4, atol=1e-5, where=WHERE)
    assert f.status == "wrong_output"
    assert "exceeds the spec's bound" in f.message and "scale-aware bound" in f.message
    assert "512 x 2^-24 x buffer scale 8" in f.message and "by 1.0" in f.message
    # a large element: the spec's rtol is the wider bound there, and decides
    got = exp.copy()
    got[0] = F32(8.0 * (1 + 0.95e-4))
    assert compare_output("o", exp, got, "float32", rtol=1e-4, atol=1e-5, where=WHERE) is OK
    got[0] = F32(8.0 * (1 + 1.2e-4) + 1e-5)
    assert compare_output("o", exp, got, "float32", rtol=1e-4, atol=1e-5, where=WHERE).bad_count


def test_bfloat16_floor_allows_one_rounding_to_the_other_neighbour() -> None:
    """An honest float32 difference that rounds to the next bfloat16 value passes even with
    a spec tighter than a bfloat16 ulp; two ulps do not."""
    exp = bf16_from_float(np.array([1.5, 0.75, 3.0], dtype=F32))
    one = exp.copy()
    one[1] += 1  # the next bfloat16 above 0.75
    assert compare_output("o", exp, one, "bfloat16", rtol=1e-4, atol=1e-6, where=WHERE) is OK
    two = exp.copy()
    two[1] += 2
    assert compare_output("o", exp, two, "bfloat16", rtol=1e-4, atol=1e-6, where=WHERE).bad_count


def test_exact_spec_turns_the_floor_off_and_integers_have_none() -> None:
    assert scale_tolerance("float32", 0.0, 0.0) == 0.0
    assert scale_tolerance("int32", 1e-4, 1e-5) == 0.0
    assert scale_tolerance("float64", 1e-4, 0.0) == SCALE_ULPS * 2.0**-53
    exp = np.array([1.0, 0.0], dtype=F32)
    got = exp.copy()
    got[1] = F32(1e-30)
    assert compare_output("o", exp, got, "float32", rtol=0, atol=0, where=WHERE).bad_count == 1
    assert compare_output("o", exp, got, "float32", rtol=0, atol=1e-40, where=WHERE) is OK


def test_the_floor_ignores_non_finite_elements_for_the_scale() -> None:
    exp = np.array([np.inf, 1.0, 1e-6], dtype=F32)
    got = exp.copy()
    got[2] = F32(1e-6 + 1e-3)  # far beyond 512 u x 1: an infinity does not widen the floor
    f = compare_output("o", exp, got, "float32", rtol=1e-4, atol=1e-5, where=WHERE)
    assert f.status == "wrong_output" and "buffer scale 1 " in f.message


# --- simulations: float32 arithmetic in numpy, one variant per way to compute the same thing ---
RNG = np.random.default_rng(27)


def fma_dot(a: np.ndarray, b: np.ndarray, acc: np.ndarray | None = None) -> np.ndarray:
    """sum_k a[:, k] * b[k, :] in the order k = 0, 1, ... with an FMA per term (the oracle's
    naive loop), float32 throughout."""
    out = np.zeros((a.shape[0], b.shape[1]), F32) if acc is None else acc
    for k in range(a.shape[1]):
        out = (
            out.astype(np.float64) + a[:, k : k + 1].astype(np.float64) * b[k : k + 1, :]
        ).astype(F32)
    return out


def split(a: np.ndarray, b: np.ndarray, parts: int, interleave: bool) -> np.ndarray:
    """`parts` partial sums (interleaved: accumulators over k mod parts; else split-K chunks),
    combined as a tree."""
    k = a.shape[1]
    groups = [
        np.arange(i, k, parts) if interleave else c
        for i, c in enumerate(np.array_split(np.arange(k), parts))
    ]
    sums = [fma_dot(a[:, g], b[g, :]) for g in groups if g.size]
    while len(sums) > 1:
        sums = [
            (sums[i] + sums[i + 1]).astype(F32) if i + 1 < len(sums) else sums[i]
            for i in range(0, len(sums), 2)
        ]
    return sums[0]


def atomics(a: np.ndarray, b: np.ndarray, parts: int) -> np.ndarray:
    """Split-K partial sums added in a random order (float atomicAdd)."""
    chunks = [fma_dot(a[:, c], b[c, :]) for c in np.array_split(np.arange(a.shape[1]), parts)]
    out = np.zeros_like(chunks[0])
    for i in RNG.permutation(parts):
        out = (out + chunks[i]).astype(F32)
    return out


def keep_bits(x: np.ndarray, bits: int) -> np.ndarray:
    """float32 rounded (to nearest even) to `bits` explicit mantissa bits: 10 tf32, 7 bf16."""
    raw = np.ascontiguousarray(x, F32).view(np.uint32).astype(np.uint64)
    s = 23 - bits
    r = ((raw + (1 << (s - 1)) - 1 + ((raw >> s) & 1)) >> s) << s
    return r.astype(np.uint32).view(F32)


def half_acc(a: np.ndarray, b: np.ndarray, dtype: type) -> np.ndarray:
    out = np.zeros((a.shape[0], b.shape[1]), dtype)
    for k in range(a.shape[1]):
        out = (out.astype(F32) + (a[:, k : k + 1] * b[k : k + 1, :])).astype(dtype)
    return out.astype(F32)


def dropped(a: np.ndarray, b: np.ndarray, below: float) -> np.ndarray:
    p = a[:, :, None].astype(np.float64) * b[None, :, :]
    p[np.abs(p) < below] = 0
    return p.sum(axis=1).astype(F32)


Variant = Callable[[np.ndarray, np.ndarray], np.ndarray]
HONEST: dict[str, Variant] = {
    "four accumulators": lambda a, b: split(a, b, 4, True),
    "split-K halves": lambda a, b: split(a, b, 2, False),
    "warp tree (32 lanes)": lambda a, b: split(a, b, 32, True),
    "atomics over 16 chunks": lambda a, b: atomics(a, b, 16),
    "no FMA": lambda a, b: sum_nofma(a, b),
    "float64 sum": lambda a, b: (a.astype(np.float64) @ b).astype(F32),
    "reversed k": lambda a, b: fma_dot(a[:, ::-1], b[::-1, :]),
}
CHEATS: dict[str, Variant] = {
    "tf32 inputs": lambda a, b: fma_dot(keep_bits(a, 10), keep_bits(b, 10)),
    "bf16 inputs": lambda a, b: fma_dot(keep_bits(a, 7), keep_bits(b, 7)),
    "products below 1e-2 dropped": lambda a, b: dropped(a, b, 1e-2),
    "half-precision running sum": lambda a, b: half_acc(a, b, np.float16),
}


def sum_nofma(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.zeros((a.shape[0], b.shape[1]), F32)
    for k in range(a.shape[1]):
        out = (out + (a[:, k : k + 1] * b[k : k + 1, :]).astype(F32)).astype(F32)
    return out


def judged(
    expected: np.ndarray,
    got: np.ndarray,
    dtype: str = "float32",
    rtol: float = 1e-4,
    atol: float = 1e-5,
) -> str:
    if dtype == "bfloat16":
        expected, got = bf16_from_float(expected), bf16_from_float(got)
    f = compare_output("out", expected, got, dtype, rtol=rtol, atol=atol, where=WHERE)
    return "ok" if f is OK else str(f.status)


SHAPES = {  # (rows of the output, reduction length, columns of the output)
    "matmul K=2048": (48, 2048, 48),
    "dot n=65536": (1, 65536, 1),
    "row sums of 16384": (1, 16384, 512),  # 512 rows of 16384 terms each
}


def operands(shape: tuple[int, int, int]) -> tuple[np.ndarray, np.ndarray]:
    """uniform(-1, 1) operands; row sums are products with a column of ones (exact)."""
    m, k, n = shape
    if n > 1 and m == 1:
        return RNG.uniform(-1, 1, (n, k)).astype(F32), np.ones((k, 1), F32)
    return RNG.uniform(-1, 1, (m, k)).astype(F32), RNG.uniform(-1, 1, (k, n)).astype(F32)


@pytest.fixture(scope="module")
def cases() -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    out = {}
    for name, shape in SHAPES.items():
        a, b = operands(shape)
        out[name] = (a, b, fma_dot(a, b))
    return out


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("variant", list(HONEST))
def test_honest_reorderings_pass(cases: dict, shape: str, variant: str) -> None:
    a, b, expected = cases[shape]
    got = HONEST[variant](a, b)
    assert judged(expected, got) == "ok"
    assert judged(expected, got, "bfloat16", 1e-2, 1e-2) == "ok"


@pytest.mark.parametrize("shape", ["matmul K=2048", "row sums of 16384"])
@pytest.mark.parametrize("variant", list(CHEATS))
def test_precision_cheats_fail(cases: dict, shape: str, variant: str) -> None:
    a, b, expected = cases[shape]
    if shape.startswith("row") and variant.startswith("products"):
        pytest.skip("a sum has no products to drop")
    assert judged(expected, CHEATS[variant](a, b)) == "wrong_output"


def test_honest_reorderings_failed_the_old_per_element_bound(cases: dict) -> None:
    """The planted bug: without the floor (atol + rtol x |expected| alone) these fail."""
    a, b, expected = cases["matmul K=2048"]
    got = HONEST["four accumulators"](a, b)
    err = np.abs(got.astype(np.float64) - expected)
    assert (err > 1e-5 + 1e-4 * np.abs(expected.astype(np.float64))).any()


def softmax(
    x: np.ndarray, *, fast_exp: bool = False, poly: bool = False, tree: bool = False
) -> np.ndarray:
    m = x.max(axis=1, keepdims=True)
    z = (x - m).astype(F32)
    if poly:  # a 4th-order Taylor exp after range reduction by 2^k: ~1e-3 relative error
        k = np.floor(z / np.log(2))
        r = (z - k * np.log(2)).astype(F32)
        e = (1 + r + r * r / 2 + r**3 / 6).astype(F32) * np.exp2(k).astype(F32)
    else:
        e = np.exp(z.astype(np.float64)).astype(F32)
        if fast_exp:  # __expf: about 2 ulp off
            e = (e * (1 + RNG.uniform(-2, 2, e.shape) * U)).astype(F32)
    if tree:
        s = e.reshape(e.shape[0], -1, 32).sum(axis=1, dtype=F32).sum(axis=1, keepdims=True)
    else:
        s = np.zeros((e.shape[0], 1), F32)
        for j in range(e.shape[1]):
            s = (s + e[:, j : j + 1]).astype(F32)
    return (e / s).astype(F32)


def norm(
    x: np.ndarray,
    *,
    rms: bool,
    welford: bool = False,
    bf16_stats: bool = False,
    drop_eps: bool = False,
) -> np.ndarray:
    eps = 0.0 if drop_eps else 1e-5
    xs = keep_bits(x, 7) if bf16_stats else x
    if rms:
        ms = (
            (xs.astype(np.float64) ** 2).mean(axis=1, keepdims=True)
            if welford
            else np.mean((xs * xs).astype(F32), axis=1, keepdims=True, dtype=F32)
        )
        return (x / np.sqrt(ms + eps)).astype(F32)
    if welford:
        mean = xs.astype(np.float64).mean(axis=1, keepdims=True)
        var = xs.astype(np.float64).var(axis=1, keepdims=True)
    else:
        mean = np.mean(xs, axis=1, keepdims=True, dtype=F32)
        var = np.mean((xs * xs).astype(F32), axis=1, keepdims=True, dtype=F32) - mean * mean
    return ((x - mean) / np.sqrt(var + eps)).astype(F32)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_softmax_and_norms_honest_pass_and_cheats_fail(dtype: str) -> None:
    rtol, atol = (1e-4, 1e-5) if dtype == "float32" else (1e-2, 1e-2)
    x = RNG.normal(0, 2, (64, 1024)).astype(F32)
    exp = softmax(x)
    assert judged(exp, softmax(x, fast_exp=True, tree=True), dtype, rtol, atol) == "ok"
    if dtype == "float32":  # a bfloat16 output rounds the cheat away (as the oracle's own)
        assert judged(exp, softmax(x, poly=True), dtype, rtol, atol) == "wrong_output"
        assert judged(exp, softmax(keep_bits(x, 7)), dtype, rtol, atol) == "wrong_output"
    for rms in (False, True):
        exp = norm(x, rms=rms)
        assert judged(exp, norm(x, rms=rms, welford=True), dtype, rtol, atol) == "ok"
        if dtype == "float32":
            cheat = norm(x, rms=rms, bf16_stats=True)
            assert judged(exp, cheat, dtype, rtol, atol) == "wrong_output"


def test_bfloat16_outputs_reject_a_half_precision_sum_and_bf16_arithmetic() -> None:
    a, b = operands((32, 2048, 32))
    exp = fma_dot(a, b)
    assert judged(exp, half_acc(a, b, np.float16), "bfloat16", 1e-2, 1e-2) == "wrong_output"
    bf16_sum = bf16_to_float32(bf16_from_float(half_acc(a, b, F32)))  # (float32: honest)
    assert judged(exp, bf16_sum, "bfloat16", 1e-2, 1e-2) == "ok"


# --- a type's default atol is relative to the buffer's mean magnitude ---------------------------
def poor_exp(v: np.ndarray) -> np.ndarray:
    """exp from a quadratic after range reduction by powers of two: up to 3.4 % low
    (benchmarks/tolerance_family/softmax_bf16/12_quadratic_exp.cu)."""
    k = np.floor(v * F32(1.44269504)).astype(F32)
    t = (v - k * F32(0.69314718)).astype(F32)
    return ((1 + t * (1 + t * F32(0.5))) * np.exp2(k)).astype(F32)


def bf16_softmax(x: np.ndarray, *, exp: Callable = np.exp, tree: bool = False) -> np.ndarray:
    """float32 math, one rounding to bfloat16 at the store; a serial or a tree row sum."""
    e = exp((x - x.max(axis=1, keepdims=True)).astype(F32)).astype(F32)
    if tree:
        s = e.reshape(e.shape[0], -1, 32).sum(axis=1, dtype=F32).sum(axis=1, keepdims=True)
    else:
        s = np.cumsum(e, axis=1, dtype=F32)[:, -1:]
    return bf16_from_float((e * (F32(1) / s)).astype(F32))


def bf16_judged(exp: np.ndarray, got: np.ndarray, *, relative: bool) -> str:
    f = compare_output(
        "y", exp, got, "bfloat16", rtol=1e-2, atol=1e-2, where=WHERE, atol_relative=relative
    )
    return "ok" if f is OK else str(f.status)


def test_bf16_softmax_with_a_poor_exp_fails_under_the_relative_default_atol() -> None:
    """Outputs of ~1e-3 (rows of 1024): the absolute default 1e-2 let a 3 % exp through (the
    H100 false accept); scaled by the mean |expected| (1/1024) it is 1e-5 and the cheat fails."""
    x = bf16_to_float32(bf16_from_float(RNG.normal(0, 2, (256, 1024)).astype(F32)))
    exp = bf16_softmax(x)
    cheat = bf16_softmax(x, exp=poor_exp)
    assert bf16_judged(exp, cheat, relative=False) == "ok"  # the planted false accept
    f = compare_output(
        "y", exp, cheat, "bfloat16", rtol=1e-2, atol=1e-2, where=WHERE, atol_relative=True
    )
    assert f.status == "wrong_output"
    assert "default atol 0.01 x mean |expected| 0.000977" in f.message
    # honest: float32 math rounded once, a tree instead of a serial sum, a reciprocal
    assert bf16_judged(exp, bf16_softmax(x, tree=True), relative=True) == "ok"


def test_bf16_layer_norm_honest_passes_under_the_relative_default_atol() -> None:
    x = bf16_to_float32(bf16_from_float(RNG.normal(0, 1, (64, 1024)).astype(F32)))
    exp = bf16_from_float(norm(x, rms=False))
    for welford in (False, True):
        got = bf16_from_float(norm(x, rms=False, welford=welford))
        assert bf16_judged(exp, got, relative=True) == "ok"
    exp = bf16_from_float(norm(x, rms=True))
    assert bf16_judged(exp, bf16_from_float(norm(x, rms=True, welford=True)), relative=True) == "ok"


def test_the_default_atol_shrinks_only_below_unit_scale_and_a_spec_atol_keeps_its_meaning() -> None:
    assert effective_atol(1e-2, 0.25, True) == 2.5e-3
    assert effective_atol(1e-2, 40.0, True) == 1e-2  # at unit scale and above: unchanged
    assert effective_atol(1e-2, 0.25, False) == 1e-2  # the spec's own atol: as written
    exp = np.array([0.002, 0.0005, -0.0015], dtype=F32)  # mean |expected| 1e-3
    got = exp.copy()
    got[1] = F32(0.0005 + 5e-5)  # 10 %: within atol 1e-4 absolute, not within 1e-4 x 1e-3
    assert compare_output("o", exp, got, "float32", rtol=1e-4, atol=1e-4, where=WHERE) is OK
    f = compare_output(
        "o", exp, got, "float32", rtol=1e-4, atol=1e-4, where=WHERE, atol_relative=True
    )
    assert f.status == "wrong_output"
    # a buffer of unit scale keeps the whole default atol, also for its small elements
    big = np.array([3.0, 1e-4, -2.0], dtype=F32)
    got = big.copy()
    got[1] = F32(1e-4 + 0.9e-5)
    assert (
        compare_output(
            "o", big, got, "float32", rtol=1e-4, atol=1e-5, where=WHERE, atol_relative=True
        )
        is OK
    )


def test_typical_magnitude_is_the_mean_of_finite_magnitudes() -> None:
    e = np.array([4.0, -2.0, np.inf, np.nan, 0.0, 2.0])
    scale = 4.0
    assert typical_magnitude(magnitude_units(e, scale), scale, e.size) == 8.0 / 6
    assert typical_magnitude(magnitude_units(np.zeros(3), 0.0), 0.0, 3) == 0.0
