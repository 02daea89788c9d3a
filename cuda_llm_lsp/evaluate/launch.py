"""From a spec's case to the worker's `Launch`: buffers (generated, data or poison), packed
parameters, and the bytes a case moves (the evaluator's bandwidth, the sanitizer's size limit,
the suite's floor).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from cuda_llm_lsp.evaluate.compare import (
    bf16_from_float,
    poison_pattern,
    random_poison,
    storage_dtype,
)
from cuda_llm_lsp.evaluate.counter import Generated
from cuda_llm_lsp.evaluate.protocol import Buffer, BufferArg, Launch, Param, ScalarArg
from cuda_llm_lsp.source.c_types import c_type_dtype
from cuda_llm_lsp.source.spec import ArgSpec, Case, TestSpec


def case_launch(
    spec: TestSpec,
    case: Case,
    inputs: Mapping[str, np.ndarray | Generated],
    key: str | None,
    *,
    poison: int | None = None,
    fill: Mapping[str, Generated] | None = None,
    offsets: Mapping[str, int] | None = None,
) -> Launch:
    """The launch of kernel `key` on `case`: `inputs` uploaded (host arrays) or generated on
    the device (`Generated`), every other buffer poisoned (with a poison drawn from the 64
    random bits `poison`, else the fixed one) or pre-filled with `fill`'s values; `offsets`:
    bytes past an aligned base per buffer (hidden offset cases)."""
    buffers: list[Buffer] = []
    params: list[Param] = []
    for arg in spec.args:
        if arg.is_pointer:
            dtype = arg.dtype or "float32"
            nbytes = int(case.counts.get(arg.name, 0)) * storage_dtype(dtype).itemsize
            is_input = arg.role == "in"
            source = inputs.get(arg.name)
            offset = int((offsets or {}).get(arg.name, 0))
            if isinstance(source, Generated):
                buffers.append(Buffer(arg.name, nbytes, dtype, generated=source,
                                      is_input=is_input, offset=offset))  # fmt: skip
            elif source is not None:
                buffers.append(Buffer(arg.name, nbytes, dtype, data=source.tobytes(),
                                      is_input=is_input, offset=offset))  # fmt: skip
            elif fill and arg.name in fill:
                buffers.append(Buffer(arg.name, nbytes, dtype, fill=fill[arg.name],
                                      offset=offset))  # fmt: skip
            else:
                pattern = poison_pattern(dtype) if poison is None else random_poison(dtype, poison)
                buffers.append(Buffer(arg.name, nbytes, dtype, poison=pattern, offset=offset))
            params.append(BufferArg(arg.name))
        else:
            params.append(_scalar(arg, case))
    return Launch(key, case.grid, case.block, case.smem, tuple(params), tuple(buffers))


def _scalar(arg: ArgSpec, case: Case) -> ScalarArg:
    """The value as the worker packs it into kernelParams (bfloat16 as its bits)."""
    value = case.scalars.get(arg.name, 0)
    if arg.dtype == "bfloat16":
        return ScalarArg("uint16", int(bf16_from_float(np.array([value], np.float32))[0]))
    return ScalarArg(str(np.dtype(arg.dtype or c_type_dtype(arg.c_type) or "int32")), value)


def _buffer_bytes(arg: ArgSpec, case: Case) -> int:
    return int(case.counts.get(arg.name, 0)) * storage_dtype(arg.dtype or "float32").itemsize


def case_bytes(spec: TestSpec, case: Case) -> int:
    """Bytes of the spec's buffers in `case` (each counted once)."""
    return sum(_buffer_bytes(a, case) for a in spec.args if a.is_pointer)


def bytes_moved(spec: TestSpec, case: Case) -> int:
    """Bytes of the spec's buffers: `in` read, `out` written, `inout` read and written."""
    total = 0
    for arg in spec.args:
        if arg.is_pointer:
            n = _buffer_bytes(arg, case)
            total += 2 * n if arg.role == "inout" else n
    return total
