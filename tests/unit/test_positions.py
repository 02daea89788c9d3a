"""Positions follow LSP's line breaks (`\\n`, `\\r\\n`, lone `\\r`) and survive a BOM and `#line`.

Issue 20 item 7: a CR-only file got ranges past the ends of lines and, compiled as one long
comment, no diagnostic at all; a BOM was "unrecognized token" at 1:1; `#line 1000` moved an
error past the end of the file.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

from cuda_llm_lsp.compile.device_unit import build_device_unit
from cuda_llm_lsp.lsp.positions import split_lines, to_point, to_range
from cuda_llm_lsp.source.kernels import find_kernels
from cuda_llm_lsp.source.spec import parse_spec
from cuda_llm_lsp.source.text import Point, Span, normalized, offset_of

ROOT = Path(__file__).resolve().parents[2]
BROKEN = (ROOT / "examples" / "errors" / "broken.cu").read_text()
UTF16 = PositionCodec(types.PositionEncodingKind.Utf16)


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_lines_split_at_every_lsp_line_break(newline: str) -> None:
    text = newline.join(["a", "bc", "", "d"])
    assert split_lines(text) == ["a", "bc", "", "d"]
    assert offset_of(text, Point(1, 1)) == text.index("c")
    assert offset_of(text, Point(1, 99)) == text.index("c") + 1  # clamped before the break
    assert Span.of(3, 0, 3, 1).slice(text) == "d"


def test_mixed_breaks_and_characters_that_are_not_line_breaks() -> None:
    text = "a\rb\r\nc\nd\x0ce\u2028f\n\rg"
    assert split_lines(text) == ["a", "b", "c", "d\x0ce\u2028f", "", "g"]
    assert offset_of(text, Point(5, 0)) == text.index("g")


def test_normalized_keeps_every_offset() -> None:
    text = "\ufeffa\rb\r\nc\r"
    assert normalized(text) == " a\nb\r\nc\n"
    assert len(normalized(text)) == len(text)
    assert normalized("plain\n") == "plain\n"


def test_ranges_and_points_on_a_cr_only_document() -> None:
    text = "x\rhello world\rz"
    lines = split_lines(text)
    assert to_range(lines, Span.of(1, 6, 1, 11), UTF16) == types.Range(
        start=types.Position(line=1, character=6), end=types.Position(line=1, character=11)
    )
    assert to_point(lines, types.Position(line=1, character=99), UTF16) == Point(1, 11)


@pytest.mark.parametrize("newline", ["\r", "\r\n"])
def test_kernels_and_specs_of_cr_files_are_on_the_right_lines(newline: str) -> None:
    source = (
        "// a kernel\n/* @cuda-llm\nsizes.n = [1, 4]\ngrid = 1\nblock = 1\n"
        'args.x = "float32[n]"\nargs.n = "n"\n*/\n'
        "__global__ void k(float* x, int n) { x[0] = n; }\n"
    ).replace("\n", newline)
    (kernel,) = find_kernels(source)
    assert kernel.name_span.start == Point(8, 16)
    assert kernel.span.slice(source).startswith("__global__ void k")
    spec, problems = parse_spec(kernel, source)
    assert problems == [] and spec is not None and spec.sizes == {"n": [1, 4]}


def test_the_device_unit_of_a_cr_only_file_has_its_lines() -> None:
    unit = build_device_unit(BROKEN.replace("\n", "\r"))
    assert "\r" not in unit.text
    assert unit.text.split("\n")[8].strip() == "data[i] = data[i] * facter;"


def test_a_bom_is_not_given_to_nvrtc() -> None:
    unit = build_device_unit("\ufeff" + BROKEN)
    assert "\ufeff" not in unit.text
    assert len(unit.text) == len(BROKEN) + 1


def test_line_directives_are_blanked_so_errors_stay_on_the_real_line() -> None:
    source = BROKEN.replace("#include <cuda_runtime.h>", '#line 1000 "elsewhere.cu"')
    source = source.replace("int i =", '# 77 "x.cu"\n  int i =')
    unit = build_device_unit(source)
    lines = unit.text.split("\n")
    assert len(lines) == len(source.split("\n"))
    assert "#line" not in unit.text and "# 77" not in unit.text
    assert lines[3].strip() == "" and lines[6].strip() == ""


def test_ten_thousand_nested_ifs_are_walked_without_recursion() -> None:
    depth = 10_000
    source = (
        "#if 1\n" * depth + "__global__ void k(float* x) { x[0] = 1; }\nint host() { return 0; }\n"
    )
    source += "#endif\n" * depth
    unit = build_device_unit(source)
    lines = unit.text.split("\n")
    assert lines[depth].startswith("__global__ void k")
    assert lines[depth + 1].strip() == ""  # the host function is still blanked
