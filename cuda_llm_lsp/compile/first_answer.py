"""The editor's first answer to an edit: NVRTC's front end stopped before the end of the unit.

NVRTC's front end spends most of a clean check after the last line: with the precompiled header
of `<cooperative_groups.h>`, the 718 lines of benchmarks/heavy_headers/train_kernels.cu cost
530 ms clean and 130 ms with one error (the header prefix alone, clean, 500 ms). Any error
skips that end-of-unit work, which is NVVM IR for the kept device code (`--time` files it all
under the front end even with `-fdevice-syntax-only`), not template instantiation.

So the first answer compiles the unit with one more line, a declaration that is always an
error (`STOP`). Every diagnostic of the file's own lines comes before it, and is the full
check's: parse errors, template instantiations, `static_assert`s, warnings. Only what the end of
the unit reports waits for the complete answer (`complete` False), such as "dynamic
initialization is not supported for a __device__ variable"; the server runs it once typing
pauses. A file with an error of its own skips that end in the full check as well, so its first
answer is already complete.

The stop line is trusted only where it stood alone: its one error, on its own line, and
nothing after it. A file that ends inside a comment, a block, an `extern "C" {` or a string
makes the stop part of that construct; then the full unit is compiled instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from cuda_llm_lsp.compile.cache import compile_cached
from cuda_llm_lsp.compile.device_unit import DeviceUnit
from cuda_llm_lsp.compile.isolated import CRASH_CODE, INTERRUPTED_CODE, TIMEOUT_CODE
from cuda_llm_lsp.compile.types import CompileOptions, CompileResult

STOP_NAME = "cuda_llm_first_answer_stop_"
STOP_UNDECLARED = "cuda_llm_first_answer_undeclared_"
STOP = f"__device__ int {STOP_NAME} = {STOP_UNDECLARED};"
_STOPPED = (TIMEOUT_CODE, CRASH_CODE, INTERRUPTED_CODE)  # the compile itself did not finish


@dataclass(frozen=True)
class FirstAnswer:
    result: CompileResult  # the file's own diagnostics (the stop's removed)
    complete: bool  # the full front-end check would say exactly this


def with_stop(unit: DeviceUnit) -> tuple[DeviceUnit, int]:
    """`unit` with `STOP` on a line of its own after the file's last line; that line (1-based)."""
    text = unit.text if unit.text.endswith("\n") else unit.text + "\n"
    stop_line = text.count("\n") + 2  # one empty line between: the file's last line stays its own
    return replace(unit, text=f"{text}\n{STOP}\n"), stop_line


def first_answer(
    unit: DeviceUnit,
    options: CompileOptions,
    name_expressions: Sequence[str],
    *,
    timeout_s: float,
) -> FirstAnswer:
    """The front end's diagnostics of `unit` without its end-of-unit work where the stop line
    stood alone; else the full check (complete)."""
    stopped, stop_line = with_stop(unit)
    result = compile_cached(
        stopped, options, name_expressions, syntax_only=True, timeout_s=timeout_s
    )
    if any(d.code in _STOPPED for d in result.diagnostics):
        return FirstAnswer(result, complete=True)  # the full check would not finish either
    after = [d for d in result.diagnostics if d.line >= stop_line]
    alone = (
        len(after) == 1
        and after[0].line == stop_line
        and after[0].severity == "error"
        and STOP_UNDECLARED in after[0].message
        and not any(STOP_NAME in d.message for d in result.diagnostics if d not in after)
    )
    if not alone:
        full = compile_cached(
            unit, options, name_expressions, syntax_only=True, timeout_s=timeout_s
        )
        return FirstAnswer(full, complete=True)
    own = tuple(d for d in result.diagnostics if d.line < stop_line)
    has_error = any(d.severity == "error" for d in own)
    return FirstAnswer(
        replace(result, ok=not has_error, diagnostics=own, log="", cubin=None),
        complete=has_error,
    )
