"""Turn a `.cu` file into the translation unit NVRTC compiles: device code only.

Host-only code (functions that are not `__global__`/`__device__`, `main`, `<<<...>>>` launch
sites, host-only headers) is blanked out with spaces so every line keeps its number and
diagnostics map 1:1 onto the user's file. Standard headers NVRTC lacks are replaced by small
device-side stand-ins (see `compile/stub_headers/`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cuda_llm_lsp.source.text import Span


@dataclass(frozen=True)
class IncludeProblem:
    """An `#include "..."` that could not be resolved: reported on its line."""

    span: Span
    message: str


@dataclass(frozen=True)
class DeviceUnit:
    text: str  # same line count as the source; host-only code replaced by spaces
    name: str  # file name given to NVRTC (appears in its log)
    include_dirs: tuple[str, ...]  # -I directories: the file's own directory, configured paths
    headers: dict[str, str] = field(default_factory=dict)  # in-memory headers given to NVRTC
    include_lines: dict[str, int] = field(default_factory=dict)  # header name -> 0-based line
    problems: tuple[IncludeProblem, ...] = ()


def build_device_unit(
    text: str, path: Path | None = None, include_paths: Sequence[str] = ()
) -> DeviceUnit:
    """The device-only unit for `text` (the contents of `path`, which may not exist on disk)."""
    raise NotImplementedError
