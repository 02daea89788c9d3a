"""Compare a kernel's buffers with the oracle's: pure numpy, no CUDA.

The worker hands back every buffer together with its guard bands; this module decides whether a
run wrote outside its buffers, changed an input, left output elements unwritten, or computed
something else than the oracle, and words the finding so that a person and an LLM can act on it:
`case 3 (rows=1000, cols=999): out[12345] expected 0.5123 got 0.0 (1 of 999000 elements differ)`.

Element types are the spec's names. bfloat16 is always carried as its raw uint16 bits, so results
are bit-exact whether or not ml_dtypes is installed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from cuda_llm_lsp.evaluate.types import Status

# Guard bands around every device buffer (bytes each side), filled with GUARD_BYTE.
GUARD_BYTES = 4096
GUARD_BYTE = 0xDB

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


def check_guards(name: str, raw: bytes, nbytes: int, itemsize: int, where: str) -> Finding:
    """A write outside [0, count) shows as a changed guard byte."""
    front, _, back = split_guarded(raw, nbytes)
    fa = np.frombuffer(front, dtype=np.uint8)
    ba = np.frombuffer(back, dtype=np.uint8)
    bad_front = np.flatnonzero(fa != GUARD_BYTE)
    bad_back = np.flatnonzero(ba != GUARD_BYTE)
    if bad_front.size == 0 and bad_back.size == 0:
        return OK
    count = nbytes // itemsize
    parts = []
    if bad_back.size:
        first = int(bad_back[0]) // itemsize
        last = int(bad_back[-1]) // itemsize
        parts.append(
            f"{name}[{count + first}]" + (f"..{name}[{count + last}]" if last > first else "")
            + f" past the end ({name} has {count} elements)"
        )  # fmt: skip
    if bad_front.size:
        first = (int(bad_front[0]) - GUARD_BYTES) // itemsize
        parts.append(f"{name}[{first}] before the start")
    changed = int(bad_front.size + bad_back.size)
    return Finding(
        "out_of_bounds", f"{where}: wrote outside the buffer: {'; '.join(parts)} "
        f"({changed} guard bytes changed)", changed,
    )  # fmt: skip


def check_unchanged(name: str, before: np.ndarray, after: np.ndarray, where: str) -> Finding:
    """An `in` buffer must come back bit for bit as it was uploaded."""
    if before.size == 0:  # a count-0 buffer (the spec allows it): nothing to change
        return OK
    b = before.reshape(-1).view(np.uint8).reshape(before.size, -1)
    a = after.reshape(-1).view(np.uint8).reshape(after.size, -1)
    diff = np.flatnonzero((a != b).any(axis=1))
    if diff.size == 0:
        return OK
    i = int(diff[0])
    return Finding(
        "input_modified",
        f"{where}: the kernel modified its input {name}: {name}[{i}] was {_fmt(before.flat[i])} "
        f"and is now {_fmt(after.flat[i])} ({diff.size} of {before.size} elements changed)",
        int(diff.size),
    )


def unwritten_mask(got: np.ndarray, dtype: str) -> np.ndarray:
    bits_type, value = _POISON_BITS[dtype]
    return got.reshape(-1).view(bits_type) == np.array(value, dtype=bits_type)


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
) -> Finding:
    """`got` against `expected`: unwritten elements first, then values outside tolerance.

    Floats: |got - expected| <= atol + rtol * |expected|; NaN matches NaN; an infinity matches
    the same infinity. Integers must be equal.
    """
    exp = expected.reshape(-1)
    out = got.reshape(-1)
    n = exp.size
    poisoned = unwritten_mask(out, dtype) & ~unwritten_mask(exp, dtype)
    if poisoned.any():
        idx = np.flatnonzero(poisoned)
        i = int(idx[0])
        tail = " (the last element)" if i == n - 1 and idx.size == 1 else ""
        return Finding(
            "unwritten_output",
            f"{where}: {_at(name, i, n, sizes)} was never written{tail}: "
            f"{idx.size} of {n} elements of {name} still hold the poison value "
            f"(first unwritten index {i}, last {int(idx[-1])})",
            int(idx.size),
        )
    if is_float(dtype):
        e = as_float64(exp, dtype)
        g = as_float64(out, dtype)
        with np.errstate(invalid="ignore", over="ignore"):
            close = np.abs(g - e) <= atol + rtol * np.abs(e)
        finite = ~(np.isinf(e) | np.isinf(g))
        both_nan = np.isnan(e) & np.isnan(g)
        same_inf = np.isinf(e) & (e == g)
        bad = ~((close & finite) | both_nan | same_inf)
    else:
        bad = exp != out
    if not bad.any():
        return OK
    idx = np.flatnonzero(bad)
    i = int(idx[0])
    worst = ""
    if is_float(dtype):
        with np.errstate(invalid="ignore", over="ignore"):
            err = np.abs(as_float64(out, dtype) - as_float64(exp, dtype))
        finite = err[np.isfinite(err)]
        if finite.size:
            worst = f"; largest difference {float(finite.max()):.4g}"
        worst += f"; tolerance rtol={rtol:g} atol={atol:g}"
    return Finding(
        "wrong_output",
        f"{where}: {_at(name, i, n, sizes)} {what} {_fmt(exp[i], dtype)} got {_fmt(out[i], dtype)} "
        f"({idx.size} of {n} elements differ{worst})",
        int(idx.size),
    )


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
