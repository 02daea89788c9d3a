"""The captured launch's bytes as a spec's data (`capture = "DIR"`, docs/design.md "Capture"):
the timed (last) case's inputs are the bytes the program's buffers held before the launch, and
its expected outputs the bytes they held after it (the original must reproduce them first).

The directory is the spec's own (relative to the `.cu` file, inside its tree, as an `inputs`
hook is); each buffer takes the first `count` elements of what was captured from its pointer.

A `"@captured"` argument (a struct, an enum, a `cutlass::half_t` passed by value) is passed as the
bytes the program passed; every device address the capture found inside them becomes a buffer of
its own (`with_captured_arguments`: named `ARG@BYTE`, its captured bytes as data, `inout` when the
launch changed them, else `in`), whose address the worker writes into those bytes at BYTE.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path

import numpy as np

from cuda_llm_lsp.evaluate.compare import storage_dtype
from cuda_llm_lsp.source.capture_manifest import (
    Capture,
    CapturedPointer,
    CaptureError,
    EmbeddedPointer,
    read_capture,
)
from cuda_llm_lsp.source.spec import ArgSpec, Case, InitSpec, TestSpec
from cuda_llm_lsp.source.spec.hook import hook_path_problem


class CapturedDataError(ValueError):
    """The capture cannot give the case's data: a message for the user."""


def is_captured_case(spec: TestSpec, case: Case) -> bool:
    """The spec's timed case of a spec with `capture` (hidden cases have later indexes)."""
    return spec.capture is not None and case.index == spec.case_count - 1


def capture_dir(spec: TestSpec, spec_dir: Path | None) -> Path:
    """The spec's capture directory, resolved, inside the `.cu` file's tree."""
    ref = spec.capture or ""
    problem = hook_path_problem(ref)
    if problem:
        raise CapturedDataError(f'capture = "{ref}": the directory {problem}')
    root = (spec_dir or Path.cwd()).resolve()
    path = (root / ref).resolve()
    if not path.is_relative_to(root):
        raise CapturedDataError(f'capture = "{ref}" resolves outside {root}')
    if not path.is_dir():
        raise CapturedDataError(f'capture = "{ref}": {path} is not a directory')
    return path


@functools.lru_cache(maxsize=4)
def _manifest(path: str, _mtime: int) -> Capture:
    return read_capture(Path(path))


def load_capture(spec: TestSpec, spec_dir: Path | None) -> tuple[Path, Capture]:
    path = capture_dir(spec, spec_dir)
    try:
        mtime = (path / "manifest.json").stat().st_mtime_ns
        return path, _manifest(str(path), mtime)
    except (OSError, CaptureError) as exc:
        raise CapturedDataError(f'capture = "{spec.capture}": {exc}') from exc


def _buffer(spec: TestSpec, case: Case, spec_dir: Path | None, name: str, which: str) -> np.ndarray:
    path, capture = load_capture(spec, spec_dir)
    return read_buffer(path, capture, spec, case, name, which)


def read_buffer(
    path: Path, capture: Capture, spec: TestSpec, case: Case, name: str, which: str
) -> np.ndarray:
    """Buffer `name`'s first `count` elements of the case, before or after the captured launch
    (`which`), from the capture in `path`, in its storage dtype."""
    arg = spec.arg(name)
    assert arg is not None and arg.is_pointer
    if arg.index >= len(capture.params):
        raise CapturedDataError(f"the capture has no parameter {arg.index} ({name})")
    pointer = _region(capture, arg)
    if pointer is None:
        raise CapturedDataError(
            f"{name}: the captured launch passed no device address for it (null or host memory)"
        )
    # a buffer over adjacent allocations: each one's bytes in address order
    parts = [pointer]
    for index, at in arg.joined:
        more = _region(capture, replace(arg, index=index, within=at))
        if more is None:
            raise CapturedDataError(f"{name}: the capture has no address at byte {at} of {index}")
        parts.append(more)
    captured = sum(part.captured for part in parts)
    dtype = storage_dtype(arg.dtype or "float32")
    count = int(case.counts.get(name, 0))
    need = count * dtype.itemsize
    if need > captured:
        raise CapturedDataError(
            f"{name}: the case needs {count} {arg.dtype} ({need} bytes) but {captured} "
            f"bytes were captured from its pointer (case {case.index}: {case.describe()})"
        )
    chunks: list[np.ndarray] = []
    left = need
    for part in parts:
        file = path / (part.before if which == "before" else part.after)
        take = min(left, part.captured)
        try:
            raw = np.fromfile(file, dtype=np.uint8, count=take)
        except OSError as exc:
            raise CapturedDataError(f"{name}: {file} cannot be read: {exc}") from exc
        if raw.size != take:
            raise CapturedDataError(f"{name}: {file} holds {raw.size} bytes, {take} needed")
        chunks.append(raw)
        left -= take
    raw = np.concatenate(chunks) if len(chunks) > 1 else chunks[0]
    return raw.view(dtype).copy()


def captured_inputs(spec: TestSpec, case: Case, spec_dir: Path | None) -> dict[str, np.ndarray]:
    """Every `in` / `inout` buffer's bytes before the launch, in storage dtypes."""
    return {
        a.name: _buffer(spec, case, spec_dir, a.name, "before")
        for a in spec.args
        if a.is_pointer and a.role != "out"
    }


def captured_outputs(
    spec: TestSpec, case: Case, spec_dir: Path | None, names: tuple[str, ...]
) -> dict[str, np.ndarray]:
    """The bytes `names` held after the captured launch (raw uint8, as the worker keeps runs)."""
    return {n: _buffer(spec, case, spec_dir, n, "after").view(np.uint8) for n in names}


def _region(capture: Capture, arg: ArgSpec) -> CapturedPointer | None:
    """The captured allocation behind pointer `arg`: the parameter itself, or the address at
    byte `arg.within` of a by-value parameter."""
    param = capture.params[arg.index]
    if arg.within is None:
        return param.pointer
    return next((r.pointer for r in param.regions if r.at == arg.within), None)


def with_captured_arguments(
    spec: TestSpec, spec_dir: Path | None, *, outputs_needed: bool = True
) -> TestSpec:
    """`spec` with each `"@captured"` argument's bytes and a pointer argument for every device
    allocation addressed inside them (compared as the `"@captured DTYPE"` element type, else
    byte for byte). Addresses into one allocation share one buffer, from the lowest of them,
    so a struct's two views of one array (`lo`, `hi = lo + n/2`) still alias as they did.
    The same spec when it has none, or has them already. A launch that changed nothing (a
    kernel that only prints) can be measured (`outputs_needed=False`: `bench`), never judged
    against a candidate: every candidate would pass."""
    wanted = [a for a in spec.args if a.is_captured and a.raw is None]
    if not wanted:
        return spec
    _, capture = load_capture(spec, spec_dir)
    for arg in wanted:
        if arg.index >= len(capture.params):
            raise CapturedDataError(
                f"args.{arg.name}: the captured launch passed {len(capture.params)} parameters"
            )
    # every address inside the captured arguments, grouped by the allocation it points into
    groups: dict[int, list[tuple[ArgSpec, EmbeddedPointer]]] = {}
    for arg in wanted:
        for region in capture.params[arg.index].regions:
            groups.setdefault(region.pointer.base, []).append((arg, region))
    buffers: list[ArgSpec] = []
    moves: dict[str, list[tuple[int, str, int]]] = {a.name: [] for a in wanted}
    for chain in _adjacent(groups):
        owner, first = min(chain[0], key=lambda m: m[1].pointer.offset)
        start = first.pointer.base + first.pointer.offset
        members = [m for group in chain for m in group]
        heads = [min(group, key=lambda m: m[1].pointer.offset) for group in chain[1:]]
        dtypes = {a.captured_dtype for a, _ in members}
        dtype = dtypes.pop() if len(dtypes) == 1 else None
        dtype = dtype or "uint8"
        itemsize = storage_dtype(dtype).itemsize
        total = first.pointer.captured + sum(r.pointer.captured for _, r in heads)
        if total % itemsize:
            dtype, itemsize = "uint8", 1
        name = f"{owner.name}@{first.at}"
        changed = any(r.pointer.changed for _, r in members)
        buffers.append(
            ArgSpec(
                name,
                owner.index,
                "",
                True,
                role="inout" if changed else "in",
                dtype=dtype,
                count=str(total // itemsize),
                init=InitSpec("zeros"),
                within=first.at,
                joined=tuple((a.index, r.at) for a, r in heads),
            )
        )
        for arg, region in members:
            address = region.pointer.base + region.pointer.offset
            moves[arg.name].append((region.at, name, address - start))
    args = [
        replace(a, raw=capture.params[a.index].raw, moves=tuple(sorted(moves[a.name])))
        if a.is_captured and a.raw is None
        else a
        for a in spec.args
    ]
    written = tuple(b.name for b in buffers if b.role == "inout")
    outputs = (*spec.outputs, *written) if spec.outputs else ()  # () compares by role
    expanded = replace(spec, args=(*args, *buffers), outputs=outputs)
    changed = any(a.is_pointer and a.role in ("out", "inout") for a in expanded.args)
    if outputs_needed and not changed:
        raise CapturedDataError(
            "nothing to compare: the captured launch changed no buffer its arguments point to"
        )
    expanded.cases()  # the literal counts evaluate (a ValueError names a bad one)
    return expanded


Member = tuple[ArgSpec, EmbeddedPointer]


def _adjacent(groups: dict[int, list[Member]]) -> list[list[list[Member]]]:
    """The allocations in address order, those that touch (one's end the next one's start, as
    a caching allocator or back-to-back `cudaMalloc`s place them) chained into one buffer: an
    `end()` iterator of the first is then the second's start, as in the program. A chain breaks
    where the next allocation's bytes were not captured from its start."""
    chains: list[list[list[Member]]] = []
    end = -1
    for base in sorted(groups):
        group = groups[base]
        lowest = min(r.pointer.offset for _, r in group)
        if chains and base == end and lowest == 0:
            chains[-1].append(group)
        else:
            chains.append([group])
        end = base + group[0][1].pointer.size
    return chains
