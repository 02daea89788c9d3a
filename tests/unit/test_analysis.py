"""analyze(): kernels + specs + compile + diagnostics, the entry both the CLI and the server use."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cuda_llm_lsp.compile.analysis import analyze, analyze_syntax, name_expressions
from cuda_llm_lsp.config import Settings

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
GOOD_EXAMPLES = ("saxpy.cu", "transpose.cu", "reduction.cu", "softmax.cu", "matmul.cu")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_LLM_CACHE_DIR", str(tmp_path / "cache"))


def run(path: Path, settings: Settings | None = None):
    return analyze(path.read_text(), path, settings or Settings(arch="sm_90"))


def test_acceptance_host_code_and_a_device_error_on_line_9() -> None:
    text = (EXAMPLES / "errors" / "broken.cu").read_text()
    assert "int main()" in text and "<<<" in text and "#include <vector>" in text
    analysis = run(EXAMPLES / "errors" / "broken.cu")
    (d,) = analysis.diagnostics
    assert (d.line, d.severity) == (9, "error")
    assert d.message == 'identifier "facter" is undefined'
    assert d.column == text.split("\n")[8].index("facter") + 1


@pytest.mark.parametrize("name", GOOD_EXAMPLES)
def test_every_example_compiles_cleanly_and_reports_registers(name: str) -> None:
    analysis = run(EXAMPLES / name)
    assert analysis.diagnostics == ()
    assert analysis.kernels, "every example has a kernel"
    for info in analysis.kernels:
        assert info.resources is not None and info.resources.registers > 0, info.kernel.name
        assert info.spec is not None


def test_examples_cover_templates_mangled_and_extern_c() -> None:
    infos = [i for n in GOOD_EXAMPLES for i in run(EXAMPLES / n).kernels]
    assert any(i.kernel.is_template for i in infos)
    assert any(i.kernel.is_extern_c for i in infos)
    assert any(not i.kernel.is_extern_c and not i.kernel.is_template for i in infos)
    matmul = next(i for i in infos if i.kernel.name == "matmul")
    assert matmul.name_expression == "matmul<float, 16>"


def test_template_without_instance_uses_launch_sites_else_has_no_resources() -> None:
    launched = (
        "template <int B> __global__ void k(float* x) { x[0] = B; }\n"
        "void go(float* x) { k<64><<<1, 64>>>(x); }\n"
    )
    (info,) = analyze(launched, None, Settings(arch="sm_90")).kernels
    assert info.name_expression == "k<64>" and info.resources is not None
    alone = "template <int B> __global__ void k(float* x) { x[0] = B; }\n"
    analysis = analyze(alone, None, Settings(arch="sm_90"))
    (info,) = analysis.kernels
    assert info.resources is None and info.name_expression is None
    assert "instantiation" in info.symbol_note
    assert analysis.diagnostics == ()  # unknown resources are not a problem in the file


def test_spec_errors_become_one_based_diagnostics() -> None:
    text = (
        "/* @cuda-llm\n"
        "sizes.n = [1, 2]\n"
        "grid = 1\n"
        "block = 32\n"
        'args.x = "float99[n]"\n'
        'args.n = "n"\n'
        "*/\n"
        'extern "C" __global__ void k(float* x, int n) { x[0] = n; }\n'
    )
    analysis = analyze(text, None, Settings(arch="sm_90"))
    spec_problems = [d for d in analysis.diagnostics if d.code == "spec"]
    assert spec_problems, analysis.diagnostics
    assert all(1 <= d.line <= 7 and d.column >= 1 for d in spec_problems)
    assert any(d.line == 5 for d in spec_problems)


def test_ptxas_error_of_a_template_kernel_is_placed_on_its_name() -> None:
    text = (
        "// too much static shared memory for one block: only ptxas sees it\n"
        "template <int B> __global__ void k(float* x) {\n"
        "  __shared__ float s[B * 200];\n"
        "  s[threadIdx.x] = x[threadIdx.x]; __syncthreads(); x[threadIdx.x] = s[threadIdx.x + 1];\n"
        "}\n"
        "void go(float* x) { k<128><<<1, 64>>>(x); }\n"
    )
    analysis = analyze(text, None, Settings(arch="sm_90"))
    (d,) = analysis.diagnostics
    assert d.code == "ptxas" and "too much shared data" in d.message
    column = text.split("\n")[1].index(" k(") + 2
    assert (d.line, d.column, d.end_line, d.end_column) == (2, column, 2, column + 1)


@pytest.mark.parametrize(
    "message",
    [
        "ptxas: Entry function 'k<128>' uses too much shared data",  # lowered name substituted
        "ptxas: Entry function 'k' uses too much shared data",
        "ptxas: Entry function '_ZN2ns1kILi128EEvPf' uses too much shared data",
        "ptxas: Value of threads per SM for entry _Z1kPf is out of range",
    ],
)
def test_ptxas_problem_is_placed_on_the_kernel_it_names(message: str) -> None:
    from cuda_llm_lsp.compile.analysis import _place
    from cuda_llm_lsp.compile.types import Diagnostic
    from cuda_llm_lsp.source.kernels import find_kernels

    kernels = find_kernels(
        "__global__ void kk(float* x) {}\n"
        "namespace ns {\ntemplate <int B> __global__ void k(float* x) {}\n}\n"
    )
    d = _place(Diagnostic(1, 1, 1, 1, "error", message, "ptxas"), kernels)
    assert (d.line, d.column, d.end_column) == (3, 34, 35), d
    other = Diagnostic(1, 1, 1, 1, "error", "ptxas: Entry function 'k2<1>' is odd", "ptxas")
    assert _place(other, kernels) == other


def test_missing_include_is_a_diagnostic_and_the_rest_still_compiles(tmp_path: Path) -> None:
    path = tmp_path / "k.cu"
    text = '#include "not_there.cuh"\n__global__ void k(float* x) { x[0] = 1; }\n'
    analysis = analyze(text, path, Settings(arch="sm_90"))
    (d,) = analysis.diagnostics
    assert (d.line, d.code, d.severity) == (1, "include", "error")
    assert "not_there.cuh" in d.message
    assert analysis.kernels[0].resources is not None


def test_binary_content_gives_one_clear_diagnostic() -> None:
    garbage = bytes(range(256)).decode("utf-8", errors="replace") * 10
    analysis = analyze(garbage, None, Settings(arch="sm_90"))
    (d,) = analysis.diagnostics
    assert d.line == 1 and "NUL" in d.message and analysis.compile is None


def test_invalid_utf8_decoded_with_replacement_still_analyses() -> None:
    raw = b"// caf\xe9\n__global__ void k(float* x) { x[0] = 1; }\n"
    analysis = analyze(raw.decode("utf-8", errors="replace"), None, Settings(arch="sm_90"))
    assert analysis.diagnostics == () and analysis.kernels[0].resources is not None


@pytest.mark.parametrize(
    "text",
    [
        "__global__ void k(float* x) { /* never closed\n x[0] = 1; }\n",
        '__global__ void k(char* x) { const char* s = "open;\n}\n',
        "",
        "int main() { return 0; }\n",
        "__global__ void k(float* x) { x[0] = 1;\n",  # half typed
    ],
)
def test_broken_or_empty_input_never_raises(text: str) -> None:
    analysis = analyze(text, None, Settings(arch="sm_90"))
    assert all(d.line >= 1 and d.column >= 1 for d in analysis.diagnostics)


def test_no_kernels_no_diagnostics() -> None:
    analysis = analyze("__device__ int f() { return 1; }\n", None, Settings(arch="sm_90"))
    assert analysis.kernels == () and analysis.diagnostics == ()


def test_five_megabyte_file_is_checked_within_the_time_limit() -> None:
    # no size limit on device code (issue 28: CUTLASS units are megabytes): the front end runs
    # under the time limit, code generation is skipped past 500 kernels, with a warning
    kernel = "__global__ void k{i}(float* x) {{ x[threadIdx.x] = {i}.0f; }}\n"
    text = "".join(kernel.format(i=i) for i in range(90_000))
    assert len(text) > 5_000_000
    start = time.perf_counter()
    analysis = analyze(text, None, Settings(arch="sm_90"))
    elapsed = time.perf_counter() - start
    assert analysis.errors == ()
    assert all(d.severity == "warning" for d in analysis.diagnostics)
    assert any(d.code == "size" and "90000 kernels" in d.message for d in analysis.diagnostics)
    assert all(info.resources is None for info in analysis.kernels)
    assert elapsed < 60, elapsed  # front end ~10 s on the 2-core machine; no hang


def test_name_expressions_for_kernels() -> None:
    text = 'extern "C" __global__ void a() {}\n__global__ void b() {}\n'
    kernels = analyze(text, None, Settings(arch="sm_90")).kernels
    assert [name_expressions(i.kernel, None) for i in kernels] == [("a",), ("b",)]


def test_compile_is_cached_between_identical_analyses() -> None:
    text = "__global__ void cached_k(float* x) { x[0] = 3; }\n"
    first = analyze(text, None, Settings(arch="sm_90"))
    second = analyze(text, None, Settings(arch="sm_90"))
    assert first.compile is not None and second.compile is not None
    assert second.compile.from_cache


def test_half_typed_examples_never_raise_and_stay_in_range() -> None:
    text = (EXAMPLES / "softmax.cu").read_text()
    lines = text.count("\n") + 1
    for cut in range(100, len(text), 211):
        analysis = analyze(text[:cut], EXAMPLES / "softmax.cu", Settings(arch="sm_90"))
        assert all(1 <= d.line <= lines for d in analysis.diagnostics), cut


def test_a_changed_define_default_is_read_again_not_served_from_the_spec_cache() -> None:
    """parse_spec reads the file's `#define` defaults (tunables): a cached spec keyed on the
    kernel alone kept TILE 16 after the default became 32."""
    path = EXAMPLES / "tune" / "matmul_tiled.cu"
    text = path.read_text()
    settings = Settings(arch="sm_90")

    def tunables(source: str):
        (info,) = [i for i in analyze_syntax(source, path, settings).kernels if i.spec]
        assert info.spec is not None and info.spec.tunables is not None
        return info.spec.tunables

    assert tunables(text).default["TILE"] == 16
    edited = text.replace("#define TILE 16", "#define TILE 32")
    assert edited != text
    assert tunables(edited).default["TILE"] == 32
    # the same lines, a longer first one: the default's offset moves, the kernel does not
    longer = "// longer " + edited
    moved = tunables(longer).defines["TILE"]
    assert longer[moved.start : moved.end] == "32"
