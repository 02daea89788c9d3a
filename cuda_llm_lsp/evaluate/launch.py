"""From a spec's case to the worker's `Launch`: buffers (generated, data or poison), packed
parameters, and the bytes a case moves (the evaluator's bandwidth, the sanitizer's size limit,
the suite's floor), and whether a candidate's own launch can run on the device (`bad_launch`).
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
from cuda_llm_lsp.evaluate.inputs import InputError
from cuda_llm_lsp.evaluate.protocol import (
    Buffer,
    BufferArg,
    BytesArg,
    Launch,
    Param,
    ScalarArg,
)
from cuda_llm_lsp.evaluate.types import DeviceFacts
from cuda_llm_lsp.source.c_types import c_type_dtype
from cuda_llm_lsp.source.spec import ArgSpec, Case, TestSpec
from cuda_llm_lsp.source.spec.cases import evaluate_cases
from cuda_llm_lsp.source.spec.hidden import hidden_cases


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
                buffers.append(
                    Buffer(
                        arg.name, nbytes, dtype, generated=source, is_input=is_input, offset=offset
                    )
                )
            elif source is not None:
                buffers.append(
                    Buffer(
                        arg.name,
                        nbytes,
                        dtype,
                        data=source.tobytes(),
                        is_input=is_input,
                        offset=offset,
                    )
                )
            elif fill and arg.name in fill:
                buffers.append(Buffer(arg.name, nbytes, dtype, fill=fill[arg.name], offset=offset))
            else:
                pattern = poison_pattern(dtype) if poison is None else random_poison(dtype, poison)
                buffers.append(Buffer(arg.name, nbytes, dtype, poison=pattern, offset=offset))
            if arg.within is None:  # else its address is written into a captured struct
                params.append(BufferArg(arg.name))
        elif arg.is_captured:
            params.append(_captured(arg))
        else:
            params.append(_scalar(arg, case))
    return Launch(key, case.grid, case.block, case.smem, tuple(params), tuple(buffers))


def _captured(arg: ArgSpec) -> BytesArg:
    """A `"@captured"` argument's bytes, with the addresses inside them relocated to the
    buffers `evaluate.captured.with_captured_arguments` made for them."""
    if arg.raw is None:
        raise InputError(
            f'args.{arg.name} = "@captured": the capture was not read (this tool does not pass '
            "captured bytes; bench and optimize do)"
        )
    return BytesArg(arg.raw, arg.moves)


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


_BLOCK_DIMS = (1024, 1024, 64)  # CUDA's per-dimension limits (every architecture we build for)
_GRID_DIMS = (2**31 - 1, 65535, 65535)


def bad_launch(
    spec: TestSpec, facts: DeviceFacts, seed: int, *, static_smem: int = 0
) -> str | None:
    """Why a candidate's own launch (`spec`: the original's with its grid/block/smem) cannot run
    on this device, naming the case and the value; None when every case, hidden ones included,
    can. Checked before anything runs (status `bad_launch`, docs/design.md "Candidate launch
    block"): a launch the driver refuses would otherwise be a `launch_error` mid-evaluation."""
    cases, problems = evaluate_cases(spec)
    if problems:
        return problems[0].message  # names the key, the case and the value
    try:
        hidden = [(h.case, h.describe()) for h in hidden_cases(spec, seed)]
    except ValueError as exc:  # a hidden size the launch's expressions cannot take
        return f"the launch cannot be evaluated on a hidden case: {exc}"
    named = [(c, f"case {c.index} ({c.describe()})") for c in cases]
    for case, where in named + hidden:
        problem = _case_problem(case, facts, static_smem)
        if problem:
            return f"{where}: {problem}"
    return None


def _case_problem(case: Case, facts: DeviceFacts, static_smem: int) -> str | None:
    axes = "xyz"
    for axis, value, limit in zip(axes, case.block, _BLOCK_DIMS, strict=True):
        if not 1 <= value <= limit:
            return f"block.{axis} is {value}; CUDA allows 1 to {limit}"
    threads = case.block[0] * case.block[1] * case.block[2]
    if threads > facts.max_threads_per_block:
        return (
            f"block has {threads} threads ({case.block[0]}x{case.block[1]}x{case.block[2]}); "
            f"this GPU allows at most {facts.max_threads_per_block}"
        )
    for axis, value, limit in zip(axes, case.grid, _GRID_DIMS, strict=True):
        if not 1 <= value <= limit:
            return f"grid.{axis} is {value}; it must be 1 to {limit}"
    if case.smem < 0:
        return f"smem is {case.smem} bytes; it must not be negative"
    optin = facts.shared_per_block_optin
    if case.smem + static_smem > optin:
        static = f" + {static_smem} static" if static_smem else ""
        return (
            f"smem is {case.smem} bytes{static}; this GPU allows at most {optin} bytes of "
            "shared memory per block (opt-in maximum)"
        )
    return None
