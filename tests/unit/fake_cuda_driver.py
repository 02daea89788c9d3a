"""A CPU test double of the parts of `cuda.bindings.driver` the evaluator's worker uses.

Selected in the worker with `CUDA_LLM_LSP_DRIVER=tests.unit.fake_cuda_driver` (CPU tests only),
so the evaluator's rules, the worker protocol, restarts, watchdogs and cancellation are
exercised without a GPU. "Device memory" is host memory (numpy arrays, their addresses are the
device pointers); a "cubin" is `b"FAKE:" + kernel name`; kernels are the Python functions below,
each a planted behaviour mirroring the GPU tests' CUDA candidates. The worker's own kernels
(inputs and checks, `evaluate/device_checks.py`) are numpy functions of the same names that write
the same slots, so the GPU-side paths of the worker run in CI. Time is simulated: each
kernel has a cost in ms, with a small deterministic jitter.
"""

from __future__ import annotations

import ctypes
import enum
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from cuda_llm_lsp.evaluate.compare import (
    buffer_scale,
    effective_atol,
    magnitude_units,
    storage_dtype,
    typical_magnitude,
    ulp_at,
)
from cuda_llm_lsp.evaluate.counter import DTYPE_CODES, Generated, values_of


class CUresult(enum.IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_INVALID_VALUE = 1
    CUDA_ERROR_NOT_FOUND = 500
    CUDA_ERROR_NOT_READY = 600
    CUDA_ERROR_ILLEGAL_ADDRESS = 700
    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701
    CUDA_ERROR_MISALIGNED_ADDRESS = 716
    CUDA_ERROR_LAUNCH_FAILED = 719


class CUdevice_attribute(enum.IntEnum):
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
    CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81
    CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK = 12
    CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR = 82
    CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38
    CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13
    CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE = 36
    CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH = 37


class CUfunction_attribute(enum.IntEnum):
    CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1
    CU_FUNC_ATTRIBUTE_NUM_REGS = 4
    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8


_ATTRS = {
    "COMPUTE_CAPABILITY_MAJOR": 9, "COMPUTE_CAPABILITY_MINOR": 0, "MULTIPROCESSOR_COUNT": 132,
    "MAX_THREADS_PER_BLOCK": 1024, "MAX_SHARED_MEMORY_PER_BLOCK": 49152,
    "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": 232448, "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR": 233472,
    "MAX_REGISTERS_PER_BLOCK": 65536, "MAX_REGISTERS_PER_MULTIPROCESSOR": 65536,
    "L2_CACHE_SIZE": 1 << 20, "CLOCK_RATE": 1980000, "MEMORY_CLOCK_RATE": 2619000,
    "GLOBAL_MEMORY_BUS_WIDTH": 5120,
}  # fmt: skip

OK = (CUresult.CUDA_SUCCESS,)


class Fault(Exception):
    pass


class _State:
    def __init__(self) -> None:
        self.allocations: dict[int, np.ndarray] = {}
        self.clock_ms = 0.0
        self.sticky = 0
        self.pending = 0  # error the next stream query reports
        self.hung = False
        self.launches: dict[str, int] = {}
        self.device_globals: dict[str, Any] = {}
        self.module_globals: dict[str, Any] = {}  # a module's __device__ state: gone on unload
        self.dyn_smem: dict[str, int] = {}
        self.flushed = False  # an L2 flush (cl_flush over >= 16 MiB) since the last launch
        self.launch_timed = False  # the launch in progress sits between two event records
        self.timed = False  # an event was recorded since the last launch
        self.threads = 0  # grid x block threads along x of the launch in progress


S = _State()


def _view(addr: int, count: int, dtype: Any) -> np.ndarray:
    nbytes = count * np.dtype(dtype).itemsize
    for base, arr in S.allocations.items():
        if base <= addr and addr + nbytes <= base + arr.size:
            off = addr - base
            return arr[off : off + nbytes].view(dtype)
    raise Fault(f"illegal address {addr:#x}")


# --- kernels: (x: const float*, y: float*, n: int) -------------------------------------------
# Launches of a candidate before its timing (4 spec cases x 2, a pre-filled run, up to 10 hidden
# cases) stay below LATE: the "late" planted kernels pass every correctness run and cheat only
# while timed.
LATE = 24


def _twice(x: np.ndarray, n: int) -> np.ndarray:
    return (2.0 * x[:n]).astype(np.float32)


def k_twice(x: int, y: int, n: int) -> None:
    _view(y, n, np.float32)[:] = _twice(_view(x, n, np.float32), n)


def k_nothing(x: int, y: int, n: int) -> None:
    pass


def k_skip_last(x: int, y: int, n: int) -> None:
    if n > 1:
        _view(y, n - 1, np.float32)[:] = _twice(_view(x, n, np.float32), n - 1)


def k_past_end(x: int, y: int, n: int) -> None:
    k_twice(x, y, n)
    _view(y + 4 * n, 1, np.float32)[:] = 1.0


def k_racy(x: int, y: int, n: int) -> None:
    k_twice(x, y, n)
    count = S.launches.get("racy", 0)
    if count % 2 == 1 and n > 7:  # every other launch loses a write race
        _view(y + 4 * 7, 1, np.float32)[:] = 123.0


def k_caching(x: int, y: int, n: int) -> None:
    count = S.launches.get("caching", 0)
    cache = S.device_globals.setdefault("cache", {})
    if count >= LATE and n in cache:
        _view(y, n, np.float32)[:] = cache[n]
        return
    k_twice(x, y, n)
    cache[n] = _view(y, n, np.float32).copy()


def k_pointer_cache(x: int, y: int, n: int) -> None:
    """Skips all work when called again with a `y` it has seen (once past the first runs): it
    remembers every one, so rotating buffers does not shake it off."""
    count = S.launches.get("pointer_cache", 0)
    seen = S.device_globals.setdefault("pointer_cache", set())
    if count >= LATE and y in seen:
        return
    k_twice(x, y, n)
    seen.add(y)


def k_pointer_replay(x: int, y: int, n: int) -> None:
    """Writes back the result it remembered for the same `y` (once past the first runs)."""
    count = S.launches.get("pointer_replay", 0)
    results = S.device_globals.setdefault("pointer_replay", {})  # y -> its last result
    last = results.get(y)
    if count >= LATE and last is not None and last.size == n:
        _view(y, n, np.float32)[:] = last
        return
    k_twice(x, y, n)
    results[y] = _view(y, n, np.float32).copy()


def k_counter_cache(x: int, y: int, n: int) -> None:
    """Computes only on its first LATE launches."""
    if S.launches.get("counter_cache", 0) < LATE:
        k_twice(x, y, n)


def k_past_end_late(x: int, y: int, n: int) -> None:
    """Correct on its first runs, then writes one element past the end of y."""
    if S.launches.get("past_end_late", 0) >= LATE:
        k_past_end(x, y, n)
    else:
        k_twice(x, y, n)


def k_past_end_one_place(x: int, y: int, n: int) -> None:
    """Past the end only in the second `y` it meets once past the first runs: while timing, one
    of the copies of the buffers the launches rotate over (`Plan.placements`), one at most."""
    k_twice(x, y, n)
    if S.launches.get("past_end_one_place", 0) < LATE:
        return
    met = S.device_globals.setdefault("past_end_one_place", [])
    if y not in met:
        met.append(y)
    if len(met) > 1 and y == met[1]:
        _view(y + 4 * n, 1, np.float32)[:] = 1.0


def k_records_outputs(x: int, y: int, n: int) -> None:
    """Correct; notes every output address it is launched on."""
    k_twice(x, y, n)
    S.device_globals.setdefault("records_outputs", []).append(y)


def k_twice64(x: int, y: int, n: int) -> None:  # (const double* x, double* y, int n)
    _view(y, n, np.float64)[:] = 2.0 * _view(x, n, np.float64)


def k_pointer_cache64(x: int, y: int, n: int) -> None:
    count = S.launches.get("pointer_cache64", 0)
    seen = S.device_globals.setdefault("pointer_cache64", set())
    if count >= LATE and y in seen:
        return
    k_twice64(x, y, n)
    seen.add(y)


def k_accumulate(x: int, y: int, n: int) -> None:  # (const float* x, float* y /* inout */, n)
    _view(y, n, np.float32)[:] += _twice(_view(x, n, np.float32), n)


def k_accumulate_past_end_late(x: int, y: int, n: int) -> None:
    k_accumulate(x, y, n)
    if S.launches.get("accumulate_past_end_late", 0) >= LATE:
        _view(y + 4 * n, 1, np.float32)[:] = 1.0


# --- planted for issue 11 (integrity): each cheats in one way the evaluator must catch -------
def k_inout_skip(x: int, y: int, n: int) -> None:
    """inout: skips its work (and most of its cost) when y already holds its last result, as
    it does when the buffer is not restored between timed launches."""
    state = S.device_globals.setdefault("inout_skip", {})
    last = state.get(y)
    if last is not None and last.size == n and np.array_equal(_view(y, n, np.float32), last):
        S.clock_ms -= 0.030  # (it skipped the work)
        return
    k_accumulate(x, y, n)
    state[y] = _view(y, n, np.float32).copy()


def _fingerprint(x: int, n: int) -> bytes:
    return _view(x, min(n, 4), np.float32).tobytes() + n.to_bytes(8, "little")


def k_fingerprint_replay(x: int, y: int, n: int) -> None:
    """Replays the result saved for inputs whose first values it has seen (cheap when it hits)
    and pretends the replay costs almost nothing: timed on repeated inputs it looks 8x faster."""
    saved = S.device_globals.setdefault("fingerprint_replay", {})
    hit = saved.get(_fingerprint(x, n))
    if hit is not None:
        _view(y, n, np.float32)[:] = hit
        S.clock_ms -= 0.035
        return
    k_twice(x, y, n)
    saved[_fingerprint(x, n)] = _view(y, n, np.float32).copy()


def k_poison_only(x: int, y: int, n: int) -> None:
    """Writes only the elements that hold a NaN (the poison it was told about)."""
    out = _view(y, n, np.float32)
    with np.errstate(invalid="ignore"):
        where = np.isnan(out)
    out[where] = _twice(_view(x, n, np.float32), n)[where]


def k_fixed_poison(x: int, y: int, n: int) -> None:
    """Writes only where it sees the documented poison 0x7FA5A5A5: a poison drawn per run
    leaves it writing nothing."""
    out = _view(y, n, np.float32)
    where = out.view(np.uint32) == np.uint32(0x7FA5A5A5)
    out[where] = _twice(_view(x, n, np.float32), n)[where]


def k_tail_upto_5000(x: int, y: int, n: int) -> None:
    """Right for the spec's sizes only: handles n by blocks of 100 and a tail, except a tail of
    1 (n = 100k + 1 beyond the listed 1): such an n leaves its last element wrong."""
    k_twice(x, y, n)
    if n > 1 and n % 100 == 1:
        _view(y, n, np.float32)[n - 1] = 0.0


def k_range_shift(x: int, y: int, n: int) -> None:
    """Right for inputs inside init's range (-1, 1) only: clamps what it reads to it."""
    v = np.clip(_view(x, n, np.float32), -1.0, 1.0)
    _view(y, n, np.float32)[:] = 2.0 * v


def k_aligned_only(x: int, y: int, n: int) -> None:
    """Assumes 16-byte-aligned bases (float4 loads): misaligned, it faults."""
    if x % 16 or y % 16:
        S.pending = CUresult.CUDA_ERROR_MISALIGNED_ADDRESS
        return
    k_twice(x, y, n)


def k_oracle_reader(x: int, y: int, n: int) -> None:
    """Looks through device memory for the original's output on the same inputs (2x, found by
    its first values) and copies it at almost no cost; computes honestly when none is there."""
    want = _twice(_view(x, n, np.float32), n)
    target = want[: min(n, 4)].tobytes()
    for base, arr in list(S.allocations.items()):
        if arr.size > 16 << 20 or base <= y < base + arr.size:
            continue
        raw = arr.tobytes()
        at = raw.find(target)
        while at >= 0 and at + 4 * n <= len(raw):
            if raw[at : at + 4 * n] == want.tobytes():
                _view(y, n, np.float32)[:] = want  # (what it found there)
                S.clock_ms -= 0.035
                return
            at = raw.find(target, at + 1)
    k_twice(x, y, n)


def k_modifies_input_late(x: int, y: int, n: int) -> None:
    """Right and leaves x alone on its correctness runs; while timed, zeroes x[0] as well."""
    k_twice(x, y, n)
    if S.launches.get("modifies_input_late", 0) >= LATE:
        _view(x, 1, np.float32)[:] = 0.0


def k_persist(x: int, y: int, n: int) -> None:
    """y = 2x + (its module's launches so far): module state, which must not survive an unload."""
    state = S.module_globals.setdefault("persist", {"launches": 0})
    _view(y, n, np.float32)[:] = _twice(_view(x, n, np.float32), n) + state["launches"]
    state["launches"] += 1


def k_modifies_input(x: int, y: int, n: int) -> None:
    k_twice(x, y, n)
    _view(x, 1, np.float32)[:] = 0.0


def k_modifies_input_past_end(x: int, y: int, n: int) -> None:
    """Changes x[0] and writes y[n]: out_of_bounds (on the later buffer) must win."""
    k_modifies_input(x, y, n)
    _view(y, n + 1, np.float32)[n] = 1.0


def k_half(x: int, y: int, n: int) -> None:
    v = _twice(_view(x, n, np.float32), n)
    _view(y, n, np.float32)[:] = (v.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def k_illegal(x: int, y: int, n: int) -> None:
    _view(8, 1, np.float32)[:] = 1.0


def k_hang(x: int, y: int, n: int) -> None:
    S.hung = True


def k_fault_when_timed(x: int, y: int, n: int) -> None:
    """Correct in plain runs; an illegal access between timing events (seen by cuEventRecord)."""
    if S.launch_timed:
        raise Fault
    k_twice(x, y, n)


def k_covers_launch(x: int, y: int, n: int) -> None:
    """Two threads per element along x: run with a launch of fewer than 2n threads (the
    original's), the elements past half of them stay unwritten; with its own launch it is right."""
    m = min(n, S.threads // 2)
    _view(y, m, np.float32)[:] = _twice(_view(x, n, np.float32), m)


def k_trap(x: int, y: int, n: int) -> None:
    S.pending = CUresult.CUDA_ERROR_LAUNCH_FAILED


# name -> (function, cost in ms, launch error code or 0)
# kernels whose first parameter is a struct passed by value: `View {const float* x; int n;}`
BY_VALUE = {"accumulate_view", "accumulate_view_fast", "accumulate_view_wrong", "view_nothing"}

KERNELS: dict[str, tuple[Callable[[int, int, int], None], float, int]] = {
    "twice": (k_twice, 0.040, 0),
    "fast": (k_twice, 0.010, 0),
    "nothing": (k_nothing, 0.005, 0),
    "skip_last": (k_skip_last, 0.010, 0),
    "past_end": (k_past_end, 0.010, 0),
    "racy": (k_racy, 0.010, 0),
    "caching": (k_caching, 0.010, 0),
    "pointer_cache": (k_pointer_cache, 0.010, 0),
    "pointer_replay": (k_pointer_replay, 0.010, 0),
    "counter_cache": (k_counter_cache, 0.010, 0),
    "past_end_late": (k_past_end_late, 0.010, 0),
    "past_end_one_place": (k_past_end_one_place, 0.010, 0),
    "records_outputs": (k_records_outputs, 0.010, 0),
    "twice64": (k_twice64, 0.040, 0),
    "pointer_cache64": (k_pointer_cache64, 0.010, 0),
    "accumulate": (k_accumulate, 0.040, 0),
    "accumulate_view": (k_accumulate, 0.040, 0),
    "accumulate_view_fast": (k_accumulate, 0.010, 0),
    "accumulate_view_wrong": (k_twice, 0.010, 0),
    "view_nothing": (k_nothing, 0.010, 0),  # (View v, const float* y): reads, writes nothing
    "accumulate_fast": (k_accumulate, 0.010, 0),
    "accumulate_past_end_late": (k_accumulate_past_end_late, 0.010, 0),
    "modifies_input": (k_modifies_input, 0.010, 0),
    "half": (k_half, 0.010, 0),
    "modifies_input_past_end": (k_modifies_input_past_end, 0.010, 0),
    "illegal": (k_illegal, 0.010, 0),
    "hang": (k_hang, 0.010, 0),
    "trap": (k_trap, 0.010, 0),
    "fault_when_timed": (k_fault_when_timed, 0.010, 0),
    "covers_launch": (k_covers_launch, 0.010, 0),
    "launch_bounds": (k_twice, 0.010, CUresult.CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES),
    "inout_skip": (k_inout_skip, 0.040, 0),
    "fingerprint_replay": (k_fingerprint_replay, 0.040, 0),
    "poison_only": (k_poison_only, 0.010, 0),
    "fixed_poison": (k_fixed_poison, 0.010, 0),
    "tail_upto_5000": (k_tail_upto_5000, 0.010, 0),
    "range_shift": (k_range_shift, 0.010, 0),
    "aligned_only": (k_aligned_only, 0.010, 0),
    "persist": (k_persist, 0.010, 0),
    "oracle_reader": (k_oracle_reader, 0.040, 0),
    "modifies_input_late": (k_modifies_input_late, 0.010, 0),
}


# --- the worker's own kernels (cuda_llm_lsp/evaluate/device_checks.py), in numpy --------------
_DTYPES = {code: name for name, code in DTYPE_CODES.items()}
_BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
NO_INDEX = (1 << 64) - 1


def _slots(addr: int, count: int) -> np.ndarray:
    return _view(addr, count, np.uint64)


def _found(slots: np.ndarray, at: int, idx: np.ndarray, last: bool = True) -> None:
    """count, first (atomicMin), last (atomicMax) of the indices `idx`, as the kernels add."""
    if idx.size:
        slots[at] += np.uint64(idx.size)
        slots[at + 1] = min(int(slots[at + 1]), int(idx[0]))
        if last:
            slots[at + 2] = max(int(slots[at + 2]), int(idx[-1]))


def h_generate(
    p: int, n: int, dtype: int, kind: int, a: float, b: float, lo: int, span: int, key: int
) -> None:
    name = _DTYPES[dtype]
    values = values_of(Generated(kind, a, b, lo, span, key), name, n)
    _view(p, n, storage_dtype(name))[:] = values


def _as_float64(raw: np.ndarray, dtype: str) -> np.ndarray:
    with np.errstate(invalid="ignore"):  # a signalling NaN (the poison) warns in the cast
        if dtype == "bfloat16":
            return (raw.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        return raw.view(storage_dtype(dtype)).astype(np.float64)


def h_scale(expected: int, n: int, dtype: int, slots_at: int) -> None:
    name = _DTYPES[dtype]
    slots = _slots(slots_at, 10)
    e = _as_float64(_view(expected, n, _BITS[storage_dtype(name).itemsize]), name)
    top = buffer_scale(e)
    slots[8] = max(int(slots[8]), int(np.array([top]).view(np.uint64)[0]))


def h_magnitude(expected: int, n: int, dtype: int, slots_at: int) -> None:
    name = _DTYPES[dtype]
    slots = _slots(slots_at, 10)
    e = _as_float64(_view(expected, n, _BITS[storage_dtype(name).itemsize]), name)
    scale = float(np.array([slots[8]], dtype=np.uint64).view(np.float64)[0])
    slots[9] = int(slots[9]) + magnitude_units(e, scale)


def h_check_output(
    expected: int,
    got: int,
    n: int,
    dtype: int,
    poison: int,
    rtol: float,
    atol: float,
    scale_tol: float,
    atol_relative: int,
    slots_at: int,
) -> None:
    name = _DTYPES[dtype]
    size = storage_dtype(name).itemsize
    slots = _slots(slots_at, 10)
    scale = float(np.array([slots[8]], dtype=np.uint64).view(np.float64)[0])
    atol = effective_atol(atol, typical_magnitude(int(slots[9]), scale, n), bool(atol_relative))
    g = _view(got, n, _BITS[size])
    poisoned = g.astype(np.uint64) == np.uint64(poison)  # (compared as 64 bits, as on the GPU)
    if not expected:
        _found(slots, 0, np.flatnonzero(poisoned))
        return
    e = _view(expected, n, _BITS[size])
    _found(slots, 0, np.flatnonzero(poisoned & (e.astype(np.uint64) != np.uint64(poison))))
    if name in ("float32", "float64", "float16", "bfloat16"):
        ev, gv = _as_float64(e, name), _as_float64(g, name)
        with np.errstate(invalid="ignore", over="ignore"):
            err = np.abs(gv - ev)
            close = err <= atol + rtol * np.abs(ev)
            if scale_tol > 0:  # the floor, as cl_check_output: the scale cl_scale left in slot 8
                close |= err <= scale_tol * scale + ulp_at(ev, name)
        fin = ~(np.isinf(ev) | np.isinf(gv))
        wrong = ~((close & fin) | (np.isnan(ev) & np.isnan(gv)) | (np.isinf(ev) & (ev == gv)))
        finite = err[np.isfinite(err)]
        if finite.size:
            slots[5] = max(int(slots[5]), int(np.array([finite.max()]).view(np.uint64)[0]))
            slots[6] = 1
    else:
        wrong = e != g
    _found(slots, 3, np.flatnonzero(wrong), last=False)


def h_worst(expected: int, got: int, n: int, dtype: int, slots_at: int) -> None:
    name = _DTYPES[dtype]
    size = storage_dtype(name).itemsize
    slots = _slots(slots_at, 10)
    e, g = _view(expected, n, _BITS[size]), _view(got, n, _BITS[size])
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(_as_float64(g, name) - _as_float64(e, name))
    target = np.array([slots[5]], dtype=np.uint64).view(np.float64)[0]
    idx = np.flatnonzero(np.isfinite(err) & (err == target))
    if idx.size:
        slots[7] = min(int(slots[7]), int(idx[0]))


def h_check_bytes(p: int, n: int, value: int, slots_at: int) -> None:
    _found(_slots(slots_at, 3), 0, np.flatnonzero(_view(p, n, np.uint8) != value))


def h_check_changed(before: int, after: int, n: int, size: int, slots_at: int) -> None:
    b, a = _view(before, n, _BITS[size]), _view(after, n, _BITS[size])
    _found(_slots(slots_at, 2), 0, np.flatnonzero(a != b), last=False)


def h_flush(p: int, n: int, never: int) -> None:
    """The worker's L2 flush: reads `n` 16-byte elements, writes `p[0]` only if their XOR is
    `never` (it is not: the buffer is zeroed)."""
    words = _view(p, 4 * n, np.uint32)
    if int(np.bitwise_xor.reduce(words)) == never:
        words[0] = never
    S.clock_ms += 0.02
    if 16 * n >= 1 << 24:
        S.flushed = True


# name -> (function, parameter types as packed in kernelParams)
HELPERS: dict[str, tuple[Callable[..., None], tuple[Any, ...]]] = {
    "cl_generate": (h_generate, (ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int32,
                    ctypes.c_int32, ctypes.c_double, ctypes.c_double, ctypes.c_int64,
                    ctypes.c_uint64, ctypes.c_uint64)),
    "cl_check_output": (h_check_output, (ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64,
                        ctypes.c_int32, ctypes.c_uint64, ctypes.c_double, ctypes.c_double,
                        ctypes.c_double, ctypes.c_int32, ctypes.c_uint64)),
    "cl_scale": (h_scale, (ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int32, ctypes.c_uint64)),
    "cl_magnitude": (h_magnitude, (ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int32,
                     ctypes.c_uint64)),
    "cl_worst": (h_worst, (ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int32,
                 ctypes.c_uint64)),
    "cl_check_bytes": (h_check_bytes, (ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint32,
                       ctypes.c_uint64)),
    "cl_check_changed": (h_check_changed, (ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64,
                         ctypes.c_int32, ctypes.c_uint64)),
    "cl_flush": (h_flush, (ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint32)),
}  # fmt: skip
HELPER_CALLS: dict[str, int] = {}  # launches per helper (tests read them in-process)


def _run_helper(fn: str, params: int) -> tuple[Any, ...]:
    func, types = HELPERS[fn]
    addrs = (ctypes.c_uint64 * len(types)).from_address(params)
    args = [t.from_address(addrs[i]).value for i, t in enumerate(types)]
    try:
        func(*args)
    except Fault:
        S.pending = CUresult.CUDA_ERROR_ILLEGAL_ADDRESS
    HELPER_CALLS[fn] = HELPER_CALLS.get(fn, 0) + 1
    return OK


# --- benchmarks/realistic/*.cu at reduced sizes (their own signatures) --------------------------
def r_transpose(src: int, dst: int, rows: int, cols: int) -> None:
    a = _view(src, rows * cols, np.float32).reshape(rows, cols)
    _view(dst, rows * cols, np.float32)[:] = a.T.reshape(-1)


def r_softmax(x: int, y: int, rows: int, cols: int) -> None:
    a = _view(x, rows * cols, np.float32).reshape(rows, cols)
    e = np.exp(a - a.max(axis=1, keepdims=True))
    _view(y, rows * cols, np.float32)[:] = (e / e.sum(axis=1, keepdims=True)).reshape(-1)


def r_saxpy(x: int, y: int, a: float, n: int) -> None:
    _view(y, n, np.float32)[:] += np.float32(a) * _view(x, n, np.float32)


def r_matmul(a: int, b: int, c: int, n: int) -> None:
    am = _view(a, n * n, np.float32).reshape(n, n)
    bm = _view(b, n * n, np.float32).reshape(n, n)
    _view(c, n * n, np.float32)[:] = (am @ bm).reshape(-1)


_P, _I, _F = ctypes.c_uint64, ctypes.c_int32, ctypes.c_float
# name -> (function, parameter types, cost in ms)
TYPED: dict[str, tuple[Callable[..., None], tuple[Any, ...], float]] = {
    "transpose": (r_transpose, (_P, _P, _I, _I), 0.050),
    "softmax": (r_softmax, (_P, _P, _I, _I), 0.050),
    "saxpy": (r_saxpy, (_P, _P, _F, _I), 0.050),
    "matmul": (r_matmul, (_P, _P, _P, _I), 0.050),
}


def cubin(name: str) -> bytes:
    return b"FAKE:" + name.encode()


# --- variants of the typed kernels, for NVRTC-built candidates -------------------------------
# A real cubin runs its kernel as the typed Python function of the same name; a candidate that
# declares `__device__ int cuda_llm_fake_variant_<NAME>;` (kept in the cubin's symbols) runs it
# as that variant instead, so a suite replayed on the double has candidates of each outcome.
VARIANT_MARK = b"cuda_llm_fake_variant_"
VARIANT_COST = {"fast": 0.25, "slow": 2.0}  # the others cost what the original does
VARIANTS = ("fast", "slow", "nothing", "illegal")  # nothing: writes nothing; illegal: faults


def _variant(image: bytes) -> str:
    at = image.find(VARIANT_MARK)
    if at < 0:
        return ""
    tail = image[at + len(VARIANT_MARK) : at + len(VARIANT_MARK) + 32]
    name = tail.split(b"\0")[0].decode("ascii", "replace")
    if name not in VARIANTS:
        raise ValueError(f"fake driver: no variant {name!r}")
    return name


# --- driver API ------------------------------------------------------------------------------
def _err() -> tuple[Any, ...] | None:
    return (CUresult(S.sticky),) if S.sticky else None


def cuInit(flags: int) -> tuple[Any, ...]:
    return OK


def cuDeviceGetCount() -> tuple[Any, ...]:
    # CUDA_LLM_FAKE_DEVICES=N pretends N GPUs (multi-GPU tests); CUDA_VISIBLE_DEVICES narrows
    # them as the real driver does (a Ray actor sees the one it was given)
    pretended = os.environ.get("CUDA_LLM_FAKE_DEVICES")
    count = int(pretended or 1)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if pretended and visible is not None:
        count = len([v for v in visible.split(",") if v.strip().isdigit() and int(v) < count])
    return (CUresult.CUDA_SUCCESS, count)


def cuDeviceGet(i: int) -> tuple[Any, ...]:
    return (CUresult.CUDA_SUCCESS, i)


def cuDevicePrimaryCtxRetain(dev: int) -> tuple[Any, ...]:
    return (CUresult.CUDA_SUCCESS, "ctx")


def cuCtxSetCurrent(ctx: Any) -> tuple[Any, ...]:
    return OK


def cuStreamCreate(flags: int) -> tuple[Any, ...]:
    return (CUresult.CUDA_SUCCESS, "stream")


def cuDeviceGetAttribute(attr: CUdevice_attribute, dev: int) -> tuple[Any, ...]:
    return (CUresult.CUDA_SUCCESS, _ATTRS[attr.name.removeprefix("CU_DEVICE_ATTRIBUTE_")])


def cuDeviceGetName(length: int, dev: int) -> tuple[Any, ...]:
    return (CUresult.CUDA_SUCCESS, b"Fake H100 (CPU test double)\0")


def cuDeviceTotalMem(dev: int) -> tuple[Any, ...]:
    return (CUresult.CUDA_SUCCESS, 80 << 30)


def cuDriverGetVersion() -> tuple[Any, ...]:
    return (CUresult.CUDA_SUCCESS, 13000)


def cuMemGetInfo() -> tuple[Any, ...]:
    return (CUresult.CUDA_SUCCESS, 64 << 20, 80 << 30)


def cuModuleLoadData(image: bytes) -> tuple[Any, ...]:
    data = bytes(image)
    if data.startswith(b"FAKE:"):
        return (CUresult.CUDA_SUCCESS, data[5:].decode())
    if data.startswith(b"\x7fELF"):  # a real cubin: its kernels run as the Python ones of that name
        variant = _variant(data)
        return (CUresult.CUDA_SUCCESS, f"*@{variant}" if variant else "*")
    return (CUresult.CUDA_ERROR_INVALID_VALUE, None)


def cuModuleGetFunction(module: str, name: bytes) -> tuple[Any, ...]:
    fn = name.decode()
    if module.startswith("*") and (fn in HELPERS or fn in TYPED):  # NVRTC-built: run in numpy
        variant = module.partition("@")[2]
        return (CUresult.CUDA_SUCCESS, f"{fn}@{variant}" if variant and fn in TYPED else fn)
    if (module != "*" and fn != module) or fn not in KERNELS:
        return (CUresult.CUDA_ERROR_NOT_FOUND, None)
    return (CUresult.CUDA_SUCCESS, fn)


def cuModuleUnload(module: Any) -> tuple[Any, ...]:
    S.module_globals.pop(str(module), None)
    return OK


def cuFuncGetAttribute(attr: CUfunction_attribute, fn: str) -> tuple[Any, ...]:
    return (CUresult.CUDA_SUCCESS, 16 if attr.name.endswith("NUM_REGS") else 0)


def cuFuncSetAttribute(fn: str, attr: CUfunction_attribute, value: int) -> tuple[Any, ...]:
    if value > _ATTRS["MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"]:
        return (CUresult.CUDA_ERROR_INVALID_VALUE,)
    S.dyn_smem[fn] = value
    return OK


def cuMemAlloc(n: int) -> tuple[Any, ...]:
    if e := _err():
        return (*e, 0)
    arr = np.zeros(int(n), dtype=np.uint8)
    addr = arr.ctypes.data
    S.allocations[addr] = arr
    return (CUresult.CUDA_SUCCESS, addr)


def cuMemFree(addr: int) -> tuple[Any, ...]:
    while S.hung:  # like the real one: waits for the device, here forever
        time.sleep(1)
    S.allocations.pop(int(addr), None)
    return OK


def cuMemsetD8(addr: int, value: int, n: int) -> tuple[Any, ...]:
    if e := _err():
        return e
    _view(int(addr), int(n), np.uint8)[:] = value
    return OK


def cuMemsetD16(addr: int, value: int, n: int) -> tuple[Any, ...]:
    if e := _err():
        return e
    _view(int(addr), int(n), np.uint16)[:] = value
    return OK


def cuMemsetD32(addr: int, value: int, n: int) -> tuple[Any, ...]:
    if e := _err():
        return e
    _view(int(addr), int(n), np.uint32)[:] = value
    return OK


def cuMemsetD8Async(addr: int, value: int, n: int, stream: Any) -> tuple[Any, ...]:
    _view(int(addr), int(n), np.uint8)[:] = value
    return OK


def cuMemsetD16Async(addr: int, value: int, n: int, stream: Any) -> tuple[Any, ...]:
    _view(int(addr), int(n), np.uint16)[:] = value
    return OK


def cuMemsetD32Async(addr: int, value: int, n: int, stream: Any) -> tuple[Any, ...]:
    _view(int(addr), int(n), np.uint32)[:] = value
    S.clock_ms += 0.02
    return OK


def cuMemcpyHtoD(dst: int, src: int, n: int) -> tuple[Any, ...]:
    if e := _err():
        return e
    _view(int(dst), int(n), np.uint8)
    ctypes.memmove(int(dst), int(src), int(n))
    return OK


def cuMemcpyDtoH(dst: int, src: int, n: int) -> tuple[Any, ...]:
    if e := _err():
        return e
    _view(int(src), int(n), np.uint8)
    ctypes.memmove(int(dst), int(src), int(n))
    return OK


def cuMemcpyDtoDAsync(dst: int, src: int, n: int, stream: Any) -> tuple[Any, ...]:
    ctypes.memmove(int(dst), int(src), int(n))
    S.clock_ms += 2 * n / 3.0e12 * 1e3  # a 3 TB/s device
    return OK


def cuLaunchKernel(
    fn: str,
    gx: int,
    gy: int,
    gz: int,
    bx: int,
    by: int,
    bz: int,
    smem: int,
    stream: Any,
    params: int,
    extra: Any,
) -> tuple[Any, ...]:
    if e := _err():
        return e
    if fn in HELPERS:  # outside any timed region: no flush rule, no launch count
        return _run_helper(fn, params)
    base, _, variant = fn.partition("@")
    if base in TYPED:
        typed, types, cost = TYPED[base]
        cost *= VARIANT_COST.get(variant, 1.0)
        launch_error = 0
    else:
        func, cost, launch_error = KERNELS[fn]
    if S.timed and not S.flushed:  # the timing rule: an L2 flush before every timed launch
        S.pending = CUresult.CUDA_ERROR_LAUNCH_FAILED
    S.launch_timed = S.timed
    S.timed = S.flushed = False
    S.threads = gx * bx
    if launch_error:
        return (CUresult(launch_error),)
    if smem > 48 * 1024 and S.dyn_smem.get(fn, 0) < smem:
        return (CUresult.CUDA_ERROR_INVALID_VALUE,)
    try:
        if base in TYPED:
            addrs = (ctypes.c_uint64 * len(types)).from_address(params)
            if variant == "illegal":
                k_illegal(0, 0, 0)
            elif variant != "nothing":
                typed(*[t.from_address(addrs[i]).value for i, t in enumerate(types)])
        elif fn in BY_VALUE:  # (View v, float* y): View = {const float* x; int n;}, 16 bytes
            addrs = (ctypes.c_uint64 * 2).from_address(params)
            x = ctypes.c_uint64.from_address(addrs[0]).value
            n = ctypes.c_int32.from_address(addrs[0] + 8).value
            y = ctypes.c_uint64.from_address(addrs[1]).value
            func(x, y, n)
        else:
            addrs = (ctypes.c_uint64 * 3).from_address(params)
            x = ctypes.c_uint64.from_address(addrs[0]).value
            y = ctypes.c_uint64.from_address(addrs[1]).value
            n = ctypes.c_int32.from_address(addrs[2]).value
            func(x, y, n)
    except Fault:
        S.pending = CUresult.CUDA_ERROR_ILLEGAL_ADDRESS
    S.launches[fn] = S.launches.get(fn, 0) + 1
    jitter = 1 + 0.001 * ((S.launches[fn] * 7919) % 5 - 2)
    S.clock_ms += cost * jitter
    return OK


def cuStreamQuery(stream: Any) -> tuple[Any, ...]:
    if S.hung:
        return (CUresult.CUDA_ERROR_NOT_READY,)
    if S.pending:
        S.sticky, S.pending = S.pending, 0
    if e := _err():
        return e
    S.timed = False  # the stream is idle: the next launch is not between events
    return OK


class _Event:
    def __init__(self) -> None:
        self.t = 0.0


def cuEventCreate(flags: int) -> tuple[Any, ...]:
    return (CUresult.CUDA_SUCCESS, _Event())


def cuEventRecord(ev: _Event, stream: Any) -> tuple[Any, ...]:
    if S.pending:  # like the real driver, any call may report an earlier launch's fault
        S.sticky, S.pending = S.pending, 0
    if e := _err():
        return e
    ev.t = S.clock_ms
    S.timed = True
    return OK


def cuEventElapsedTime(a: _Event, b: _Event) -> tuple[Any, ...]:
    return (CUresult.CUDA_SUCCESS, b.t - a.t)


def cuEventDestroy(ev: _Event) -> tuple[Any, ...]:
    return OK
