"""Compare a kernel's buffers with the oracle's: the summaries and their wording, no CUDA.

Each check is two steps: a summary (counts, first / last / worst index, the values at one index),
computed on the GPU by the worker (`device_checks`) or in numpy here (`summarize_*`), then the
wording (`word_*`): whether a run wrote outside its buffers, changed an input, left output
elements unwritten, or computed something else than the oracle, worded so that a person and an
LLM can act on it:
`case 3 (rows=1000, cols=999): out[12345] expected 0.5123 got 0.0 (1 of 999000 elements differ)`.

Element types are the spec's names. bfloat16 is always carried as its raw uint16 bits, so results
are bit-exact whether or not ml_dtypes is installed.

The tolerance model (docs/design.md, "How outputs are compared"): a floating-point element
passes when it is within the spec's own bound, `atol + rtol * |expected|`, OR within the
scale-aware floor `SCALE_ULPS * u * scale + ulp(expected)`: `u` the unit roundoff of the
arithmetic the kernel is assumed to accumulate in (float32 for every type but float64),
`scale` the largest finite |expected| of the buffer, and one ulp of the output type for a
rounding that lands on the other neighbour. The rounding error of a reordered sum of n terms
is bounded by the sum of the terms' magnitudes (Higham: gamma_n * sum|x_i|), not by the
result's own magnitude, so an element that cancels to near zero keeps an error the size of
its large terms; the floor lets that through while still asking for float32 accuracy relative
to the buffer (2^-15 of its scale), far below what bf16 / tf32 inputs, half-precision sums or
dropped terms produce. A spec with rtol = atol = 0 asks for bit-exact results: no floor.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from cuda_llm_lsp.evaluate.types import Status

# Guard bands around every device buffer (bytes each side), filled with GUARD_BYTE.
GUARD_BYTES = 4096  # at least; larger buffers get proportionally more (`guard_bytes`)
GUARD_BYTE = 0xDB
GUARD_FRACTION = 32  # a guard band is at least 1/32 of its buffer ...
GUARD_MAX = 64 << 20  # ... up to 64 MiB a side


def guard_bytes(nbytes: int) -> int:
    """The guard band on each side of a buffer of `nbytes`: 4 KiB, or 1/32 of the buffer
    (rounded up to 4 KiB, at most 64 MiB): a write 8 KiB past a 128 MiB buffer hits its 4 MiB
    guard, not mapped slack beyond a fixed 4 KiB one."""
    scaled = -(-(nbytes // GUARD_FRACTION) // 4096) * 4096
    return max(GUARD_BYTES, min(scaled, GUARD_MAX))


def random_poison(dtype: str, bits: int) -> bytes:
    """A poison drawn per run from 64 random `bits`: a NaN with a random payload for floats
    (never a value arithmetic produces: its payload is not the canonical one), random bytes for
    integers. A kernel cannot write "only where it sees the documented poison"."""
    bits_type, fixed = _POISON_BITS[dtype]
    width = np.dtype(bits_type).itemsize * 8
    if dtype in ("float32", "float64", "float16", "bfloat16"):
        exponent_bits = {"float32": 8, "float64": 11, "float16": 5, "bfloat16": 8}[dtype]
        mantissa = width - 1 - exponent_bits
        payload = bits & ((1 << (mantissa - 1)) - 1)  # quiet bit clear: a signalling NaN ...
        payload |= 1 << (mantissa - 2)  # ... never 0 (that would be an infinity), never canonical
        value = (((1 << exponent_bits) - 1) << mantissa) | payload | ((bits >> 63) << (width - 1))
    else:
        value = bits & ((1 << width) - 1)
        if value == 0:
            value = fixed
    return np.array([value], dtype=bits_type).tobytes()


# Output poison: a NaN with a payload no arithmetic produces (signalling, payload 0xA5...), and
# 0xA5 bytes for integers. "Unwritten" means: the exact poison bit pattern is still there.
_POISON_BITS: dict[str, tuple[str, int]] = {
    "float32": ("uint32", 0x7FA5A5A5),
    "float64": ("uint64", 0x7FF4A5A5A5A5A5A5),
    "float16": ("uint16", 0x7DA5),
    "bfloat16": ("uint16", 0x7FA5),
    "int8": ("uint8", 0xA5),
    "uint8": ("uint8", 0xA5),
    "int32": ("uint32", 0xA5A5A5A5),
    "uint32": ("uint32", 0xA5A5A5A5),
    "int64": ("uint64", 0xA5A5A5A5A5A5A5A5),
}


def storage_dtype(dtype: str) -> np.dtype:
    """The numpy dtype a buffer of spec element type `dtype` is held in on the host."""
    if dtype == "bfloat16":
        return np.dtype(np.uint16)
    return np.dtype(dtype)


# --- the scale-aware floor ---------------------------------------------------------------------
#: Units of roundoff, of the buffer's scale, a reordered float32 sum may move an element by.
#: Calibrated (benchmarks/tolerance_sim.py, docs/design.md): honest reorderings (accumulators,
#: split-K, trees, atomics, float64 sums) of matmuls to K = 8192 and column sums to 262144 rows
#: stay below ~160 u x scale; tf32 inputs, the mildest cheat, make 1900 .. 5000.
SCALE_ULPS = 512
_PRECISION = {"float32": 24, "float64": 53, "float16": 11, "bfloat16": 8}  # significand bits
_TINY = {"float32": 2.0**-126, "float64": 2.0**-1022, "float16": 2.0**-14, "bfloat16": 2.0**-126}


def scale_tolerance(dtype: str, rtol: float, atol: float) -> float:
    """The floor's factor on the buffer's scale: SCALE_ULPS units of roundoff of the assumed
    accumulation (float32; float64 for float64 outputs); 0 (no floor) for integers and for a
    spec asking for exact results (rtol = atol = 0)."""
    if not is_float(dtype) or (rtol == 0 and atol == 0):
        return 0.0
    unit = 2.0**-53 if dtype == "float64" else 2.0**-24
    return SCALE_ULPS * unit


def ulp_at(values: np.ndarray, dtype: str) -> np.ndarray:
    """One unit in the last place of `dtype` at |values| (as float64; normal numbers' ulp
    below the smallest normal)."""
    mags = np.maximum(np.abs(values), _TINY[dtype])
    _, exponent = np.frexp(mags)
    return np.ldexp(1.0, exponent - _PRECISION[dtype])


def buffer_scale(expected: np.ndarray) -> float:
    """The largest finite |expected| of a buffer (float64 values), 0.0 for none."""
    with np.errstate(invalid="ignore"):
        mags = np.abs(expected[np.isfinite(expected)])
    return float(mags.max()) if mags.size else 0.0


#: Fixed-point units of `scale` the mean magnitude is summed in (`cl_magnitude`): integer sums do
#: not depend on the order of the device's atomics, so the device and numpy agree bit for bit.
MAGNITUDE_UNITS = 2.0**32


def magnitude_units(expected: np.ndarray, scale: float) -> int:
    """sum over finite elements of floor(|expected| / scale * 2^32), as `cl_magnitude` adds it."""
    if scale <= 0:
        return 0
    with np.errstate(invalid="ignore"):
        mags = np.abs(expected[np.isfinite(expected)])
    return int(np.floor(mags / scale * MAGNITUDE_UNITS).astype(np.uint64).sum(dtype=np.uint64))


def typical_magnitude(units: int, scale: float, n: int) -> float:
    """The mean finite |expected| over a buffer of `n` elements (non-finite ones count 0), from
    `magnitude_units` (the device computes the same double operations in the same order)."""
    if n <= 0:
        return 0.0
    return float(units) / MAGNITUDE_UNITS * scale / n


def effective_atol(atol: float, typical: float, relative: bool) -> float:
    """The `atol` an element is judged with: a spec's own `atol` as written; a type's default
    (`relative`) times min(1, the buffer's mean |expected|), an absolute error at unit scale."""
    return atol * min(1.0, typical) if relative else atol


def within_tolerance(
    err: np.ndarray,
    e: np.ndarray,
    dtype: str,
    *,
    rtol: float,
    atol: float,
    scale: float,
    typical: float = 0.0,
    atol_relative: bool = False,
) -> np.ndarray:
    """Whether each |got - expected| (`err`) is within the spec's bound or the floor."""
    with np.errstate(invalid="ignore", over="ignore"):
        close = err <= effective_atol(atol, typical, atol_relative) + rtol * np.abs(e)
        factor = scale_tolerance(dtype, rtol, atol)
        if factor > 0:
            close |= err <= factor * scale + ulp_at(e, dtype)
    return close


def is_float(dtype: str) -> bool:
    return dtype in ("float32", "float64", "float16", "bfloat16")


def poison_pattern(dtype: str) -> bytes:
    """One element's poison bytes (little endian), repeated by the worker over the buffer."""
    bits_type, value = _POISON_BITS[dtype]
    return np.array([value], dtype=bits_type).tobytes()


def bf16_to_float32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def bf16_from_float(values: np.ndarray) -> np.ndarray:
    """Round to nearest even, bit-exact with ml_dtypes / __float2bfloat16_rn (NaN stays NaN)."""
    f = np.ascontiguousarray(values, dtype=np.float32)
    bits = f.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(f)
    if nan.any():
        rounded[nan] = ((bits[nan] >> 16) | 0x40).astype(np.uint16)
    return rounded


def as_float64(values: np.ndarray, dtype: str) -> np.ndarray:
    """Values of a buffer as float64 (bfloat16 decoded from its bits)."""
    if dtype == "bfloat16":
        return bf16_to_float32(values).astype(np.float64)
    return values.astype(np.float64)


@dataclass(frozen=True)
class Finding:
    """What is wrong with one buffer after one run (status None: nothing)."""

    status: Status | None
    message: str = ""
    bad_count: int = 0


OK = Finding(None)


def split_guarded(raw: bytes, nbytes: int) -> tuple[bytes, bytes, bytes]:
    """(front guard, data, back guard) of a buffer as the worker returns it."""
    return raw[:GUARD_BYTES], raw[GUARD_BYTES : GUARD_BYTES + nbytes], raw[GUARD_BYTES + nbytes :]


# --- summaries: what a check found, computed in numpy here or on the GPU (device_checks) ------
@dataclass(frozen=True)
class GuardSummary:
    """Changed bytes of a buffer's two guard bands (offsets within each band)."""

    front_changed: int = 0
    front_first: int = 0
    back_changed: int = 0
    back_first: int = 0
    back_last: int = 0
    guard: int = GUARD_BYTES  # the band's size on each side (`guard_bytes`)


@dataclass(frozen=True)
class ChangeSummary:
    """Elements of an input that differ bit for bit from what was uploaded."""

    changed: int = 0
    first: int = 0
    before: Any = None  # storage-dtype values at `first`
    after: Any = None


@dataclass(frozen=True)
class OutputSummary:
    """An output against a reference (or alone: its unwritten elements only)."""

    n: int
    unwritten: int = 0  # elements still holding the poison (where the reference does not)
    unwritten_first: int = 0
    unwritten_last: int = 0
    bad: int = 0  # elements outside tolerance
    first_bad: int = 0
    worst: int = 0  # the first index of the largest finite difference
    expected: Any = None  # storage-dtype values at `first_bad`
    got: Any = None
    largest: float | None = None  # the largest finite |got - expected|, floats only
    scale: float = 0.0  # the largest finite |expected| (the scale-aware floor's), floats only
    typical: float = 0.0  # the mean finite |expected| (a default atol's scale), floats only


def summarize_guards(raw: bytes, nbytes: int) -> GuardSummary:
    front, _, back = split_guarded(raw, nbytes)
    bad_front = np.flatnonzero(np.frombuffer(front, dtype=np.uint8) != GUARD_BYTE)
    bad_back = np.flatnonzero(np.frombuffer(back, dtype=np.uint8) != GUARD_BYTE)
    return GuardSummary(
        int(bad_front.size),
        int(bad_front[0]) if bad_front.size else 0,
        int(bad_back.size),
        int(bad_back[0]) if bad_back.size else 0,
        int(bad_back[-1]) if bad_back.size else 0,
    )


def summarize_changed(before: np.ndarray, after: np.ndarray) -> ChangeSummary:
    if before.size == 0:
        return ChangeSummary()
    b = before.reshape(-1).view(np.uint8).reshape(before.size, -1)
    a = after.reshape(-1).view(np.uint8).reshape(after.size, -1)
    diff = np.flatnonzero((a != b).any(axis=1))
    if diff.size == 0:
        return ChangeSummary()
    i = int(diff[0])
    return ChangeSummary(int(diff.size), i, before.flat[i], after.flat[i])


def summarize_output(
    expected: np.ndarray | None,
    got: np.ndarray,
    dtype: str,
    *,
    rtol: float,
    atol: float,
    atol_relative: bool = False,
) -> OutputSummary:
    """`got` against `expected` (None: its unwritten elements only), as `cl_check_output`;
    `atol_relative`: `atol` is the type's default (`effective_atol`)."""
    out = got.reshape(-1)
    n = out.size
    poisoned = unwritten_mask(out, dtype)
    if expected is None:
        idx = np.flatnonzero(poisoned)
        return _unwritten_summary(n, idx)
    exp = expected.reshape(-1)
    poisoned &= ~unwritten_mask(exp, dtype)
    base = _unwritten_summary(n, np.flatnonzero(poisoned))
    largest = None
    worst = 0
    scale = typical = 0.0
    if is_float(dtype):
        with np.errstate(invalid="ignore", over="ignore"):  # (a signalling NaN's cast warns)
            e = as_float64(exp, dtype)
            g = as_float64(out, dtype)
            err = np.abs(g - e)
        scale = buffer_scale(e)
        typical = typical_magnitude(magnitude_units(e, scale), scale, n)
        close = within_tolerance(
            err,
            e,
            dtype,
            rtol=rtol,
            atol=atol,
            scale=scale,
            typical=typical,
            atol_relative=atol_relative,
        )
        finite = ~(np.isinf(e) | np.isinf(g))
        both_nan = np.isnan(e) & np.isnan(g)
        same_inf = np.isinf(e) & (e == g)
        bad = ~((close & finite) | both_nan | same_inf)
        finite_err = np.isfinite(err)
        if finite_err.any():
            largest = float(err[finite_err].max())
    else:
        bad = exp != out
    idx = np.flatnonzero(bad)
    base = replace(base, scale=scale, typical=typical)
    if idx.size == 0:
        return replace(base, largest=largest)
    if largest is not None:
        worst = int(np.flatnonzero(finite_err & (err == largest))[0])
    i = int(idx[0])
    return replace(
        base,
        bad=int(idx.size),
        first_bad=i,
        worst=worst,
        expected=exp[i],
        got=out[i],
        largest=largest,
    )


def _unwritten_summary(n: int, idx: np.ndarray) -> OutputSummary:
    if idx.size == 0:
        return OutputSummary(n)
    return OutputSummary(n, int(idx.size), int(idx[0]), int(idx[-1]))


# --- wording: the messages a person and an LLM act on -----------------------------------------
def check_guards(name: str, raw: bytes, nbytes: int, itemsize: int, where: str) -> Finding:
    """A write outside [0, count) shows as a changed guard byte."""
    return word_guards(name, summarize_guards(raw, nbytes), nbytes, itemsize, where)


def word_guards(name: str, s: GuardSummary, nbytes: int, itemsize: int, where: str) -> Finding:
    if s.front_changed == 0 and s.back_changed == 0:
        return OK
    count = nbytes // itemsize
    parts = []
    if s.back_changed:
        first = s.back_first // itemsize
        last = s.back_last // itemsize
        parts.append(
            f"{name}[{count + first}]"
            + (f"..{name}[{count + last}]" if last > first else "")
            + f" past the end ({name} has {count} elements)"
        )
    if s.front_changed:
        first = (s.front_first - s.guard) // itemsize
        parts.append(f"{name}[{first}] before the start")
    changed = s.front_changed + s.back_changed
    return Finding(
        "out_of_bounds",
        f"{where}: wrote outside the buffer: {'; '.join(parts)} ({changed} guard bytes changed)",
        changed,
    )


def check_unchanged(name: str, before: np.ndarray, after: np.ndarray, where: str) -> Finding:
    """An `in` buffer must come back bit for bit as it was uploaded."""
    return word_unchanged(name, summarize_changed(before, after), before.size, where)


def word_unchanged(name: str, s: ChangeSummary, n: int, where: str) -> Finding:
    if s.changed == 0:
        return OK
    i = s.first
    return Finding(
        "input_modified",
        f"{where}: the kernel modified its input {name}: {name}[{i}] was {_fmt(s.before)} "
        f"and is now {_fmt(s.after)} ({s.changed} of {n} elements changed)",
        s.changed,
    )


def unwritten_mask(got: np.ndarray, dtype: str) -> np.ndarray:
    bits_type, value = _POISON_BITS[dtype]
    return got.reshape(-1).view(bits_type) == np.array(value, dtype=bits_type)


def word_unwritten(name: str, s: OutputSummary, where: str) -> Finding:
    """A run's own output (no reference) with poison left in it."""
    if s.unwritten == 0:
        return OK
    return Finding(
        "unwritten_output",
        f"{where}: {s.unwritten} of {s.n} elements of {name} were never "
        f"written (first {name}[{s.unwritten_first}], last {name}[{s.unwritten_last}])",
        s.unwritten,
    )


def compare_output(
    name: str,
    expected: np.ndarray,
    got: np.ndarray,
    dtype: str,
    *,
    rtol: float,
    atol: float,
    where: str,
    sizes: Mapping[str, int] | None = None,
    what: str = "expected",
    atol_relative: bool = False,
) -> Finding:
    """`got` against `expected`: unwritten elements first, then values outside tolerance.

    Floats: |got - expected| <= atol + rtol * |expected|, or within the scale-aware floor
    (`within_tolerance`); NaN matches NaN; an infinity matches the same infinity. Integers must
    be equal.
    """
    summary = summarize_output(
        expected, got, dtype, rtol=rtol, atol=atol, atol_relative=atol_relative
    )
    return word_output(
        name,
        summary,
        dtype,
        rtol=rtol,
        atol=atol,
        where=where,
        sizes=sizes,
        what=what,
        atol_relative=atol_relative,
    )


def word_output(
    name: str,
    s: OutputSummary,
    dtype: str,
    *,
    rtol: float,
    atol: float,
    where: str,
    sizes: Mapping[str, int] | None = None,
    what: str = "expected",
    atol_relative: bool = False,
) -> Finding:
    n = s.n
    if s.unwritten:
        i = s.unwritten_first
        tail = " (the last element)" if i == n - 1 and s.unwritten == 1 else ""
        return Finding(
            "unwritten_output",
            f"{where}: {_at(name, i, n, sizes)} was never written{tail}: "
            f"{s.unwritten} of {n} elements of {name} still hold the poison value "
            f"(first unwritten index {i}, last {s.unwritten_last})",
            s.unwritten,
        )
    if s.bad == 0:
        return OK
    i = s.first_bad
    worst = ""
    bound = ""
    if is_float(dtype):
        if s.largest is not None:
            worst = f"; largest difference {s.largest:.4g}"
        bound = _broken_bound(s, dtype, rtol=rtol, atol=atol, atol_relative=atol_relative)
    return Finding(
        "wrong_output",
        f"{where}: {_at(name, i, n, sizes)} {what} {_fmt(s.expected, dtype)} got "
        f"{_fmt(s.got, dtype)} ({s.bad} of {n} elements differ{worst}{bound})",
        s.bad,
    )


def _broken_bound(
    s: OutputSummary, dtype: str, *, rtol: float, atol: float, atol_relative: bool = False
) -> str:
    """Which bounds the first bad element broke, and by how much: `; |diff| 3.1e-03 exceeds
    the spec's bound 1.0e-05 (atol 1e-05 + rtol 0.0001 x |expected|) by 310x and the
    scale-aware bound 4.0e-05 (512 u x buffer scale 2.6 + 1 ulp) by 77x`."""
    e = as_float64(np.array([s.expected], dtype=storage_dtype(dtype)), dtype)
    g = as_float64(np.array([s.got], dtype=storage_dtype(dtype)), dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = float(np.abs(g - e)[0])
    if not np.isfinite(diff):
        return f"; tolerance rtol={rtol:g} atol={atol:g}: a non-finite value matches only itself"
    atol_eff = effective_atol(atol, s.typical, atol_relative)
    spec_bound = atol_eff + rtol * abs(float(e[0]))
    shown = f"atol {atol:g}"
    if atol_relative and atol_eff != atol:
        shown = f"default atol {atol:g} x mean |expected| {s.typical:.3g}"
    text = (
        f"; |diff| {diff:.2g} exceeds the spec's bound {spec_bound:.2g} ({shown} + "
        f"rtol {rtol:g} x |expected|){_by(diff, spec_bound)}"
    )
    factor = scale_tolerance(dtype, rtol, atol)
    if factor > 0:
        floor = factor * s.scale + float(ulp_at(e, dtype)[0])
        unit = "2^-53" if dtype == "float64" else "2^-24"
        text += (
            f" and the scale-aware bound {floor:.2g} ({SCALE_ULPS} x {unit} x buffer "
            f"scale {s.scale:.3g} + 1 ulp){_by(diff, floor)}"
        )
    return text


def _by(diff: float, bound: float) -> str:
    return f" by {diff / bound:.3g}x" if bound > 0 else ""


def _at(name: str, i: int, n: int, sizes: Mapping[str, int] | None) -> str:
    """`out[12345]`, with a 2-D hint when two size values multiply to the element count."""
    text = f"{name}[{i}]"
    if sizes:
        items = [(k, v) for k, v in sizes.items() if v > 1]
        for a, (ka, va) in enumerate(items):
            for kb, vb in items[a + 1 :]:
                if va * vb == n:
                    return f"{text} (= [{i // vb}][{i % vb}] as [{ka}][{kb}])"
    return text


def _fmt(value: object, dtype: str | None = None) -> str:
    if dtype == "bfloat16":
        value = float(bf16_to_float32(np.array([value], dtype=np.uint16))[0])
    if isinstance(value, float | np.floating):
        f = float(value)
        if np.isnan(f):
            return "NaN"
        return f"{f:.6g}"
    return str(value)
