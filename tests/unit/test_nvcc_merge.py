"""`nvcc_tier.merge_nvcc`: nvcc's verdict merged over the fast tier's analysis of the same text,
with a recorded nvcc result (no nvcc needed): what wins, what stays."""

from __future__ import annotations

from pathlib import Path

from cuda_llm_lsp.compile.analysis import analyze
from cuda_llm_lsp.compile.nvcc import NvccResult
from cuda_llm_lsp.compile.nvcc_tier import carry_nvcc, line_map, merge_nvcc
from cuda_llm_lsp.compile.types import Diagnostic, Resources
from cuda_llm_lsp.config import Settings

TEXT = (
    "__global__ void plain(float* o) { o[threadIdx.x] = 1.0f; }\n"
    "template <int B> __global__ void tiled(float* o) { o[threadIdx.x % B] = 2.0f; }\n"
    "void run(float* p) { plain<<<1, 1>>>(p); tiled<64><<<1, 64>>>(p); }\n"
)
NVCC_PLAIN = Resources(30, 4, 8, 0, 16)
NVCC_TILED = Resources(12, 0, 0, 0, 0)
NVCC_CUB = Resources(40, 0, 0, 2048, 0)


def result(**extra: object) -> NvccResult:
    fields: dict = {
        "ok": True,
        "diagnostics": (),
        "log": "",
        "seconds": 1.5,
        "resources": {
            "_Z5plainPf": NVCC_PLAIN,
            "_Z5tiledILi64EEvPf": NVCC_TILED,
            "_ZN3cub6KernelEv": NVCC_CUB,
        },
        "names": {"_Z5tiledILi64EEvPf": "tiled<64>", "_ZN3cub6KernelEv": "cub::Kernel"},
    }
    fields.update(extra)
    return NvccResult(**fields)


def fast() -> object:
    return analyze(TEXT, Path("main.cu"), Settings(arch="sm_90"))


def test_nvccs_figures_replace_the_fast_tiers_on_every_kernel() -> None:
    merged = merge_nvcc(fast(), result(), 120)
    plain, tiled = merged.kernels
    assert plain.resources == NVCC_PLAIN
    assert all(r == NVCC_PLAIN for r in plain.instances.values())  # no stale fast figure left
    assert tiled.resources == NVCC_TILED and tiled.instances == {"tiled<64>": NVCC_TILED}
    (library,) = merged.library_kernels
    assert (library.name, library.resources) == ("cub::Kernel", NVCC_CUB)
    assert merged.nvcc_note == "nvcc: compiles (1.5 s)"


def test_when_nvcc_fails_its_errors_show_and_the_fast_figures_stay() -> None:
    before = fast()
    error = Diagnostic(3, 22, 3, 23, "error", 'identifier "nope" is undefined')
    merged = merge_nvcc(before, result(ok=False, diagnostics=(error,), resources={}), 120)
    assert [d.message for d in merged.errors] == ['identifier "nope" is undefined']
    assert [k.resources for k in merged.kernels] == [k.resources for k in before.kernels]


def test_a_stopped_check_changes_nothing_and_a_timeout_only_warns() -> None:
    before = fast()
    assert merge_nvcc(before, result(stopped=True, ok=False), 120) is before
    late = merge_nvcc(before, result(timed_out=True, ok=False), 120)
    assert late.kernels == before.kernels
    assert late.diagnostics[-1].severity == "warning" and "120 s" in late.diagnostics[-1].message


def test_line_map_follows_unchanged_lines_across_an_insertion_and_an_edit() -> None:
    old = "a\nb\nc\nd\ne\n"
    new = "a\nnew\nb\nC\nd\ne\n"
    moved = line_map(old, new)
    assert moved == {1: 1, 2: 3, 4: 5, 5: 6, 6: 7}  # line 3 ("c") was edited: no mapping


REFUTED = (
    "#ifdef __CUDACC_RTC__\n"
    'static_assert(sizeof(int) == 0, "only the fast tier sees this");\n'
    "#endif\n" + TEXT
)


def test_a_refuted_fast_error_stays_withdrawn_while_other_lines_are_edited() -> None:
    """nvcc's verdict on the checked text is the arbiter of every line unchanged since: the
    fast tier's error there never comes back; a line typed since shows the fast tier's."""
    settings = Settings(arch="sm_90")
    checked = analyze(REFUTED, Path("main.cu"), settings)
    assert any("only the fast tier" in d.message for d in checked.errors)
    nvcc_warning = Diagnostic(5, 1, 5, 2, "warning", "nvcc's own warning", "177-D")
    verdict = result(diagnostics=(nvcc_warning,))
    assert merge_nvcc(checked, verdict, 120).errors == ()
    # a line inserted above the kernels, and a real error typed in a new line
    edited = REFUTED.replace(
        "#endif\n", "#endif\n__device__ int typed() { return no_such_name; }\n", 1
    )
    now = analyze(edited, Path("main.cu"), settings)
    carried = carry_nvcc(now, REFUTED, verdict, 120)
    assert [(d.line, d.message) for d in carried.errors] == [
        (4, 'identifier "no_such_name" is undefined')
    ]
    (warning,) = [d for d in carried.diagnostics if d.severity == "warning"]
    assert (warning.line, warning.message) == (6, "nvcc's own warning")  # moved one line down
    plain, tiled = carried.kernels
    assert plain.resources == NVCC_PLAIN and tiled.resources == NVCC_TILED  # unchanged kernels
    assert "edited since" in carried.nvcc_note
    # an edited kernel keeps the fast tier's figures, not nvcc's of its old text
    retyped = edited.replace("o[threadIdx.x] = 1.0f;", "o[threadIdx.x] = 3.0f;")
    again = carry_nvcc(analyze(retyped, Path("main.cu"), settings), REFUTED, verdict, 120)
    assert again.kernels[0].resources != NVCC_PLAIN and again.kernels[1].resources == NVCC_TILED
