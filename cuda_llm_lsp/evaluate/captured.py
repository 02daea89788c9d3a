"""The captured launch's bytes as a spec's data (`capture = "DIR"`, docs/design.md "Capture"):
the timed (last) case's inputs are the bytes the program's buffers held before the launch, and
its expected outputs the bytes they held after it (the original must reproduce them first).

The directory is the spec's own (relative to the `.cu` file, inside its tree, as an `inputs`
hook is); each buffer takes the first `count` elements of what was captured from its pointer.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from cuda_llm_lsp.evaluate.compare import storage_dtype
from cuda_llm_lsp.source.capture_manifest import Capture, CaptureError, read_capture
from cuda_llm_lsp.source.spec import Case, TestSpec
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
    pointer = capture.params[arg.index].pointer
    if pointer is None:
        raise CapturedDataError(
            f"{name}: the captured launch passed no device address for it (null or host memory)"
        )
    dtype = storage_dtype(arg.dtype or "float32")
    count = int(case.counts.get(name, 0))
    need = count * dtype.itemsize
    if need > pointer.captured:
        raise CapturedDataError(
            f"{name}: the case needs {count} {arg.dtype} ({need} bytes) but {pointer.captured} "
            f"bytes were captured from its pointer (case {case.index}: {case.describe()})"
        )
    file = path / (pointer.before if which == "before" else pointer.after)
    try:
        raw = np.fromfile(file, dtype=np.uint8, count=need)
    except OSError as exc:
        raise CapturedDataError(f"{name}: {file} cannot be read: {exc}") from exc
    if raw.size != need:
        raise CapturedDataError(f"{name}: {file} holds {raw.size} bytes, {need} needed")
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
