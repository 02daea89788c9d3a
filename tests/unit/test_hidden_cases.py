"""Hidden generalisation cases derived from a spec (issue [integrity] 6), the `generalize` and
`align` keys, and where an `inputs` hook may live (issue [integrity] 9)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from cuda_llm_lsp.evaluate.inputs import InputError, make_inputs
from cuda_llm_lsp.source.kernels import find_kernels
from cuda_llm_lsp.source.spec import SpecError, TestSpec, parse_spec
from cuda_llm_lsp.source.spec.hidden import buffer_bytes, hidden_cases
from cuda_llm_lsp.source.spec.hook import resolve_hook

VADD = """\
extern "C" __global__ void vadd(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
"""
VEC4 = """\
extern "C" __global__ void copy4(const float4* a, float4* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i];
}
"""
TRANSPOSE = """\
extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols, const int* idx) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < rows * cols) out[i] = in[idx[i]];
}
"""  # noqa: E501
VADD_SPEC = """\
sizes.n = [1, 17, 1000, 65536]
grid = "cdiv(n, 256)"
block = 256
args.a = "float32[n]"
args.b = "float32[n]"
args.c = "out float32[n]"
args.n = "n"
"""


def parse(body: str, kernel: str = VADD) -> tuple[TestSpec | None, list[SpecError], str]:
    source = "/* @cuda-llm\n" + body + "*/\n" + kernel
    spec, errors = parse_spec(find_kernels(source)[0], source)
    return spec, errors, source


def spec_of(body: str, kernel: str = VADD) -> TestSpec:
    spec, errors, _ = parse(body, kernel)
    assert spec is not None, errors
    return spec


def test_sizes_around_the_spec_ranges_and_an_offset_case_are_derived() -> None:
    spec = spec_of(VADD_SPEC)
    hidden = hidden_cases(spec, seed=1)
    kinds = [h.kind for h in hidden]
    assert kinds.count("size") >= 4 and kinds.count("range") == 3 and kinds.count("offset") == 1
    sizes = [h.case.sizes["n"] for h in hidden if h.kind == "size"]
    assert {65535, 65537} <= set(sizes)
    assert not set(sizes) & {1, 17, 1000, 65536}  # never a case the prompt shows
    by_size = {h.case.sizes["n"]: h.case for h in hidden if h.kind == "size"}
    assert by_size[65537].grid == (257, 1, 1) and by_size[65537].counts["a"] == 65537
    assert [h.case.index for h in hidden] == list(range(4, 4 + len(hidden)))
    ranges = {h.what: h.init for h in hidden if h.kind == "range"}
    assert set(next(iter(ranges.values()))) == {"a", "b"}  # inputs only, never the output
    zeros = next(v for k, v in ranges.items() if "zero" in k)
    assert zeros["a"].kind == "zeros"
    large = next(v for k, v in ranges.items() if "large" in k)
    assert large["a"].b >= 1000  # beyond init's uniform(-1, 1)
    offset = next(h for h in hidden if h.kind == "offset")
    assert offset.offsets == {"a": 4, "b": 4, "c": 4}


def test_the_same_seed_gives_the_same_cases_and_another_seed_other_tails() -> None:
    spec = spec_of(VADD_SPEC)
    assert hidden_cases(spec, seed=5) == hidden_cases(spec, seed=5)
    tails = {tuple(h.what for h in hidden_cases(spec, seed=s)) for s in range(8)}
    assert len(tails) > 1


def test_generalize_false_keeps_the_listed_sizes_only() -> None:
    spec = spec_of(VADD_SPEC + "generalize = false\n")
    assert spec.generalize is False
    assert {h.kind for h in hidden_cases(spec, seed=1)} == {"range", "offset"}


def test_align_16_means_no_offset_buffers_and_align_8_offsets_by_8() -> None:
    assert "offset" not in {h.kind for h in hidden_cases(spec_of(VADD_SPEC + "align = 16\n"), 1)}
    eight = hidden_cases(spec_of(VADD_SPEC + "align = 8\n"), 1)
    assert next(h for h in eight if h.kind == "offset").offsets == {"a": 8, "b": 8, "c": 8}


def test_vector_pointers_keep_their_natural_alignment() -> None:
    spec = spec_of(
        'sizes.n = [1, 100]\ngrid = "cdiv(n, 128)"\nblock = 128\nargs.a = "float32[n * 4]"\n'
        'args.c = "out float32[n * 4]"\nargs.n = "n"\n',
        VEC4,
    )
    assert "offset" not in {h.kind for h in hidden_cases(spec, 1)}  # float4: 16 B, offset 16 = none


def test_equal_sizes_move_together_and_integer_inputs_keep_their_init() -> None:
    spec = spec_of(
        "sizes.rows = [4, 64]\nsizes.cols = [4, 64]\n"
        'grid = "cdiv(rows * cols, 256)"\nblock = 256\nargs.in = "float32[rows * cols]"\n'
        'args.out = "out float32[rows * cols]"\nargs.rows = "rows"\nargs.cols = "cols"\n'
        'args.idx = "int32[rows * cols]"\ninit.idx = "randint(0, 15)"\n',
        TRANSPOSE,
    )
    hidden = hidden_cases(spec, 3)
    assert all(h.case.sizes["rows"] == h.case.sizes["cols"] for h in hidden)
    assert all("idx" not in h.init for h in hidden if h.kind == "range")


def test_the_memory_budget_bounds_every_case() -> None:
    spec = spec_of(VADD_SPEC)
    budget = 3 * 4 * 2000  # room for n ~ 2000
    hidden = hidden_cases(spec, 1, budget_bytes=budget)
    assert hidden and all(buffer_bytes(spec, h.case) <= budget for h in hidden)
    assert max(h.case.sizes["n"] for h in hidden) < 2000
    assert hidden_cases(spec, 1, budget_bytes=4) == []  # not even n = 1 fits


def test_an_inputs_hook_gets_no_range_cases() -> None:
    spec = spec_of(VADD_SPEC + 'inputs = "gen.py:make"\n')
    assert "range" not in {h.kind for h in hidden_cases(spec, 1)}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('generalize = "no"', "generalize must be true or false"),
        ("align = 12", "align must be a power of two"),
        ("align = true", "align must be a power of two"),
        ("align = 512", "align must be a power of two"),
        ('inputs = "../gen.py:make"', "inputs: the hook file must stay inside"),
        ('inputs = "/etc/gen.py:make"', "inputs: the hook file must be a path relative"),
    ],
)
def test_bad_keys_are_errors_at_their_line(line: str, message: str) -> None:
    spec, errors, source = parse(VADD_SPEC + line + "\n")
    assert spec is None
    error = next(e for e in errors if message in e.message)
    assert source.split("\n")[error.span.start.line] == line


def test_a_hook_resolves_only_inside_the_files_tree(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "evil.py").write_text("def make(sizes, rng):\n    raise SystemExit(3)\n")
    project = tmp_path / "project"
    (project / "gen").mkdir(parents=True)
    (project / "gen" / "ok.py").write_text(
        "import numpy as np\n\ndef make(sizes, rng):\n"
        "    return {'a': np.ones(sizes['n'], np.float32)}\n"
    )
    os.symlink(outside / "evil.py", project / "gen" / "link.py")
    assert resolve_hook("gen/ok.py", project) == (project / "gen" / "ok.py").resolve()
    assert "outside" in str(resolve_hook("gen/link.py", project))
    assert "'..'" in str(resolve_hook("../outside/evil.py", project))

    linked = spec_of(VADD_SPEC + 'inputs = "gen/link.py:make"\n')
    case = linked.cases()[0]
    with pytest.raises(InputError, match="outside"):
        make_inputs(linked, case, np.random.default_rng(0), project)
    fine = spec_of(VADD_SPEC + 'inputs = "gen/ok.py:make"\n')
    arrays = make_inputs(fine, fine.cases()[0], np.random.default_rng(0), project)
    assert arrays["a"].tolist() == [1.0]


TILED = """\
extern "C" __global__ void tr(const float* inp, float* out, int rows, int cols) {
  int c = blockIdx.x * 32 + threadIdx.x, r = blockIdx.y * 32 + threadIdx.y;
  if (r < rows && c < cols) out[c * rows + r] = inp[r * cols + c];
}
"""
TRANSPOSE_SPEC = """\
sizes.rows = [1, 17, 1000]
sizes.cols = [1, 33, 999]
grid = ["cdiv(cols, 32)", "cdiv(rows, 32)"]
block = [32, 32]
args.inp = "float32[rows * cols]"
args.out = "out float32[rows * cols]"
args.rows = "rows"
args.cols = "cols"
"""


def test_one_size_at_a_multiple_of_32_while_the_other_keeps_its_tail() -> None:
    """A transpose that skips its bounds checks whenever `cols % 32 == 0` passed every case
    derived from 1000 x 999: none had one round dimension and one ragged (found by
    benchmarks/adversarial/transpose/03)."""
    spec = spec_of(TRANSPOSE_SPEC, TILED)
    sizes = [h.case.sizes for h in hidden_cases(spec, seed=3) if h.kind == "size"]
    assert {"rows": 1000, "cols": 1024} in sizes
    assert {"rows": 1024, "cols": 999} in sizes


def test_the_offset_case_runs_at_round_sizes_where_vector_paths_are_taken() -> None:
    """`float4` loads that assume a 16-byte aligned base only run when a row is a multiple of 4;
    at 1000 x 999 they never did (benchmarks/adversarial/transpose/04)."""
    spec = spec_of(TRANSPOSE_SPEC, TILED)
    (offset,) = [h for h in hidden_cases(spec, seed=3) if h.kind == "offset"]
    assert offset.case.sizes == {"rows": 1024, "cols": 1024}
    assert offset.offsets == {"inp": 4, "out": 4}


def test_large_magnitudes_scale_atol_with_the_square_of_the_input_scale() -> None:
    """A matmul whose sums are reordered honestly (shared atomics) moved a near-zero result by 52
    at inputs of +-1000 (terms of 1e6) against the spec's atol of 1e-4, and was rejected as
    wrong_output on the H100 (benchmarks/adversarial/matmul/04): atol must grow with the terms."""
    spec = spec_of(VADD_SPEC)
    by_what = {h.what: h for h in hidden_cases(spec, seed=1) if h.kind == "range"}
    large = next(h for what, h in by_what.items() if "large magnitude" in what)
    assert large.atol_scale == 1000.0**2
    assert all(h.atol_scale == 1.0 for h in by_what.values() if h is not large)
