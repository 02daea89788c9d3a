"""The hidden constant-input case (source/spec/hidden.py): its constant is a short dyadic value,
so honest reorderings of dot products, layer / RMS norms and softmax give bit-identical results
on it (the serial oracle is no longer the inaccurate side), while a layer norm that drops `eps`
still divides 0 by 0 there. numpy float32 simulations, several honest orders each."""

from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np
import pytest

from cuda_llm_lsp.source.spec.hidden import MANTISSAS, hidden_cases, simple_constant
from tests.unit.test_hidden_cases import VADD_SPEC, spec_of

F32 = np.float32
OLD_CONSTANT = F32(0.123)  # what round(uniform(lo, hi), 3) drew: the H100's false rejects


def serial(v: np.ndarray) -> F32:
    """A single thread's running sum, in order (np.cumsum adds strictly left to right)."""
    return F32(np.cumsum(v, dtype=F32)[-1])


def tree(v: np.ndarray) -> F32:
    """A block / warp-shuffle tree: pairs added level by level."""
    v = v.astype(F32)
    while v.size > 1:
        if v.size % 2:
            v = np.append(v, F32(0))
        v = (v[0::2] + v[1::2]).astype(F32)
    return F32(v[0])


def accumulators(v: np.ndarray, k: int = 4) -> F32:
    """k running sums over i mod k (the ILP step), then added in order."""
    return serial(np.array([serial(v[i::k]) for i in range(k)], F32))


def atomics(v: np.ndarray, chunks: int = 16) -> F32:
    """Per-chunk sums added in a random order (float atomicAdd)."""
    parts = [serial(c) for c in np.array_split(v, chunks)]
    order = np.random.default_rng(5).permutation(chunks)
    return serial(np.array([parts[i] for i in order], F32))


SUMS: dict[str, Callable[[np.ndarray], F32]] = {
    "serial": serial, "tree": tree, "four accumulators": accumulators, "atomics": atomics,
}  # fmt: skip


def constants(seeds: int = 24, lengths: tuple[int, ...] = ()) -> list[F32]:
    """Constants the case draws for uniform(-1, 1) and uniform(0, 10) inputs."""
    rng = random.Random(3)
    out = {
        simple_constant(lo, hi, rng, lengths)
        for _ in range(seeds)
        for lo, hi in ((-1.0, 1.0), (0.0, 10.0))
    }
    return [F32(c) for c in sorted(out)]


def test_the_constant_is_short_dyadic_nonzero_and_inside_the_range() -> None:
    rng = random.Random(1)
    for lo, hi in ((-1.0, 1.0), (0.0, 10.0), (0.0, 100.0), (-6.0, 6.0), (2.0, 3.0), (-1e-6, 1e-6)):
        for _ in range(20):
            c = simple_constant(lo, hi, rng, (1000, 1024))
            mantissa, _ = np.frexp(abs(c))
            odd = int(mantissa * 8)  # 3 bits of significand at most
            assert c != 0 and lo <= c <= hi and mantissa * 8 == odd
            assert abs(c) * 8 >= max(abs(lo), abs(hi))  # not a vanishing value
    assert simple_constant(0.1, 0.1001, rng) == pytest.approx(0.1, rel=1e-3)  # narrow: fewest bits
    assert simple_constant(0.5, 0.5, rng) == 0.5


def test_the_hidden_case_uses_it_for_every_float_input() -> None:
    spec = spec_of(VADD_SPEC)
    (case,) = [h for h in hidden_cases(spec, seed=4) if "constant" in h.what]
    for init in case.init.values():
        assert init.a == init.b and float(F32(init.a)) == init.a
        assert (abs(init.a) / 2.0 ** np.frexp(abs(init.a))[1] * 16) % 1 == 0


@pytest.mark.parametrize("n", [1000, 16384, 262144])
def test_honest_dot_products_agree_bit_for_bit_on_the_constant(n: int) -> None:
    for a in constants():
        for b in constants()[:3]:
            products = np.full(n, F32(a * b), F32)
            sums = {name: f(products) for name, f in SUMS.items()}
            assert len(set(sums.values())) == 1, (a, b, sums)
            assert float(sums["serial"]) == float(a) * float(b) * n  # exact


def test_the_old_constant_made_the_serial_oracle_the_inaccurate_side() -> None:
    """The planted bug: 262,144 products of 0.123 x 0.123 (the dot family's false rejects)."""
    products = np.full(262144, F32(OLD_CONSTANT * OLD_CONSTANT), F32)
    exact = float(products[0]) * products.size
    assert abs(float(serial(products)) - exact) > 1e4 * abs(float(tree(products)) - exact)
    assert serial(products) != tree(products)


def layernorm(x: np.ndarray, mean_of: str, eps: float = 1e-5) -> np.ndarray:
    """One row's layer norm in float32, its mean and variance computed as `mean_of` says."""
    n = x.size
    inv = F32(1) / F32(n)
    if mean_of == "welford":
        mean, m2 = F32(0), F32(0)
        for i, v in enumerate(x[:256], 1):  # (a prefix: Welford on a constant row stays exact)
            d = F32(v - mean)
            mean = F32(mean + F32(d / F32(i)))
            m2 = F32(m2 + F32(d * F32(v - mean)))
        var = F32(m2 / F32(min(n, 256)))
    else:
        s = {"serial / n": serial, "tree / n": tree, "tree x (1/n)": tree}[mean_of](x)
        mean = F32(s * inv) if "1/n" in mean_of else F32(s / F32(n))
        d = (x - mean).astype(F32)
        var = F32(tree((d * d).astype(F32)) / F32(n))
    rstd = F32(1) / np.sqrt(F32(var + F32(eps)), dtype=F32)
    return ((x - mean).astype(F32) * rstd).astype(F32)


def rmsnorm(x: np.ndarray, sum_of: Callable[[np.ndarray], F32], reciprocal: bool) -> np.ndarray:
    n = x.size
    s = sum_of((x * x).astype(F32))
    ms = F32(s * (F32(1) / F32(n))) if reciprocal else F32(s / F32(n))
    return (x * (F32(1) / np.sqrt(F32(ms + F32(1e-5)), dtype=F32))).astype(F32)


def softmax(x: np.ndarray, sum_of: Callable[[np.ndarray], F32]) -> np.ndarray:
    e = np.exp((x - x.max()).astype(F32)).astype(F32)
    return (e / sum_of(e)).astype(F32)


@pytest.mark.parametrize("n", [100, 1000, 1024])
def test_honest_norms_and_softmax_agree_bit_for_bit_on_the_constant(n: int) -> None:
    for c in constants(lengths=(n,)):
        x = np.full(n, c, F32)
        outs = [layernorm(x, how) for how in ("serial / n", "tree / n", "tree x (1/n)", "welford")]
        assert all(np.array_equal(o, np.zeros(n, F32)) for o in outs), c  # x - mean exactly 0
        rms = [rmsnorm(x, f, r) for f in SUMS.values() for r in (False, True)]
        assert all(np.array_equal(o, rms[0]) for o in rms), c
        soft = [softmax(x, f) for f in SUMS.values()]
        assert all(np.array_equal(o, np.full(n, F32(1) / F32(n))) for o in soft), c


def test_the_old_constant_gave_honest_layer_norms_different_outputs() -> None:
    """0.123: a serial mean is off, x - mean times 1/sqrt(eps) is ~1e-3, a tree's mean is not."""
    x = np.full(1024, OLD_CONSTANT, F32)
    assert not np.array_equal(layernorm(x, "serial / n"), layernorm(x, "tree / n"))


def test_the_constant_case_still_catches_a_layer_norm_without_eps() -> None:
    """What the case is for: variance exactly 0, so a dropped `eps` gives 0 x inf = NaN (the
    judge drops a case only when the ORIGINAL makes non-finite outputs)."""
    for c in constants(lengths=(1000,)):
        x = np.full(1000, c, F32)
        with np.errstate(divide="ignore", invalid="ignore"):
            dropped = layernorm(x, "tree / n", eps=0.0)
        assert np.isnan(dropped).all(), c
        assert np.isfinite(layernorm(x, "tree / n")).all()


def test_mantissas_keep_products_and_their_sums_exact() -> None:
    """m^2 x 2^19 < 2^24 for every mantissa: any order of 2^19 products is exact."""
    assert max(MANTISSAS) ** 2 * 2**19 < 2**24
