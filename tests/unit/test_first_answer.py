"""The editor's first answer (`compile.first_answer`): the front end stopped before the end of
the unit, then completed. Real NVRTC in the compile processes.

What must hold: the first answer never shows what the full check would not (no error of the
stop line, nothing past the file); it is complete wherever the file has an error of its own;
completing it gives exactly the full check's diagnostics; a file that ends inside a construct
gets the full check at once.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_llm_lsp.compile.analysis import (
    add_resources,
    analyze_syntax,
    complete_front_end,
    with_completion,
)
from cuda_llm_lsp.compile.first_answer import STOP_NAME, STOP_UNDECLARED
from cuda_llm_lsp.config import Settings

SETTINGS = Settings(arch="sm_90")
ROOT = Path(__file__).resolve().parents[2]

KERNEL = (
    "__global__ void scale(float* x, int n) {\n"
    "    int i = threadIdx.x;\n"
    "    if (i < n) x[i] *= 2.0f;\n"
    "}\n"
)
# reported only at the end of the unit: the first answer lacks it, the complete one has it
DYNAMIC_INIT = "__device__ int seed() { return 7; }\n__device__ int state = seed();\n" + KERNEL
TEMPLATE_ERROR = (
    "template <typename T> __device__ T twice(T v) { return v.missing * 2; }\n"
    "__global__ void k(float* x) { x[0] = twice(x[0]); }\n"
)
STATIC_ASSERT = (
    "template <typename T> __device__ void only_bytes() {\n"
    '    static_assert(sizeof(T) == 1, "bytes");\n'
    "}\n"
    "__global__ void k() { only_bytes<int>(); }\n"
)
TYPO = KERNEL.replace("x[i] *= 2.0f", "x[i] *= tw0")
UNUSED = "__global__ void k(int* p) {\n    int unused = 3;\n    p[0] = 1;\n}\n"
# the stop line would not stand alone at the end of these
OPEN_BRACE = "__global__ void k(int* p) {\n    p[0] = 1;\n"
OPEN_COMMENT = KERNEL + "/* a comment never closed\n"
OPEN_EXTERN_C = 'extern "C" {\n' + KERNEL
OPEN_NAMESPACE = "namespace inner {\n" + KERNEL
NO_NEWLINE = KERNEL.rstrip("\n")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_LLM_CACHE_DIR", str(tmp_path / "cache"))


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "k.cu"
    path.write_text(text)
    return path


def _completed(text: str, path: Path):
    first = analyze_syntax(text, path, SETTINGS, first=True)
    return first, with_completion(first, complete_front_end(first))


def _no_stop(diagnostics, text: str) -> None:
    lines = text.count("\n") + 1
    for d in diagnostics:
        assert STOP_NAME not in d.message and STOP_UNDECLARED not in d.message, d
        assert d.line <= lines, d


def test_what_only_the_end_of_the_unit_reports_comes_with_the_completion(tmp_path: Path) -> None:
    path = _write(tmp_path, DYNAMIC_INIT)
    full = analyze_syntax(DYNAMIC_INIT, path, SETTINGS)
    (late,) = full.errors
    assert "dynamic initialization" in late.message and late.line == 2
    first, completed = _completed(DYNAMIC_INIT, path)
    assert not first.front_end_complete and first.errors == ()
    _no_stop(first.diagnostics, DYNAMIC_INIT)
    assert completed.front_end_complete and completed.diagnostics == full.diagnostics
    assert completed.compile is not None and not completed.compile.ok


@pytest.mark.parametrize(
    "text",
    [TYPO, TEMPLATE_ERROR, STATIC_ASSERT],
    ids=["undeclared name", "template instantiation", "static_assert in a template"],
)
def test_an_error_of_the_file_makes_the_first_answer_the_whole_answer(
    tmp_path: Path, text: str
) -> None:
    path = _write(tmp_path, text)
    full = analyze_syntax(text, path, SETTINGS)
    first = analyze_syntax(text, path, SETTINGS, first=True)
    assert full.errors and first.front_end_complete
    assert first.diagnostics == full.diagnostics
    assert complete_front_end(first) == ()


@pytest.mark.parametrize(
    "text",
    [KERNEL, UNUSED, NO_NEWLINE],
    ids=["clean", "a warning", "no final newline"],
)
def test_a_clean_files_first_answer_is_the_full_checks_before_and_after_completion(
    tmp_path: Path, text: str
) -> None:
    path = _write(tmp_path, text)
    full = analyze_syntax(text, path, SETTINGS)
    first, completed = _completed(text, path)
    assert not first.front_end_complete and first.diagnostics == full.diagnostics
    _no_stop(first.diagnostics, text)
    assert completed.diagnostics == full.diagnostics


@pytest.mark.parametrize(
    "text",
    [OPEN_BRACE, OPEN_COMMENT, OPEN_EXTERN_C, OPEN_NAMESPACE],
    ids=["open brace", "open comment", 'open extern "C"', "open namespace"],
)
def test_a_file_ending_inside_a_construct_gets_the_full_check_at_once(
    tmp_path: Path, text: str
) -> None:
    path = _write(tmp_path, text)
    full = analyze_syntax(text, path, SETTINGS)
    first = analyze_syntax(text, path, SETTINGS, first=True)
    assert first.front_end_complete and first.diagnostics == full.diagnostics
    _no_stop(first.diagnostics, text)


def test_code_generation_and_the_completion_merge_in_either_order(tmp_path: Path) -> None:
    path = _write(tmp_path, DYNAMIC_INIT)
    full = analyze_syntax(DYNAMIC_INIT, path, SETTINGS)
    first = analyze_syntax(DYNAMIC_INIT, path, SETTINGS, first=True)
    extras = complete_front_end(first)
    generated = add_resources(first)
    assert not generated.front_end_complete  # code generation does not complete it
    merged = with_completion(generated, extras)
    assert merged.front_end_complete
    assert {d for d in full.diagnostics} <= set(merged.diagnostics)
    assert [i.resources for i in merged.kernels] == [i.resources for i in generated.kernels]


def test_the_heavy_header_benchmark_file_agrees_with_the_full_check(tmp_path: Path) -> None:
    source = ROOT / "benchmarks" / "heavy_headers" / "train_kernels.cu"
    text = source.read_text()
    path = _write(tmp_path, text)
    full = analyze_syntax(text, path, SETTINGS)
    first, completed = _completed(text, path)
    assert first.diagnostics == full.diagnostics == completed.diagnostics
    edited = text.replace("float cube = 0.044715f", "float cube = undeclared_c", 1)
    path.write_text(edited)
    full_edited = analyze_syntax(edited, path, SETTINGS)
    first_edited = analyze_syntax(edited, path, SETTINGS, first=True)
    assert first_edited.front_end_complete
    assert first_edited.diagnostics == full_edited.diagnostics and full_edited.errors


# Code NVRTC's front end objects to, of many kinds: what it reports at the end of the unit
# comes with the completion, the rest with the first answer; never anything the full check
# would not say.
KINDS = {
    "host call from a kernel": "__host__ int h(int);\n__global__ void k(int* p) { p[0] = h(1); }\n",
    "throw in device code": "__device__ void f() { throw 1; }\n",
    "constexpr host function": (
        "constexpr int c(int x) { return 2 * x; }\n__global__ void k(int* p) { p[0] = c(p[0]); }\n"
    ),
    "variadic device function": "__device__ int f(int n, ...) { return n; }\n",
    "shared with a constructor": (
        "struct C { __device__ C() : v(1) {} int v; };\n"
        "__global__ void k(int* p) { __shared__ C c; p[0] = c.v; }\n"
    ),
    "kernel returning a value": "__global__ int k(int* p) { return 1; }\n",
    "variable-length array": "__global__ void k(int n) { int a[n]; a[0] = 1; }\n",
    "host lambda in a kernel": (
        "__global__ void k(int* p) { auto l = [] __host__ (int x) { return x; }; p[0] = l(1); }\n"
    ),
    "bad launch bounds": "__global__ void __launch_bounds__(2048) k(int* p) { }\n",
    "grid constant pointer": "__global__ void k(__grid_constant__ int* p) { }\n",
    "constexpr array size": (
        "template <int N> __device__ int f() { int a[N - 5]; return sizeof(a); }\n"
        "__global__ void k(int* p) { p[0] = f<3>(); }\n"
    ),
    "missing return": "__device__ int f(int x) { if (x) return 1; }\n",
    "dynamic initialization": DYNAMIC_INIT,
    "dynamic initialization and a typo": DYNAMIC_INIT + "__device__ int more = undeclared;\n",
}


@pytest.mark.parametrize("text", list(KINDS.values()), ids=list(KINDS))
def test_the_first_answer_and_its_completion_say_what_the_full_check_says(
    tmp_path: Path, text: str
) -> None:
    path = _write(tmp_path, text)
    full = analyze_syntax(text, path, SETTINGS)
    first, completed = _completed(text, path)
    _no_stop(first.diagnostics, text)
    assert set(first.diagnostics) <= set(full.diagnostics)
    if first.front_end_complete:
        assert first.diagnostics == full.diagnostics
    assert completed.diagnostics == full.diagnostics
