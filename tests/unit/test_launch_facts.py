"""Static drafts from the file itself (issue 39, item 3): a training-kernels file with a
launcher per kernel and a main that allocates every buffer; the draft takes the launch (grid,
block, smem), the element types through `typedef` and the extents from the `cudaMalloc`s."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_llm_lsp.source.draft import draft_spec
from cuda_llm_lsp.source.kernels import Kernel, find_kernels
from cuda_llm_lsp.source.launch_facts import static_launch
from cuda_llm_lsp.source.spec import parse_spec

DATA = Path(__file__).resolve().parents[1] / "data" / "training_kernels.cu"
SOURCE = DATA.read_text()


def _kernel(name: str, source: str = SOURCE) -> Kernel:
    return next(k for k in find_kernels(source) if k.name == name)


def _drafted(name: str):  # type: ignore[no-untyped-def]
    kernel = _kernel(name)
    block = draft_spec(kernel, SOURCE)
    start = SOURCE.index(SOURCE[kernel_offset(kernel) :].split("\n")[0])
    text = SOURCE[:start] + block + SOURCE[start:]
    spec, errors = parse_spec(_kernel(name, text), text)
    assert spec is not None, (block, errors)
    assert not [e for e in errors if e.severity == "error"], errors
    return block, spec


def kernel_offset(kernel: Kernel) -> int:
    lines = SOURCE.splitlines(keepends=True)
    return sum(len(line) for line in lines[: kernel.span.start.line])


def test_launch_and_extents_in_the_kernels_terms() -> None:
    facts = static_launch(_kernel("layernorm_forward_kernel"), SOURCE)
    assert facts is not None
    assert facts.grid == ("cdiv(N * 32, 512)",) and facts.block == ("512",)
    # out = cudaMalloc(B * T * C * sizeof(floatX)) in main, passed through the launcher, whose
    # N is B * T: in the kernel's terms N * C
    assert facts.counts == {
        "out": "N * C", "mean": "N", "rstd": "N", "inp": "N * C", "weight": "C", "bias": "C",
    }  # fmt: skip
    matmul = static_launch(_kernel("matmul_bias_kernel"), SOURCE)
    assert matmul is not None
    assert matmul.grid == ("cdiv(OC, 16)", "cdiv(BT, 16)") and matmul.block == ("16", "16")
    assert matmul.counts["weight"] == "OC * C" and matmul.counts["out"] == "BT * OC"
    softmax = static_launch(_kernel("softmax_forward_kernel"), SOURCE)
    assert softmax is not None and softmax.grid == ("N",) and softmax.smem == "2 * 256 / 32 * 4"
    residual = static_launch(_kernel("residual_forward_kernel"), SOURCE)
    assert residual is not None and residual.counts == {"out": "N", "inp1": "N", "inp2": "N"}


def test_layernorm_draft_is_right_as_printed() -> None:
    block, spec = _drafted("layernorm_forward_kernel")
    assert 'grid = "cdiv(N * 32, 512)"' in block and "block = 512" in block, block
    assert spec.arg("out").dtype == "bfloat16"  # typedef __nv_bfloat16 floatX
    counts = {a.name: a.count for a in spec.args if a.is_pointer}
    assert counts == {
        "out": "N * C", "mean": "N", "rstd": "N", "inp": "N * C", "weight": "C", "bias": "C",
    }  # fmt: skip
    assert spec.arg("mean").role == "out" and spec.arg("inp").role == "in"
    assert "counts assume" not in block.lower() and "1-D launch" not in block


def test_softmax_draft_has_the_sites_shared_memory() -> None:
    block, spec = _drafted("softmax_forward_kernel")
    assert 'smem = "2 * 256 / 32 * 4"' in block
    assert spec.cases()[-1].smem == 64 and spec.cases()[-1].block == (256, 1, 1)
    assert spec.cases()[-1].grid[0] == spec.cases()[-1].sizes["N"]


@pytest.mark.parametrize(
    "name",
    ["encoder_forward_kernel", "matmul_bias_kernel", "residual_forward_kernel"],
)
def test_every_draft_of_the_file_parses_with_the_files_launch(name: str) -> None:
    block, _ = _drafted(name)
    assert "# Launch as the file launches it" in block


def test_no_site_keeps_the_guess() -> None:
    source = "__global__ void k(float* y, int n) { y[threadIdx.x] = n; }\n"
    assert static_launch(find_kernels(source)[0], source) is None
    assert "Launch as the file" not in draft_spec(find_kernels(source)[0], source)


WRONG_SPEC = """/* @cuda-llm
sizes.N = [1, 17, 4096]
sizes.C = [32, 64, 768]
grid = "cdiv(N, 256)"
block = 1024
args.out = "bfloat16[N * C]"
args.mean = "float32[N]"
args.rstd = "float32[N]"
args.inp = "bfloat16[N * C]"
args.weight = "bfloat16[C]"
args.bias = "bfloat16[C]"
args.N = "N"
args.C = "C"
*/
"""


def test_check_warns_when_a_spec_is_not_the_files_launch(tmp_path: Path) -> None:
    """The issue's user: a draft launching 1/32 of the warps, with a block over the kernel's
    `__launch_bounds__`; `check` said nothing. Now: a warning at each line, exit unchanged."""
    import subprocess
    import sys

    kernel = _kernel("layernorm_forward_kernel")
    at = kernel_offset(kernel)
    text = SOURCE[:at] + WRONG_SPEC + SOURCE[at:]
    spec, errors = parse_spec(_kernel("layernorm_forward_kernel", text), text)
    assert spec is not None, errors
    from cuda_llm_lsp.source.launch_facts import launch_disagreements

    found = launch_disagreements(_kernel("layernorm_forward_kernel", text), spec, text)
    messages = " | ".join(w.message for w in found)
    assert "__launch_bounds__(512)" in messages and "1024 threads" in messages, messages
    assert "grid (16, 1, 1)" in messages and "grid (256, 1, 1)" in messages, messages
    assert all(w.severity == "warning" for w in found)
    lines = {w.span.start.line for w in found}
    spec_line = text[:at].count("\n")
    assert lines == {spec_line + 3, spec_line + 4}, (lines, spec_line)  # grid and block lines
    right = _drafted("layernorm_forward_kernel")[1]
    assert launch_disagreements(_kernel("layernorm_forward_kernel"), right, SOURCE) == []
    f = tmp_path / "train.cu"
    f.write_text(text)
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-m", "cuda_llm_lsp.cli", "check", str(f)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=root,
    )
    assert f"{f}:{spec_line + 4}:1: warning: grid (16, 1, 1)" in out.stdout, out.stdout
    assert "__launch_bounds__(512)" in out.stdout


# CUTLASS's basic_gemm example: the launch reads its block's components (`block.x`) and passes a
# seed that sizes nothing.
SQUARE = """
__global__ void syrk(int N, int K, const float* A, float* C) {
  int i = threadIdx.x + blockIdx.x * blockDim.x, j = threadIdx.y + blockIdx.y * blockDim.y;
  if (i >= N || j >= N) return;
  float s = 0;
  for (int k = 0; k < K; ++k) s += A[i + k * N];
  C[i + j * N] = s;
}
void run(int N, int K, const float* A, float* C) {
  dim3 block(16, 16);
  dim3 grid((N + block.x - 1) / block.x, (N + block.y - 1) / block.y);
  syrk<<<grid, block>>>(N, K, A, C);
}
"""
INITIALIZE = """
__global__ void InitializeMatrix_kernel(float *matrix, int rows, int columns, int seed = 0) {
  int i = threadIdx.x + blockIdx.x * blockDim.x;
  int j = threadIdx.y + blockIdx.y * blockDim.y;
  if (i < rows && j < columns) matrix[i + j * rows] = float(seed);
}

cudaError_t InitializeMatrix(float *matrix, int rows, int columns, int seed = 0) {
  dim3 block(16, 16);
  dim3 grid(
    (rows + block.x - 1) / block.x,
    (columns + block.y - 1) / block.y
  );
  InitializeMatrix_kernel<<< grid, block >>>(matrix, rows, columns, seed);
  return cudaGetLastError();
}
"""


def test_a_grid_over_the_blocks_components_is_the_files_launch() -> None:
    from cuda_llm_lsp.source.spec import parse_spec

    (kernel,) = find_kernels(INITIALIZE)
    draft = draft_spec(kernel, INITIALIZE)
    assert 'grid = ["(rows + (16) - 1) / (16)", "(columns + (16) - 1) / (16)"]' in draft, draft
    assert "block = [16, 16]" in draft, draft
    # one element per launched (rows, columns) point: the seed, launching nothing, no factor
    assert 'args.matrix  = "out float32[rows * columns]"' in draft, draft
    assert "counts assume" not in draft, draft
    text = draft + INITIALIZE
    spec, errors = parse_spec(find_kernels(text)[0], text)
    assert spec is not None, errors
    case = spec.cases()[-1]
    rows, columns = case.sizes["rows"], case.sizes["columns"]
    assert case.grid == (-(-rows // 16), -(-columns // 16), 1) and case.block == (16, 16, 1)


def test_a_draft_keys_an_unnamed_parameter_by_its_position() -> None:
    from cuda_llm_lsp.source.spec import parse_spec

    source = "__global__ void k(float* y, int n, int) { if (threadIdx.x < n) y[0] = 1; }\n"
    (kernel,) = find_kernels(source)
    draft = draft_spec(kernel, source)
    assert 'args.2 = "1"' in draft and "sizes.2" not in draft, draft
    text = draft + source
    spec, errors = parse_spec(find_kernels(text)[0], text)
    assert spec is not None, errors


def test_a_square_launch_counts_a_point_per_element_of_both_dimensions() -> None:
    (kernel,) = find_kernels(SQUARE)
    draft = draft_spec(kernel, SQUARE)
    assert 'args.C = "out float32[N * N]"' in draft, draft
    assert 'args.K = "K"' in draft, draft  # a loop bound stays a size


# A reference GEMM in the style of a library's basic example: a host launcher that launches the
# kernel with its own parameters, called by a test function whose leading dimensions are
# locals over the problem size (one padded, one from a helper the draft cannot evaluate).
LEADING = """
__global__ void naive_gemm_kernel(int M, int N, int K, float alpha, float const *A, int lda,
                                  float const *B, int ldb, float *C, int ldc, int ldd) {
  int i = threadIdx.x + blockIdx.x * blockDim.x;
  int j = threadIdx.y + blockIdx.y * blockDim.y;
  if (i < M && j < N) {
    float acc = 0;
    for (int k = 0; k < K; ++k) acc += A[i + k * lda] * B[k + j * ldb];
    C[i + j * ldc] = alpha * acc + C[i + j * ldd] * 0;
  }
}

cudaError_t NaiveGemm(int M, int N, int K, float alpha, float const *A, int lda,
                      float const *B, int ldb, float *C, int ldc, int ldd) {
  dim3 block(16, 16);
  dim3 grid((M + block.x - 1) / block.x, (N + block.y - 1) / block.y);
  naive_gemm_kernel<<< grid, block >>>(M, N, K, alpha, A, lda, B, ldb, C, ldc, ldd);
  return cudaGetLastError();
}

int padded_ld(int rows);

cudaError_t RunGemm(int M, int N, int K) {
  int lda = M;
  int ldb = K;
  int ldc = M + 8;
  int ldd = padded_ld(M);
  float *A, *B, *C;
  cudaMalloc(&A, sizeof(float) * M * K);
  cudaMalloc(&B, sizeof(float) * K * N);
  cudaMalloc(&C, sizeof(float) * (M + 8) * N);
  return NaiveGemm(M, N, K, 1.0f, A, lda, B, ldb, C, ldc, ldd);
}
"""

# A 2-D kernel whose row pitch the site passes directly: once the width, once a literal, once
# a call's result.
PITCHED = """
#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))

__global__ void blur_rows(float *out, const float *in, int rows, int cols, int pitch) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < cols && y < rows) out[y * pitch + x] = in[y * pitch + x];
}

void launch(float *out, const float *in, int rows, int cols) {
  dim3 block(16, 16);
  dim3 grid(CEIL_DIV(cols, 16), CEIL_DIV(rows, 16));
  blur_rows<<<grid, block>>>(out, in, rows, cols, PITCH_ARG);
}
"""


def _drafted_from(source: str, name: str) -> str:
    """The kernel's draft, checked to parse without errors where it is written."""
    kernel = _kernel(name, source)
    block = draft_spec(kernel, source)
    lines = source.splitlines(keepends=True)
    at = sum(len(line) for line in lines[: kernel.span.start.line])
    text = source[:at] + block + source[at:]
    spec, errors = parse_spec(_kernel(name, text), text)
    assert spec is not None, (block, errors)
    assert not [e for e in errors if e.severity == "error"], (block, errors)
    return block


def test_leading_dimensions_are_what_the_launchers_caller_passes() -> None:
    facts = static_launch(_kernel("naive_gemm_kernel", LEADING), LEADING)
    assert facts is not None
    assert facts.scalars["lda"] == "M" and facts.scalars["ldb"] == "K"
    assert facts.scalars["ldc"] == "M + 8"
    assert "ldd" not in facts.scalars and facts.passed["ldd"] == "padded_ld(M)"
    block = _drafted_from(LEADING, "naive_gemm_kernel")
    assert 'args.lda   = "M"\n' in block and 'args.ldb   = "K"\n' in block
    assert 'args.ldc   = "M + 8"\n' in block
    # what does not resolve keeps the guess, but says what the program passes
    assert (
        'args.ldd   = "1"  # review: the file passes padded_ld(M), which this draft cannot '
        "express\n" in block
    ), block


@pytest.mark.parametrize(
    ("passed", "line"),
    [
        ("cols", 'args.pitch = "cols"\n'),
        ("64", 'args.pitch = "64"\n'),
        ("(2 * 32)", 'args.pitch = "64"\n'),
        (
            "stride_of(cols)",
            'args.pitch = "1"  # review: the file passes stride_of(cols), which this draft '
            "cannot express\n",
        ),
    ],
)
def test_a_scalar_the_site_passes(passed: str, line: str) -> None:
    source = PITCHED.replace("PITCH_ARG", passed)
    block = _drafted_from(source, "blur_rows")
    assert line in block, block
    # the width passed twice is still the grid's `cols`, not the pitch's name
    assert 'grid = ["cdiv(cols, 16)", "cdiv(rows, 16)"]' in block, block


def test_a_scalar_passed_one_as_the_file_says_one_has_no_comment() -> None:
    block = _drafted_from(PITCHED.replace("PITCH_ARG", "1"), "blur_rows")
    assert 'args.pitch = "1"\n' in block, block
