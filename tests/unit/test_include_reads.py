"""What an #include may read: regular files outside /proc, /sys, /dev, of bounded size
(issue 25, findings 2 and 3)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from cuda_llm_lsp.compile import include_reads
from cuda_llm_lsp.compile.device_unit import build_device_unit
from cuda_llm_lsp.compile.include_reads import IncludeBudget, IncludeRefused, read_header

KERNEL = "__global__ void k(float* x) { x[0] = 1; }\n"


def _problems(text: str, path: Path) -> dict[int, str]:
    unit = build_device_unit(text, path)
    return {p.span.start.line: p.message for p in unit.problems}


def test_special_files_are_never_read_and_their_lines_left_out(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.h")
    (tmp_path / "env.h").symlink_to("/proc/self/environ")
    text = (
        '#include "/proc/self/environ"\n#include "pipe.h"\n#include </proc/self/status>\n'
        '#include "/dev/zero"\n#include "env.h"\n#include "/sys/kernel/mm/transparent_hugepage'
        '/enabled"\n' + KERNEL
    )
    started = time.monotonic()
    unit = build_device_unit(text, tmp_path / "a.cu")
    assert time.monotonic() - started < 5  # a FIFO never blocks
    messages = {p.span.start.line: p.message for p in unit.problems}
    assert set(messages) == {0, 1, 2, 3, 4, 5}, messages
    assert "/proc is never read" in messages[0] and "/proc is never read" in messages[4]
    assert "not a regular file" in messages[1]
    assert "/dev is never read" in messages[3]
    lines = unit.text.split("\n")
    assert all(not lines[i].strip() for i in range(6)), "NVRTC must not read them either"
    assert not unit.headers


def test_a_header_over_the_cap_is_refused_without_reading_it(tmp_path: Path) -> None:
    blob = tmp_path / "blob.h"
    with blob.open("wb") as handle:  # sparse: 48 MB that costs nothing to make
        handle.truncate(48 * 1024 * 1024)
    messages = _problems('#include "blob.h"\n' + KERNEL, tmp_path / "a.cu")
    assert "over the 4.0 MiB limit for one header" in messages[0]
    assert "CUDA_LLM_MAX_HEADER_BYTES" in messages[0]


def test_the_total_of_included_text_is_capped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_LLM_MAX_INCLUDE_BYTES", str(250_000))
    for i in range(3):
        (tmp_path / f"h{i}.h").write_text("// filler\n" * 10_000)  # 110 kB each
    text = '#include "h0.h"\n#include "h1.h"\n#include "h2.h"\n' + KERNEL
    messages = _problems(text, tmp_path / "a.cu")
    assert list(messages) == [2], messages
    assert "limit for all included text" in messages[2]


def test_a_header_found_for_nvrtc_on_an_include_path_is_checked_too(tmp_path: Path) -> None:
    include = tmp_path / "include"
    include.mkdir()
    os.mkfifo(include / "fifo.h")
    with (include / "huge.h").open("wb") as handle:
        handle.truncate(5 * 1024 * 1024)
    text = "#include <fifo.h>\n#include <huge.h>\n#include </proc/self/environ>\n" + KERNEL
    unit = build_device_unit(text, tmp_path / "a.cu", (str(include),))
    messages = {p.span.start.line: p.message for p in unit.problems}
    assert set(messages) == {0, 1, 2}, messages
    assert all("not read" in m for m in messages.values())
    assert all(not line.strip() for line in unit.text.split("\n")[:3])


def test_real_headers_still_load(tmp_path: Path) -> None:
    (tmp_path / "util.cuh").write_text("__device__ float twice(float v) { return 2 * v; }\n")
    unit = build_device_unit('#include "util.cuh"\n' + KERNEL, tmp_path / "a.cu")
    assert not unit.problems and "util.cuh" in unit.headers


def test_read_header_never_blocks_on_a_fifo_even_with_a_writer_gone(tmp_path: Path) -> None:
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    done = threading.Event()

    def read() -> None:
        with pytest.raises(IncludeRefused):
            read_header(fifo)
        done.set()

    threading.Thread(target=read, daemon=True).start()
    assert done.wait(5)


def test_budget_is_taken_from(tmp_path: Path) -> None:
    header = tmp_path / "h.h"
    header.write_bytes(b"x" * 1000)
    budget = IncludeBudget(1500, 1500)
    assert read_header(header, budget) == b"x" * 1000
    assert budget.left == 500
    with pytest.raises(IncludeRefused, match="all included text"):
        read_header(header, budget)


def test_limits_are_generous_but_bounded() -> None:
    assert include_reads.max_header_bytes() == 4 * 1024 * 1024
    assert include_reads.max_include_bytes() == 64 * 1024 * 1024  # CUTLASS Hopper: ~22 MB


def test_a_computed_include_is_left_out_with_a_warning(tmp_path: Path) -> None:
    """`#include MACRO` names its file only after expansion: NVRTC would open it unchecked."""
    (tmp_path / "h.cuh").write_text("#include OTHER\n__device__ int y;\n")
    text = '#define F "/proc/self/environ"\n#include F\n#include "h.cuh"\n' + KERNEL
    unit = build_device_unit(text, tmp_path / "a.cu")
    found = {p.span.start.line: (p.severity, p.message) for p in unit.problems}
    assert found[1][0] == "warning" and "#include of a macro is not followed" in found[1][1]
    assert 'included from "h.cuh" line 1' in found[2][1]
    assert not unit.text.split("\n")[1].strip()
    assert "OTHER" not in unit.headers["h.cuh"]
