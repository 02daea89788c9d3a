"""Kernels whose `__global__` comes from a macro (`#define __kernel extern "C" __global__`:
LAMMPS's lib/gpu, Geryon): found, kept as device code, and given figures in both tiers."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cuda_llm_lsp.compile.analysis import analyze
from cuda_llm_lsp.compile.device_unit import build_device_unit
from cuda_llm_lsp.compile.nvcc import find_nvcc
from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.source.kernels import Kernel, find_kernels, kernel_macros
from tests.support.cli import check_json

BODY = (
    "(float* out, int n) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) out[i] *= 2.0f;\n}\n"
)
PROJECT = {
    "k.h": '#define __kernel extern "C" __global__\n',
    "main.cu": f'#include "k.h"\n\n__kernel void scale{BODY}\n__global__ void plain{BODY}',
}


def found(text: str, definitions: dict[str, str] | None) -> dict[str, Kernel]:
    """The kernels found, by name, with these object-like macro definitions known."""
    macros = None if definitions is None else kernel_macros(definitions)
    return {k.name: k for k in find_kernels(text, macros=macros)}


def names(text: str, definitions: dict[str, str] | None) -> dict[str, bool]:
    """The kernels found, by name, each with its `extern "C"` linkage."""
    return {name: k.is_extern_c for name, k in found(text, definitions).items()}


def test_a_head_naming_a_global_macro_makes_a_kernel_with_its_linkage() -> None:
    text = f"__kernel void scale{BODY}\nKERNEL void local{BODY}\nGLOBAL_FN bare{BODY}"
    macros = {"__kernel": 'extern "C" __global__', "KERNEL": "__global__",
              "GLOBAL_FN": "__global__ void"}  # fmt: skip
    assert names(text, macros) == {"scale": True, "local": False, "bare": False}
    kernels = found(text, macros)
    scale = kernels["scale"]
    assert (scale.name_span.start.line, scale.span.start.column) == (0, 0)
    assert [kernels[n].via_macro for n in ("scale", "local", "bare")] == [
        "__kernel", "KERNEL", "GLOBAL_FN"
    ]  # fmt: skip
    assert found(f"__global__ void plain{BODY}", macros)["plain"].via_macro == ""
    assert [p.name for p in scale.params] == ["out", "n"]


def test_without_macros_every_caller_finds_what_it_found_before() -> None:
    text = f"__kernel void scale{BODY}\n__global__ void plain{BODY}"
    assert names(text, None) == {"plain": False}
    assert names(text, {}) == {"plain": False}


def test_a_chain_of_macros_counts_whichever_is_defined_first() -> None:
    macros = {"A": "B", "B": 'extern "C" __global__', "C": "EXT __global__", "EXT": 'extern "C"'}
    assert kernel_macros(macros) == {"A": True, "B": True, "C": True}
    assert names(f"A void via_alias{BODY}", macros) == {"via_alias": True}


def test_a_macro_whose_expansion_holds_no_global_makes_no_kernel() -> None:
    macros = {"DEV": "__device__", "HOSTFN": "static inline", "SELF": "SELF"}
    text = f"DEV void helper{BODY}\nHOSTFN void host{BODY}\nSELF void loop{BODY}"
    assert kernel_macros(macros) == {}
    assert names(text, macros) == {}


def test_global_in_a_comment_or_string_of_a_macro_or_the_head_does_not_count() -> None:
    macros = {"COMMENTED": "/* __global__ */ inline", "LINE": "inline // __global__",
              "QUOTED": '"__global__"', "KERNEL": "__global__"}  # fmt: skip
    assert kernel_macros(macros) == {"KERNEL": False}
    text = (
        f"COMMENTED void a{BODY}\nLINE void b{BODY}\nQUOTED void c{BODY}\n"
        f"static /* KERNEL */ void d{BODY}"
    )
    assert names(text, macros) == {}


def test_launch_bounds_and_templates_after_a_macro_are_read() -> None:
    text = (
        f"KERNEL void __launch_bounds__(128, 2) bounded{BODY}\n"
        "template <typename T> KERNEL void typed(T* out) { out[0] = T(); }\n"
        f'extern "C" {{\nKERNEL void in_block{BODY}}}\nnamespace ns {{ KERNEL void inner{BODY}}}\n'
    )
    kernels = found(text, {"KERNEL": "__global__"})
    assert kernels["bounded"].launch_bounds == "128, 2"
    assert kernels["typed"].template_params == ("T",)
    assert kernels["in_block"].is_extern_c
    assert kernels["inner"].qualified_name == "ns::inner"


def test_the_device_unit_collects_the_macros_of_the_file_and_its_headers(tmp_path: Path) -> None:
    for name, text in PROJECT.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "more.cu").write_text(
        '#include "k.h"\n#define LOCAL __global__\n#define NOT_ONE __device__\n', encoding="utf-8"
    )
    unit = build_device_unit((tmp_path / "more.cu").read_text(), tmp_path / "more.cu")
    assert unit.kernel_macros == {"__kernel": True, "LOCAL": False}


def test_an_alias_defined_before_its_global_macro_keeps_the_kernel_device_code() -> None:
    """`GLOBAL_FN k(...)` reads as a function returning a type `GLOBAL_FN`: the walker blanked it
    as host code when `GLOBAL_FN` named a device macro defined after it."""
    text = f"#define GLOBAL_FN KGLOBAL\n#define KGLOBAL __global__ void\nGLOBAL_FN scale{BODY}"
    unit = build_device_unit(text)
    assert unit.text.split("\n")[2] == "GLOBAL_FN scale(float* out, int n) {"
    assert unit.kernel_macros == {"GLOBAL_FN": False, "KGLOBAL": False}


def test_the_fast_tier_gives_a_macro_kernel_its_figures_at_its_line(tmp_path: Path) -> None:
    for name, text in PROJECT.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    main = tmp_path / "main.cu"
    analysis = analyze(main.read_text(), main, Settings())
    assert not analysis.errors, analysis.diagnostics
    found = {i.kernel.name: i for i in analysis.kernels}
    assert list(found) == ["scale", "plain"]
    assert found["scale"].kernel.name_span.start.line == 2
    assert found["scale"].kernel.is_extern_c
    assert found["scale"].resources is not None and found["scale"].resources.registers > 0


def check(tmp_path: Path, *flags: str) -> dict:
    status, report = check_json(tmp_path, PROJECT, *flags)
    assert status == 0, report
    return report


def kernel_lines(report: dict) -> dict[str, tuple[int | None, bool]]:
    """Each kernel of the report: its line (None for a library's) and whether it has figures."""
    return {
        k["name"]: (None if k.get("library") else k["line"], k["registers"] is not None)
        for k in report["kernels"]
    }


def test_check_without_nvcc_lists_the_macro_kernel_at_its_line(tmp_path: Path) -> None:
    assert kernel_lines(check(tmp_path, "--no-nvcc")) == {"scale": (3, True), "plain": (8, True)}


@pytest.mark.skipif(find_nvcc() is None or shutil.which("g++") is None, reason="needs nvcc and g++")
def test_check_with_nvcc_lists_the_macro_kernel_at_its_line_not_as_a_librarys(
    tmp_path: Path,
) -> None:
    report = check(tmp_path, "--nvcc")
    assert kernel_lines(report) == {"scale": (3, True), "plain": (8, True)}
