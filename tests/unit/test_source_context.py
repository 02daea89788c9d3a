"""The file around the kernels from the tree-sitter tree: what the FSR prompts show the model."""

from __future__ import annotations

from cuda_llm_lsp.source.context import device_function_spans, outline

FILE = """\
#include <cstdio>  // printf
#define TILE 32
#define MUL(a, b) \\
  ((a) * (b))
// __device__ int commented_out() { return 0; }
const char* note = "__device__ int in_a_string() {";

namespace ns {
template <typename T>
__device__ T twice(T v) { return v + v; }  // «ü»: offsets count characters, not bytes

static __host__ __device__ float same(float x) { return x; }

template <typename T>
__global__ void k(T* p) { p[0] = twice(p[0]); }
}

void launch(float* p) {
  dim3 grid(1);
  ns::k<float><<<grid, TILE>>>(p);
  ns::k<float> <<< grid, TILE >>>(p);
}
"""


def test_outline_reads_includes_defines_helpers_and_launches() -> None:
    found = outline(FILE)
    assert found.includes == ("#include <cstdio>  // printf",)
    assert found.defines == ("#define TILE 32", "#define MUL(a, b) \\\n  ((a) * (b))")
    helpers = [FILE[start:end] for start, end in found.device_functions]
    assert helpers == [
        "template <typename T>\n__device__ T twice(T v) { return v + v; }",
        "static __host__ __device__ float same(float x) { return x; }",
    ]
    assert found.launch_lines("k") == (19, 20)
    assert found.launch_lines("twice") == ()


def test_helper_spans_start_at_the_line_and_survive_half_typed_code() -> None:
    text = "  __device__ int one() { return 1; }\n__device__ int broken( {\n"
    [(start, end)] = device_function_spans(text)
    assert (start, text[start:end]) == (0, "  __device__ int one() { return 1; }")
