"""A candidate's `/* @cuda-llm launch */` block: parsed over the spec's size names only, checked on
every case, problems placed on the block's own lines; the spec above the kernel is never taken for
it, nor it for the spec."""

from __future__ import annotations

from cuda_llm_lsp.source.expr import parse_expr, to_c
from cuda_llm_lsp.source.kernels import Kernel, find_kernels
from cuda_llm_lsp.source.spec import TestSpec, parse_spec
from cuda_llm_lsp.source.spec.launch import LaunchConfig, parse_launch_block

ORIGINAL = """\
/* @cuda-llm
sizes.M = [1, 100, 4096]
sizes.N = [1, 33, 1024]
grid = "M"
block = 32
args.x = "in float32[M * N]"
args.y = "out float32[M]"
args.rows = "M"
args.cols = "N"
*/
__global__ void softmax(const float* x, float* y, int rows, int cols) { }
"""


def original_spec() -> TestSpec:
    (kernel,) = find_kernels(ORIGINAL)
    spec, errors = parse_spec(kernel, ORIGINAL)
    assert spec is not None, errors
    return spec


def candidate(block: str) -> tuple[Kernel, str]:
    text = (
        "__device__ float warp_max(float v) { return v; }\n"
        + block
        + "\n__global__ void softmax(const float* x, float* y, int rows, int cols) { }\n"
    )
    (kernel,) = [k for k in find_kernels(text) if k.name == "softmax"]
    return kernel, text


def parse(block: str) -> tuple[LaunchConfig | None, list[str], list[tuple[int, int]]]:
    kernel, text = candidate(block)
    config, errors = parse_launch_block(kernel, original_spec(), text)
    return (
        config,
        [e.message for e in errors],
        [(e.span.start.line, e.span.start.column) for e in errors],
    )


def test_a_full_block_is_read() -> None:
    config, errors, _ = parse(
        '/* @cuda-llm launch\ngrid = ["M", 1]\nblock = 256\nsmem = "8 * 4"\n*/'
    )
    assert errors == []
    assert config == LaunchConfig(("M", "1"), ("256",), "8 * 4")
    assert config.describe() == "grid=[M, 1] block=256 smem=8 * 4"


def test_keys_left_out_keep_the_original() -> None:
    config, errors, _ = parse("/* @cuda-llm launch\nblock = 128\n*/")
    assert errors == [] and config == LaunchConfig(("M",), ("128",), "0")


def test_no_block_means_the_original_launch() -> None:
    kernel, text = candidate("")
    assert parse_launch_block(kernel, original_spec(), text) == (None, [])


def test_an_unknown_name_is_placed_on_its_token() -> None:
    config, errors, where = parse('/* @cuda-llm launch\ngrid = "cdiv(rows, 4)"\n*/')
    assert config is None
    assert errors == ["grid[0]: unknown name 'rows' in 'cdiv(rows, 4)' (sizes: M, N)"]
    assert where == [(2, 13)]  # line 2 of the candidate, the `rows` token


def test_limits_are_checked_per_case() -> None:
    _, errors, _ = parse("/* @cuda-llm launch\nblock = 2048\n*/")
    assert errors == ["block = '2048' is 2048 in case 0 (M=1, N=1); the limit for axis x is 1024"]
    _, errors, _ = parse('/* @cuda-llm launch\ngrid = "M / 64"\n*/')
    assert errors == [
        "grid = 'M / 64' is 0 in case 0 (M=1, N=1); every dimension must be at least 1"
    ]


def test_only_launch_keys_and_not_empty() -> None:
    _, errors, where = parse("/* @cuda-llm launch\nblock = 64\nsizes.M = [1]\n*/")
    assert len(errors) == 1 and errors[0].startswith("unknown key 'sizes' in the launch block")
    assert where == [(3, 0)]
    _, errors, _ = parse("/* @cuda-llm launch\n*/")
    assert errors == ["the launch block gives none of grid, block, smem"]
    _, errors, _ = parse("/* @cuda-llm launch\ngrid = [\n*/")
    assert len(errors) == 1 and errors[0].startswith("TOML syntax error")


def test_spec_and_launch_block_are_told_apart() -> None:
    text = ORIGINAL.replace("*/\n__global__", "*/\n/* @cuda-llm launch\nblock = 64\n*/\n__global__")
    (kernel,) = find_kernels(text)
    assert kernel.spec is not None and "sizes.M" in kernel.spec.toml
    assert kernel.launch_block is not None and kernel.launch_block.toml.strip() == "block = 64"
    assert find_kernels(ORIGINAL)[0].launch_block is None


def test_expressions_become_c_in_the_site_s_terms() -> None:
    names = {"M": "rows", "N": "s.cols", "K": "a + b"}
    assert to_c(parse_expr("cdiv(M, 64)"), names) == "(rows + 63) / 64"
    assert to_c(parse_expr("cdiv(K, N)"), names) == "((a + b) + s.cols - 1) / s.cols"
    assert to_c(parse_expr("M - (N + 1)"), names) == "rows - (s.cols + 1)"
    assert to_c(parse_expr("min(M, 4) * 2"), names) == "(rows < 4 ? rows : 4) * 2"
    assert to_c(parse_expr("-(M / N)"), names) == "-(rows / s.cols)"
