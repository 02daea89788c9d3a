"""Static drafts of kernels whose sizes are the file's own constants and whose buffers belong to
objects (issue 39: CUTLASS's canonical GEMM examples printed `float32[n]` over 1 M elements for a
kernel that writes 14 x 27): file- and function-scope integer constants in their usual
spellings, extents from a container's shape (`Matrix<float> d({kRows, kCols})` passed as
`d.device_data()`, `thrust::raw_pointer_cast(v.data())`, `&w[0]`, ...), and a draft with no
size lists where the launch and every extent are fixed numbers."""

from __future__ import annotations

import pytest

from cuda_llm_lsp.source.draft import draft_spec
from cuda_llm_lsp.source.kernels import Kernel, find_kernels
from cuda_llm_lsp.source.launch_facts import static_launch
from cuda_llm_lsp.source.spec import parse_spec
from cuda_llm_lsp.source.spec.hidden import hidden_cases

# A tile kernel with its sizes in file-scope constants and its buffers owned by a host/device
# matrix class of the program's own, in the style of a library example.
FIXED = """
#include "matrix.h"

int const kRows = 6;
int const kCols = 10;
constexpr int kDepth = 3;

__global__ void tile_kernel(float *out, float scale, float const *lhs, float const *rhs) {
  if (threadIdx.x == 0) {
    for (int r = 0; r < kRows; ++r)
      for (int c = 0; c < kCols; ++c) {
        float s = 0;
        for (int k = 0; k < kDepth; ++k) s += lhs[r * kDepth + k] * rhs[k * kCols + c];
        out[r * kCols + c] = scale * s;
      }
  }
}

int main() {
  lib::Matrix<float, lib::RowMajor> lhs({kRows, kDepth});
  lib::Matrix<float, lib::ColumnMajor> rhs({kDepth, kCols});
  lib::Matrix<float, lib::RowMajor> out({kRows, kCols});
  lib::Matrix<float, lib::RowMajor> reference({kRows, kCols}, false);
  dim3 grid(1, 1);
  dim3 block(32, 1, 1);
  float scale = 2.0f;
  tile_kernel<<< grid, block >>>(
    out.device_data(),
    scale,
    lhs.device_data(),
    rhs.device_data()
  );
  return 0;
}
"""


def _kernel(source: str, name: str | None = None) -> Kernel:
    return next(k for k in find_kernels(source) if name is None or k.name == name)


def _parsed(source: str, name: str | None = None):  # type: ignore[no-untyped-def]
    kernel = _kernel(source, name)
    block = draft_spec(kernel, source)
    lines = source.splitlines(keepends=True)
    at = sum(len(line) for line in lines[: kernel.span.start.line])
    text = source[:at] + block + source[at:]
    spec, errors = parse_spec(_kernel(text, kernel.name), text)
    assert spec is not None, (block, errors)
    assert not [e for e in errors if e.severity == "error"], (block, errors)
    return block, spec


def test_fixed_extents_from_file_constants_and_a_containers_shape() -> None:
    facts = static_launch(_kernel(FIXED), FIXED)
    assert facts is not None
    assert facts.grid == ("1", "1") and facts.block == ("32", "1", "1") and facts.smem == "0"
    assert facts.counts == {"out": "6 * 10", "lhs": "6 * 3", "rhs": "3 * 10"}, facts
    assert facts.written["out"] == "kRows * kCols"


def test_a_fixed_launch_drafts_one_case_of_the_files_extents() -> None:
    block, spec = _parsed(FIXED)
    assert "sizes." not in block and "multiples of the block size" not in block, block
    assert 'args.out   = "out float32[60]"  # kRows * kCols in the file' in block, block
    assert 'args.lhs   = "in float32[18]"' in block and 'args.rhs   = "in float32[30]"' in block
    assert "grid = [1, 1]" in block and "block = [32, 1, 1]" in block, block
    (case,) = spec.cases()
    assert case.counts == {"out": 60, "lhs": 18, "rhs": 30}
    assert case.grid == (1, 1, 1) and case.block == (32, 1, 1)
    assert spec.arg("out").role == "out" and spec.arg("lhs").role == "in"
    # the evaluator's hidden cases keep the file's extents (no size to move)
    assert {h.case.counts["out"] for h in hidden_cases(spec, 1)} == {60}


@pytest.mark.parametrize(
    "definition",
    [
        "const int kN = 48;",
        "int const kN = 48;",
        "constexpr int kN = 48;",
        "static constexpr size_t kN = 48;",
        "constexpr std::size_t kN{48};",
        "constexpr auto kN = 48u;",
        "namespace cfg { constexpr int kHalf = 24; constexpr int kN = kHalf * 2; }\nusing cfg::kN;",
        "static const unsigned int kN(48);",
    ],
)
def test_file_scope_integer_constants_in_their_usual_spellings(definition: str) -> None:
    source = (
        definition
        + """
__global__ void fill(float* y) { y[threadIdx.x + blockIdx.x * blockDim.x] = 1; }
int main() {
  float* y;
  cudaMalloc(&y, kN * 4 * sizeof(float));
  fill<<<kN / 16, 64>>>(y);
}
"""
    )
    facts = static_launch(_kernel(source), source)
    assert facts is not None, source
    assert facts.grid is not None and facts.counts.get("y") is not None, (source, facts)
    from cuda_llm_lsp.source.expr import evaluate

    assert evaluate(facts.grid[0], {}) == 3 and evaluate(facts.counts["y"], {}) == 192, facts
    block, spec = _parsed(source)
    assert 'args.y = "out float32[192]"' in block and "sizes." not in block, block
    assert spec.cases()[-1].grid == (3, 1, 1)


def test_a_function_scope_constant_and_a_shadowing_parameter() -> None:
    source = """
const int n = 7;  // shadowed in launch() by its parameter
const int kGrid = 1;
__global__ void scale(float* y, int n) { int i = threadIdx.x; if (i < n) y[i] *= 2; }
void launch(float* y, int n) { scale<<<kGrid, n>>>(y, n); }
int main() {
  constexpr int kLen = 32;
  float* y;
  cudaMalloc(&y, kLen * sizeof(float));
  launch(y, kLen);
}
"""
    facts = static_launch(_kernel(source), source)
    assert facts is not None and facts.block == ("n",), facts  # the parameter, not 7
    assert facts.grid == ("1",), facts
    assert facts.counts == {"y": "n"}, facts


def test_a_constant_inside_a_function_or_class_is_not_a_file_constant() -> None:
    source = """
struct Tile { static constexpr int kN = 5; };
void other() { const int kN = 9; }
constexpr int kM = 4;
__global__ void k(float* y, float* z) { y[threadIdx.x] = z[threadIdx.x] = 0; }
int main() {
  float *y, *z;
  cudaMalloc(&y, kN * sizeof(float));
  cudaMalloc(&z, kM * sizeof(float));
  k<<<1, 32>>>(y, z);
}
"""
    facts = static_launch(_kernel(source, "k"), source)
    assert facts is not None and facts.counts == {"z": "4"}, facts


ACCESSORS = """
#include <thrust/device_vector.h>
#include <vector>
__global__ void axpy(int n, float a, const float* x, float* y, double* w, void* raw) {
  int i = threadIdx.x + blockIdx.x * blockDim.x;
  if (i < n) { y[i] += a * x[i]; w[i] = y[i]; ((int*)raw)[i] = 0; }
}
int main() {
  int n = 1 << 16;
  thrust::device_vector<float> x(n);
  thrust::device_vector<float> y(n, 1.0f);
  std::vector<double> w(n);
  rmm::device_buffer<int> raw(2 * n, stream);
  axpy<<<(n + 255) / 256, 256>>>(
      n, 2.0f, thrust::raw_pointer_cast(x.data()), thrust::raw_pointer_cast(&y[0]), &w[0],
      raw.data());
}
"""


def test_accessor_forms_take_the_objects_extent_and_element_type() -> None:
    facts = static_launch(_kernel(ACCESSORS), ACCESSORS)
    assert facts is not None
    assert facts.counts == {"x": "n", "y": "n", "w": "n", "raw": "2 * n"}, facts
    assert facts.dtypes == {"raw": "int32"}, facts  # a void* parameter: the object's type
    block, _ = _parsed(ACCESSORS)
    assert 'args.x   = "in float32[n]"' in block, block
    assert 'int32[2 * n]"' in block and "review: void" not in block, block


def test_a_vectors_braces_are_values_and_an_unknown_objects_size_is_left_alone() -> None:
    source = """
__global__ void k(float* a, float* b, float* c, float* d, int n) { a[0] = b[0] = c[0] = d[0] = n; }
int main() {
  std::vector<float> a({4, 8});        // two values, not a 4 x 8 shape
  Widget b(64);                         // not a container we know: 64 what?
  std::vector<float> c{{3, 5}};
  int n = 8;
  std::vector<float> d(n);
  k<<<1, 1>>>(a.data(), b.data(), c.data(), d.data(), n);
}
"""
    facts = static_launch(_kernel(source), source)
    assert facts is not None and facts.counts == {"d": "n"}, facts


def test_a_factory_shape_and_a_converted_element_size() -> None:
    source = """
__global__ void k(float4* out, const float* in, int rows, int cols) {
  int i = threadIdx.x + blockIdx.x * blockDim.x;
  if (i < rows * cols / 4) out[i] = make_float4(in[i], 0, 0, 0);
}
void run(int rows, int cols) {
  auto in = torch::empty({rows, cols}, opts);
  thrust::device_vector<float> out(rows * cols);
  k<<<rows, cols / 4>>>((float4*)thrust::raw_pointer_cast(out.data()), in.data_ptr<float>(),
                        rows, cols);
  lib::Matrix<float> m{{rows, cols / 4}};
  k<<<rows, cols / 4>>>(reinterpret_cast<float4*>(m.data()), in.data_ptr<float>(), rows, cols);
}
"""
    facts = static_launch(_kernel(source), source)
    assert facts is not None
    assert facts.counts == {"out": "(rows * cols) / 4", "in": "rows * cols"}, facts
    second = source.replace("k<<<rows, cols / 4>>>((float4*)", "other((float4*)")
    facts = static_launch(_kernel(second), second)  # the second site: {{rows, cols / 4}}
    assert facts is not None and facts.counts["out"] == "(rows * (cols / 4)) / 4", facts


def test_a_container_in_the_launchers_caller() -> None:
    source = """
__global__ void k(float* y, int n) { int i = threadIdx.x; if (i < n) y[i] = 0; }
void launch(float* y, int n) { k<<<(n + 127) / 128, 128>>>(y, n); }
int main() {
  int count = 1000;
  thrust::device_vector<float> buf(count);
  launch(thrust::raw_pointer_cast(buf.data()), count);
}
"""
    facts = static_launch(_kernel(source), source)
    assert facts is not None and facts.counts == {"y": "n"}, facts


def test_a_local_assigned_again_is_no_value() -> None:
    """`size_t total = 0;` then `total = rows * cols;`: the allocation is not 0 elements."""
    source = """
__global__ void k(float* y, int rows, int cols) { y[blockIdx.x * cols + threadIdx.x] = 0; }
void run(int rows, int cols, bool big) {
  size_t total = 0;
  int blocks = 1;
  if (big) total = rows * cols;
  blocks++;
  float* y;
  cudaMalloc(&y, total * sizeof(float));
  k<<<blocks, cols>>>(y, rows, cols);
}
"""
    facts = static_launch(_kernel(source), source)
    assert facts is not None and facts.counts == {} and facts.grid is None, facts
    fixed = source.replace("if (big) total = rows * cols;", "")
    facts = static_launch(_kernel(fixed), fixed)
    assert facts is not None and facts.counts == {}, facts  # 0 elements: no extent
