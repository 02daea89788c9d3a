"""The source model: kernels, parameters, ranges, spec blocks and instantiations."""

from __future__ import annotations

import pytest
from tree_sitter import Node, Query

from cuda_llm_lsp.source.kernels import find_kernels, kernel_at
from cuda_llm_lsp.source.text import Point, Span

SOURCE = """\
#include <cstdio>
/* @cuda-llm
sizes.n = [1, 2]
*/
// a note between the spec and the kernel
template <typename T, int BLOCK = 256>
__global__ void __launch_bounds__(256) scale(const T* __restrict__ in, T* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] * T(2);
}

extern "C" __global__ void saxpy(int n, float a, const float* x, float* y) {
    y[0] = a * x[0];
}

extern "C" {
__global__ void in_block(double* __restrict__ const p) {}
}

namespace ops {
__global__ void scoped(float values[], unsigned int count) {}
}

void host_only(int* p) {}

int main() {
    scale<float, 128><<<1, 128>>>(nullptr, nullptr, 0);
    scale< double ><<<1, 1>>>(nullptr, nullptr, 0);
}
"""


def by_name() -> dict:
    return {k.name: k for k in find_kernels(SOURCE)}


def test_finds_every_global_function_and_no_host_function() -> None:
    assert [k.name for k in find_kernels(SOURCE)] == ["scale", "saxpy", "in_block", "scoped"]


def test_templated_kernel_has_parameters_bounds_and_launch_site_instantiations() -> None:
    scale = by_name()["scale"]
    assert scale.template_params == ("T", "BLOCK")
    assert scale.launch_bounds == "256"
    assert scale.instantiations == ("scale<float, 128>", "scale< double >")
    assert scale.span.start == Point(5, 0)  # starts at `template`
    assert scale.name_span == Span.of(6, 39, 6, 44)
    assert scale.body_span.start == Point(6, 86) and scale.body_span.end == Point(9, 1)
    assert not scale.is_extern_c


def test_parameters_carry_type_pointer_and_const() -> None:
    params = by_name()["scale"].params
    assert [(p.name, p.base_type, p.is_pointer, p.is_const) for p in params] == [
        ("in", "T", True, True),
        ("out", "T", True, False),
        ("n", "int", False, False),
    ]
    assert params[0].c_type == "const T* __restrict__"
    pointer_const = by_name()["in_block"].params[0]
    assert pointer_const.is_pointer and not pointer_const.is_const  # const pointer, not pointee
    scoped = by_name()["scoped"]
    assert scoped.params[0].is_pointer and scoped.params[1].base_type == "unsigned int"


def test_extern_c_both_forms_and_namespace_scope() -> None:
    kernels = by_name()
    assert kernels["saxpy"].is_extern_c and kernels["saxpy"].span.start == Point(11, 0)
    assert kernels["in_block"].is_extern_c
    assert kernels["scoped"].qualified_name == "ops::scoped"


def test_spec_block_above_kernel_with_comments_between() -> None:
    spec = by_name()["scale"].spec
    assert spec is not None
    assert spec.span == Span.of(1, 0, 3, 2)
    assert spec.toml == "\nsizes.n = [1, 2]\n"
    assert (spec.toml_first_line, spec.toml_first_column) == (1, 12)
    assert by_name()["saxpy"].spec is None


def test_spec_block_separated_by_code_is_not_attached() -> None:
    text = "/* @cuda-llm\nsizes.n=[1]\n*/\nint x;\n__global__ void k(int n) {}\n"
    assert find_kernels(text)[0].spec is None


def test_kernel_at_finds_the_kernel_around_a_point() -> None:
    kernels = find_kernels(SOURCE)
    assert kernel_at(kernels, Point(8, 10)).name == "scale"
    assert kernel_at(kernels, Point(2, 0)).name == "scale"  # inside its spec block
    assert kernel_at(kernels, Point(23, 0)) is None


def test_half_typed_and_garbage_text_never_raises() -> None:
    assert find_kernels("__global__ void k(float* x, int") == []
    assert find_kernels("\x00\x01\ufffd /* unterminated") == []
    assert find_kernels('"unterminated string\n__global__ void k() {}') is not None
    text = "__global__ void ok(int n) {}\n__global__ void typing(int n) { if (\n"
    assert [k.name for k in find_kernels(text)][:1] == ["ok"]


def test_columns_count_code_points_not_bytes() -> None:
    kernel = find_kernels("/* é */ __global__ void k(float* p) {}")[0]
    assert kernel.name_span == Span.of(0, 24, 0, 25)


def test_kernels_with_cluster_dims_or_maxnreg_are_found() -> None:
    text = (
        "__global__ void __cluster_dims__(2, 1, 1) clustered(float* x) { x[0] = 1; }\n"
        "__global__ void __maxnreg__(32) capped(float* x) { x[0] = 2; }\n"
    )
    kernels = find_kernels(text)
    assert [k.name for k in kernels] == ["clustered", "capped"]
    assert kernels[0].name_span == Span.of(0, 42, 0, 51)


def test_template_parameter_names_with_defaults() -> None:
    source = (
        "struct Vec {};\n"
        "template <typename T = Vec, class U = float, int N = 4, typename W>\n"
        "__global__ void k(T* x, U* y, W* w) {}\n"
    )
    (kernel,) = find_kernels(source)
    assert kernel.template_params == ("T", "U", "N", "W")


def test_kernels_and_instantiations_in_source_order_whatever_order_tree_sitter_gives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """tree-sitter's captures came out of document order on a large real file (LightGBM's
    regression objective), and not the same order in every process: the draft's "first
    instantiation launched in this file" was the second. Reversed captures stand in for that."""
    import cuda_llm_lsp.source.kernels as kernels

    real = kernels.QueryCursor

    class Reversed:
        def __init__(self, query: Query) -> None:
            self.cursor = real(query)

        def captures(self, node: Node) -> dict[str, list[Node]]:
            return {k: list(reversed(v)) for k, v in self.cursor.captures(node).items()}

    monkeypatch.setattr(kernels, "QueryCursor", Reversed)
    source = """
template <bool W> __global__ void k(float* y) { y[0] = W; }
__global__ void other(float* y) { y[0] = 1; }
void launch(float* y, bool w) {
  if (w) k<false><<<1, 32>>>(y);
  else k<true><<<1, 64>>>(y);
}
"""
    found = find_kernels(source)
    assert [k.name for k in found] == ["k", "other"]
    assert found[0].instantiations == ("k<false>", "k<true>")


def test_explicit_instantiations_written_by_a_macro_are_instantiations() -> None:
    """bitsandbytes' kernels.cu: `MAKE_Optimizer32bit1State(MOMENTUM, half)` lines expand to
    `template __global__ void kOptimizer32bit1State<half, MOMENTUM>(...);`. A macro pasting
    tokens, one never invoked and an invocation inside another macro's body give none."""
    source = (
        "template <typename T, int OPT, int B> __global__ void k(T* g) { g[0] = T(OPT + B); }\n"
        "#define MAKE(oname, gtype) \\\n"
        "    template __global__ void k<gtype, oname, 4096>(gtype * g);\n"
        "#define PASTE(n) template __global__ void k<float, n##0, 1>(float* g);\n"
        "#define UNUSED(n) template __global__ void k<char, n, 2>(char* g);\n"
        "#define BOTH MAKE(7, int)\n"
        "MAKE(1, float)\nMAKE(2, (unsigned char))\n  MAKE(3,\n       double)\nPASTE(5)\n"
    )
    (kernel,) = find_kernels(source)
    assert kernel.instantiations == (
        "k<float, 1, 4096>",
        "k<(unsigned char), 2, 4096>",
        "k<double, 3, 4096>",
    )
