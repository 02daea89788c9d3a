"""`cuda-llm profile` on the GPU (issue [profile], H100 acceptance): the planted kernels of
tests/data/ncu/planted.cu profiled live under ncu flag exactly their `// PLANT kind` lines
(including a store in an included header and a load in a template instance) and never their
`// CLEAN kind` lines or the fixed twins; every kernel of the suite profiles within 60 s.

Skipped without a GPU; without ncu or counter permission the profile raises ProfileUnavailable,
which fails these tests (the acceptance machine has both). With CUDA_LLM_TEST_LOG_DIR set, the
captured ncu pages are kept there (they refresh tests/data/ncu).
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.evaluate.candidate import find_kernel
from cuda_llm_lsp.evaluate.line_profile import LineProfile, NcuCapture, NcuProfiler, profile_lines
from cuda_llm_lsp.evaluate.types import KernelBinary
from cuda_llm_lsp.source.kernels import find_kernels
from cuda_llm_lsp.source.spec import TestSpec, parse_spec

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
PLANTED = ROOT / "tests" / "data" / "ncu" / "planted.cu"


def profile_named(text: str, path: Path, name: str, profiler: NcuProfiler) -> LineProfile:
    """`profile_lines` on the kernel named `name` and its spec (the engine's gate finds them)."""
    kernel = find_kernel(text, name)
    assert kernel is not None
    spec, problems = parse_spec(kernel, text)
    assert spec is not None, problems
    return profile_lines(text, path, kernel, spec, Settings(), profiler)


HEADER = PLANTED.with_name("planted_helpers.cuh")
SUITE = ROOT / "benchmarks" / "suite"
LIMIT_S = 60.0
KERNELS = [
    "transpose_naive", "transpose_header", "transpose_unpadded", "transpose_padded",
    "pick_local", "pick_fixed", "lane_branch", "warp_branch", "strided_gather",
]  # fmt: skip
FIXED = {"transpose_padded": "bank_conflict", "pick_fixed": "local_memory",
         "warp_branch": "divergent_branch"}  # fmt: skip


class KeepingProfiler(NcuProfiler):
    """The real profiler, keeping each capture's pages where CUDA_LLM_TEST_LOG_DIR says."""

    def capture(self, binary: KernelBinary, spec: TestSpec, spec_dir: Path | None) -> NcuCapture:
        captured = super().capture(binary, spec, spec_dir)
        where = os.environ.get("CUDA_LLM_TEST_LOG_DIR")
        if where:
            out = Path(where) / "ncu"
            out.mkdir(parents=True, exist_ok=True)
            (out / f"{binary.source_name}.source.csv").write_text(captured.source_page)
            (out / f"{binary.source_name}.raw.csv").write_text(captured.raw_page)
        return captured


def markers(path: Path, first: int, last: int) -> dict[int, tuple[str, str]]:
    found = {}
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        match = re.search(r"// (PLANT|CLEAN) (\w+)", line)
        if match and first <= number <= last:
            found[number] = (match.group(1), match.group(2))
    return found


@pytest.mark.parametrize("name", KERNELS)
def test_planted_kernel_flags_exactly_its_lines(name: str) -> None:
    text = PLANTED.read_text()
    started = time.monotonic()
    result = profile_named(text, PLANTED, name, KeepingProfiler())
    took = time.monotonic() - started
    print(
        json.dumps(
            {
                "kernel": name,
                "seconds": round(took, 1),
                "lines": [[f.line, f.kinds] for f in result.lines],
            }
        )
    )
    assert took < LIMIT_S
    kernel = find_kernel(text, name)
    assert kernel is not None
    first, last = kernel.span.start.line + 1, kernel.span.end.line + 1
    if name == "strided_gather":  # the template's device function sits above the kernel
        first = next(i for i, line in enumerate(text.splitlines(), 1) if "gather_at(" in line)
    expected = markers(PLANTED, first, last)
    in_file = {f.line: f.kinds for f in result.lines if f.file == str(PLANTED)}
    for line, (mark, kind) in expected.items():
        if mark == "PLANT":
            assert kind in in_file.get(line, ()), (name, line, in_file)
        else:
            assert kind not in in_file.get(line, ()), (name, line, in_file)
    planted = {kind for mark, kind in expected.values() if mark == "PLANT"}
    for line, kinds in in_file.items():
        if planted & set(kinds):
            assert expected.get(line, ("", ""))[0] == "PLANT", (name, line, kinds)
    if name == "transpose_header":
        in_header = [f for f in result.lines if f.file == str(HEADER)]
        assert [f.line for f in in_header if "uncoalesced" in f.kinds] == [6]
        assert in_header[0].anchor == 3
    if name in FIXED:
        assert FIXED[name] not in {k for f in result.lines for k in f.kinds}


SUITE_KERNELS = [
    (path.name, kernel.name)
    for path in sorted(SUITE.glob("*.cu"))
    for kernel in find_kernels(path.read_text())
    if kernel.spec is not None
]


@pytest.mark.parametrize(("file", "kernel"), SUITE_KERNELS)
def test_suite_kernel_profiles_within_a_minute(file: str, kernel: str) -> None:
    path = SUITE / file
    started = time.monotonic()
    result = profile_named(path.read_text(), path, kernel, KeepingProfiler())
    took = time.monotonic() - started
    lines = [[f.line, f.kinds, f.stall_share] for f in result.lines]
    print(
        json.dumps(
            {
                "file": file,
                "kernel": kernel,
                "seconds": round(took, 1),
                "summary": result.summary.line(),
                "lines": lines,
            }
        )
    )
    assert took < LIMIT_S
    assert result.device.startswith("NVIDIA")
    assert all(f.file == str(path) or f.anchor is not None for f in result.lines)


def test_the_loops_profile_names_the_planted_line_with_its_text() -> None:
    """What round 1's prompt gets from the real toolchain on the GPU: the summary and the top
    lines, the planted store first with its kernel-relative line and text."""
    import dataclasses

    from cuda_llm_lsp.cancel import CancelToken
    from cuda_llm_lsp.evaluate.candidate import build_binary
    from cuda_llm_lsp.fsr.profile import ProfileText
    from cuda_llm_lsp.fsr.toolchain import DefaultToolchain
    from cuda_llm_lsp.source.spec import parse_spec

    text = PLANTED.read_text()
    kernel = find_kernel(text, "transpose_naive")
    assert kernel is not None
    spec, _ = parse_spec(kernel, text)
    assert spec is not None
    binary = build_binary(text, PLANTED, "transpose_naive", Settings())
    assert isinstance(binary, KernelBinary)
    binary = dataclasses.replace(
        binary, kernel_source=kernel.span.slice(text), kernel_line=kernel.span.start.line
    )
    note = DefaultToolchain().profile(binary, spec, PLANTED.parent, CancelToken())
    print(note)
    assert isinstance(note, ProfileText)
    assert note.lines[0]["kernel_line"] == 6 and "uncoalesced" in note.lines[0]["kinds"]
    assert "kernel line 6 `out[(size_t)x * rows + y] = v;" in note
