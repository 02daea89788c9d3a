"""Inputs from a counter-based generator: value i of a buffer is a pure function of (seed, stream,
i), so the worker makes them on the GPU (`device_checks.SOURCE`, `cl_generate`) and this numpy
twin makes the same ones on any machine (the CPU driver double, tests, host-side tools).

The hash is splitmix64's finaliser; `inputs.describe` turns a spec's `init` into a `Generated`.
Every `init` kind keeps its distribution (docs/design.md):
uniform(lo, hi), normal(mean, std) (Box-Muller), randint(lo, hi) (inclusive), arange(), zeros(),
ones(); defaults as in `inputs`. Both sides use only IEEE basic operations (the device code is
compiled with --fmad=false), so uniform, randint, arange, zeros and ones are bit-identical between
numpy and the GPU; normal goes through log and cos, whose last bit may differ between the device's
math library and the host's (the device gives the same values on every GPU).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cuda_llm_lsp.evaluate.compare import bf16_from_float, is_float, storage_dtype

# The codes the device kernels take (`device_checks.SOURCE` spells the same numbers).
DTYPE_CODES = {"float32": 0, "float64": 1, "float16": 2, "bfloat16": 3, "int8": 4, "uint8": 5,
               "int32": 6, "uint32": 7, "int64": 8}  # fmt: skip
KIND_CODES = {"uniform": 0, "normal": 1, "randint": 2, "arange": 3, "zeros": 4, "ones": 5}
INT_RANGE = {"int8": (-128, 127), "uint8": (0, 255), "int32": (-(2**31), 2**31 - 1),
             "uint32": (0, 2**32 - 1), "int64": (-(2**63), 2**63 - 1)}  # fmt: skip

M64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
STEP = 0xD1B54A32D192ED03


class InitError(ValueError):
    """An `init` that cannot produce values for its element type."""


def mix(z: int) -> int:
    """splitmix64's finaliser of one 64-bit value (a Python int; the key of a buffer)."""
    z = (z + GOLDEN) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def buffer_key(seed: int, case: int, draw: int, buffer: int) -> int:
    """One buffer's key: every (seed, case, draw, buffer index) gets its own stream."""
    stream = ((case & 0xFFFFFFFF) << 32) | ((draw & 0xFFFF) << 16) | (buffer & 0xFFFF)
    return mix((seed & M64) ^ mix(stream))


def _mix_array(z: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        z = z + np.uint64(GOLDEN)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def bits(key: int, count: int, lane: int = 0) -> np.ndarray:
    """64 random bits per element: mix(key ^ (i * 2 + lane) * STEP)."""
    i = np.arange(count, dtype=np.uint64)
    with np.errstate(over="ignore"):
        counter = (i * np.uint64(2) + np.uint64(lane)) * np.uint64(STEP)
    return _mix_array(np.uint64(key) ^ counter)


def unit(key: int, count: int, lane: int = 0) -> np.ndarray:
    """Doubles in [0, 1): the top 53 bits times 2**-53."""
    return (bits(key, count, lane) >> np.uint64(11)).astype(np.float64) * 2.0**-53


@dataclass(frozen=True)
class Generated:
    """A buffer's values as the worker makes them on the device: the init kind (a code of
    `KIND_CODES`), its parameters (randint's bounds as `lo` and `span`, 0 for all 2**64) and
    the buffer's key (`buffer_key`)."""

    kind: int
    a: float = 0.0
    b: float = 0.0
    lo: int = 0
    span: int = 0
    key: int = 0


def values_of(g: Generated, dtype: str, count: int) -> np.ndarray:
    """The numpy twin of `cl_generate`: the values `g` describes, in the storage dtype."""
    key = g.key
    values: np.ndarray
    if g.kind == KIND_CODES["uniform"]:
        values = g.a + (g.b - g.a) * unit(key, count)
    elif g.kind == KIND_CODES["normal"]:
        u1 = 1.0 - unit(key, count, 0)  # (0, 1]: log stays finite
        u2 = unit(key, count, 1)
        values = g.a + g.b * (np.sqrt(-2.0 * np.log(u1)) * np.cos(6.283185307179586 * u2))
    elif g.kind == KIND_CODES["randint"]:
        raw = bits(key, count)
        offset = raw if g.span == 0 else raw % np.uint64(g.span)
        with np.errstate(over="ignore"):
            as_int = (offset + np.uint64(g.lo & M64)).view(np.int64)
        if not is_float(dtype):
            return as_int.astype(storage_dtype(dtype))  # wraps like C
        values = as_int.astype(np.float64)
    elif g.kind == KIND_CODES["arange"]:
        if not is_float(dtype):
            return np.arange(count, dtype=np.int64).astype(storage_dtype(dtype))
        values = np.arange(count, dtype=np.float64)
    else:
        values = np.full(count, 0.0 if g.kind == KIND_CODES["zeros"] else 1.0)
    return _store(values, dtype)


def _store(values: np.ndarray, dtype: str) -> np.ndarray:
    """Doubles to the storage dtype as the device does: floats round to nearest even (through
    float32 for the 16-bit types), integers round half to even then wrap like C."""
    if dtype == "float64":
        return values
    if dtype == "bfloat16":
        return bf16_from_float(values.astype(np.float32))
    if dtype == "float16":
        with np.errstate(over="ignore"):  # beyond 65504: an infinity, as on the device
            return values.astype(np.float32).astype(np.float16)
    if dtype == "float32":
        return values.astype(np.float32)
    with np.errstate(invalid="ignore"):
        return np.rint(values).astype(np.int64).astype(storage_dtype(dtype))
