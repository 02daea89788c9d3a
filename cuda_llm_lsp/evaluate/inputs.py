"""Seeded inputs for one test case: descriptions of values the worker generates on the GPU
(`case_sources`), or the same values as host arrays (`host_inputs`, from `counter`'s numpy twin:
the sanitizer, profiles, vendor baselines), so that a seed means the same inputs everywhere.
`make_inputs` draws from numpy's own generator (other values for the same seed).

Every `in` and `inout` pointer gets values from its `init` (default: uniform(-1, 1) for floats,
randint(0, 100) for integers: never zeros, which hide unwritten outputs and wrong indexing), or
from the user's `inputs = "file.py:fn"` hook for structured data. `out` pointers get no input:
the worker poisons them. bfloat16 is carried as raw uint16 bits (see `compare`).

The hook is the user's own code in the user's repository, loaded with importlib from the spec's
directory; its result is validated (names, element counts, dtypes) with a clear message.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from cuda_llm_lsp.evaluate.captured import CapturedDataError, captured_inputs, is_captured_case
from cuda_llm_lsp.evaluate.compare import bf16_from_float, is_float, storage_dtype
from cuda_llm_lsp.evaluate.counter import (
    INT_RANGE,
    KIND_CODES,
    M64,
    Generated,
    InitError,
    buffer_key,
    values_of,
)
from cuda_llm_lsp.source.spec import ArgSpec, Case, InitSpec, TestSpec
from cuda_llm_lsp.source.spec.hook import resolve_hook


class InputError(ValueError):
    """The spec's inputs cannot be produced (bad hook, bad init): a message for the user."""


def case_rng(seed: int, case_index: int, draw: int = 0) -> np.random.Generator:
    """The generator for one case; `draw` > 0 gives new values for the same case (recheck)."""
    return np.random.Generator(np.random.PCG64([seed & 0xFFFFFFFFFFFFFFFF, case_index, draw]))


def make_inputs(
    spec: TestSpec,
    case: Case,
    rng: np.random.Generator,
    spec_dir: Path | None = None,
) -> dict[str, np.ndarray]:
    """Host arrays for every `in` / `inout` pointer of `case`, in storage dtypes."""
    provided = _provided(spec, case, rng, spec_dir)
    arrays: dict[str, np.ndarray] = {}
    for arg in spec.args:
        if not arg.is_pointer or arg.role == "out":
            continue
        count = int(case.counts.get(arg.name, 0))
        dtype = arg.dtype or "float32"
        if arg.name in provided:
            arrays[arg.name] = provided[arg.name]
        else:
            arrays[arg.name] = generate(arg.init, dtype, count, rng)
    return arrays


def case_sources(
    spec: TestSpec, case: Case, seed: int, draw: int = 0, spec_dir: Path | None = None
) -> dict[str, np.ndarray | Generated]:
    """What the worker fills every `in` / `inout` pointer of `case` with: the hook's arrays
    (its one call for this case and draw), else a description of values the worker makes on
    the device (`counter`: the same for every kernel given the same seed, case and draw)."""
    provided = _provided(spec, case, case_rng(seed, case.index, draw), spec_dir)
    sources: dict[str, np.ndarray | Generated] = {}
    for position, arg in enumerate(spec.args):
        if not arg.is_pointer or arg.role == "out":
            continue
        if arg.name in provided:
            sources[arg.name] = provided[arg.name]
            continue
        key = buffer_key(seed, case.index, draw, position)
        try:
            sources[arg.name] = describe(arg.init, arg.dtype or "float32", key)
        except InitError as exc:
            raise InputError(str(exc)) from exc
    return sources


def host_inputs(
    spec: TestSpec, case: Case, seed: int, draw: int = 0, spec_dir: Path | None = None
) -> dict[str, np.ndarray]:
    """Host arrays for every `in` / `inout` pointer of `case`: the values the worker generates
    for the same seed, case and draw (`case_sources`, made by `counter.values_of`), or the
    hook's arrays. For tools that upload or use host data (the sanitizer, ncu, vendor libraries)."""
    arrays: dict[str, np.ndarray] = {}
    dtypes = {arg.name: arg.dtype or "float32" for arg in spec.args}
    for name, source in case_sources(spec, case, seed, draw, spec_dir).items():
        if isinstance(source, Generated):
            count = int(case.counts.get(name, 0))
            arrays[name] = values_of(source, dtypes[name], count)
        else:
            arrays[name] = source
    return arrays


def default_init(dtype: str) -> InitSpec:
    """Never zeros, which hide unwritten outputs and wrong indexing."""
    return InitSpec("uniform", -1.0, 1.0) if is_float(dtype) else InitSpec("randint", 0, 100)


def int_bounds(init: InitSpec, dtype: str) -> tuple[int, int]:
    """randint's inclusive bounds, clipped to an integer type's range."""
    lo, hi = int(init.a), int(init.b)
    if not is_float(dtype):
        tlo, thi = INT_RANGE[dtype]
        lo, hi = max(lo, tlo), min(hi, thi)
    if hi < lo:
        raise InitError(f"randint({init.a:g}, {init.b:g}) is empty for {dtype}")
    return lo, hi


def describe(init: InitSpec | None, dtype: str, key: int) -> Generated:
    """The description of `init`'s values for one buffer; `InitError` for an impossible one."""
    init = init or default_init(dtype)
    if init.kind not in KIND_CODES:
        raise InitError(f"unknown init {init.kind!r}")
    lo = span = 0
    if init.kind == "randint":
        lo, hi = int_bounds(init, dtype)
        span = (hi - lo + 1) & M64
    return Generated(KIND_CODES[init.kind], float(init.a), float(init.b), lo, span, key)


def counter_values(init: InitSpec | None, dtype: str, count: int, key: int) -> np.ndarray:
    """`count` values of `dtype` (storage dtype) as the worker generates them for `key`."""
    return values_of(describe(init, dtype, key), dtype, count)


def generate(init: InitSpec | None, dtype: str, count: int, rng: np.random.Generator) -> np.ndarray:
    """`count` values of element type `dtype` drawn per `init` (storage dtype)."""
    floating = is_float(dtype)
    init = init or default_init(dtype)
    kind = init.kind
    if kind == "uniform":
        values: np.ndarray = rng.uniform(init.a, init.b, count)
    elif kind == "normal":
        values = rng.normal(init.a, init.b, count)
    elif kind == "randint":
        try:
            lo, hi = int_bounds(init, dtype)
        except InitError as exc:
            raise InputError(str(exc)) from exc
        values = rng.integers(lo, hi, count, endpoint=True, dtype=np.int64)
    elif kind == "arange":
        values = np.arange(count, dtype=np.float64 if floating else np.int64)
    elif kind == "zeros":
        values = np.zeros(count)
    elif kind == "ones":
        values = np.ones(count)
    else:
        raise InputError(f"unknown init {kind!r}")
    return to_storage(values, dtype)


def to_storage(values: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "bfloat16":
        return bf16_from_float(np.asarray(values, dtype=np.float32))
    target = storage_dtype(dtype)
    if target.kind in "iu" and np.asarray(values).dtype.kind == "f":
        values = np.rint(values)
    if target.kind in "iu":
        # wrap like C does (arange over int8 and the like)
        return (
            np.asarray(values).astype(np.int64 if target != np.uint64 else np.uint64).astype(target)
        )
    return np.ascontiguousarray(values, dtype=target)


def _provided(
    spec: TestSpec, case: Case, rng: np.random.Generator, spec_dir: Path | None
) -> dict[str, np.ndarray]:
    """The user's data for `case`: the capture's bytes (its timed case), or the hook's arrays."""
    if is_captured_case(spec, case):
        try:
            return captured_inputs(spec, case, spec_dir)
        except CapturedDataError as exc:
            raise InputError(str(exc)) from exc
    if spec.inputs:
        return _call_hook(spec, case, rng, spec_dir)
    return {}


def _load_hook(spec: TestSpec, spec_dir: Path | None) -> Callable[..., Any]:
    ref = spec.inputs or ""
    file_part, sep, fn_name = ref.rpartition(":")
    if not sep or not file_part or not fn_name:
        raise InputError(f'inputs = "{ref}": expected "path/to/file.py:function"')
    found = resolve_hook(file_part, spec_dir or Path.cwd())  # only inside the file's tree
    if isinstance(found, str):
        raise InputError(f'inputs = "{ref}": the hook file {found}')
    path = found
    module_name = f"_cuda_llm_inputs_{abs(hash(str(path)))}"
    try:
        loader_spec = importlib.util.spec_from_file_location(module_name, path)
        if loader_spec is None or loader_spec.loader is None:
            raise InputError(f'inputs = "{ref}": cannot load {path}')
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[module_name] = module
        loader_spec.loader.exec_module(module)
    except InputError:
        raise
    except Exception as exc:
        raise InputError(
            f'inputs = "{ref}": loading {path.name} failed: {type(exc).__name__}: {exc}'
        ) from exc
    fn = getattr(module, fn_name, None)
    if not callable(fn):
        raise InputError(f'inputs = "{ref}": {path.name} has no function {fn_name!r}')
    return fn


def _call_hook(
    spec: TestSpec, case: Case, rng: np.random.Generator, spec_dir: Path | None
) -> dict[str, np.ndarray]:
    fn = _load_hook(spec, spec_dir)
    ref = spec.inputs
    try:
        result = fn(dict(case.sizes), rng)
    except Exception as exc:
        raise InputError(
            f'inputs = "{ref}" raised {type(exc).__name__}: {exc} '
            f"(case {case.index}: {case.describe()})"
        ) from exc
    if not isinstance(result, dict):
        raise InputError(
            f'inputs = "{ref}" must return a dict of name -> numpy array, '
            f"got {type(result).__name__}"
        )
    pointers = {a.name: a for a in spec.args if a.is_pointer}
    checked: dict[str, np.ndarray] = {}
    for name, value in result.items():
        arg = pointers.get(name)
        if arg is None:
            raise InputError(
                f'inputs = "{ref}" returned {name!r}, which is not a pointer '
                f"argument (pointers: {', '.join(pointers) or 'none'})"
            )
        if arg.role == "out":
            raise InputError(
                f'inputs = "{ref}" returned {name!r}, an out argument '
                "(out buffers are poisoned, not initialised)"
            )
        checked[name] = _validate(ref or "", arg, value, int(case.counts.get(name, 0)), case)
    return checked


def _validate(ref: str, arg: ArgSpec, value: Any, count: int, case: Case) -> np.ndarray:
    dtype = arg.dtype or "float32"
    where = f'inputs = "{ref}", case {case.index} ({case.describe()}): {arg.name}'
    if not isinstance(value, np.ndarray):
        raise InputError(f"{where}: expected a numpy array, got {type(value).__name__}")
    if value.size != count:
        raise InputError(
            f"{where}: expected {count} elements ({dtype}[{arg.count}]), "
            f"got {value.size} (shape {value.shape})"
        )
    got = str(value.dtype)
    if dtype == "bfloat16":
        if got == "bfloat16":  # ml_dtypes
            return np.ascontiguousarray(value).reshape(-1).view(np.uint16).copy()
        if value.dtype.kind == "f":
            return bf16_from_float(value.reshape(-1).astype(np.float32))
        raise InputError(f"{where}: expected bfloat16 (ml_dtypes) or floats, got {got}")
    target = storage_dtype(dtype)
    if value.dtype == target:
        return np.ascontiguousarray(value).reshape(-1).copy()
    compatible = value.dtype.kind == target.kind or (
        target.kind == "f" and value.dtype.kind in "iu"
    )
    if compatible and np.can_cast(value.dtype, target, "same_kind"):
        converted = value.reshape(-1).astype(target)
        if target.kind in "iu" and not np.array_equal(converted, value.reshape(-1)):
            raise InputError(f"{where}: values do not fit {dtype}")
        return converted
    raise InputError(f"{where}: expected {dtype}, got {got}")
