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
