"""Pointer roles inferred from the body: a pointer the kernel never writes is `in`.

The bandwidth `bench` reports counts an `inout` buffer twice, so a read-only `float* x` taken as
`inout` gave 119 % of the copy peak. The draft spec, the parsed spec and the bytes `bench`
divides by must agree.
"""

from __future__ import annotations

import pytest

from cuda_llm_lsp.evaluate.launch import bytes_moved
from cuda_llm_lsp.source.draft import draft_spec
from cuda_llm_lsp.source.kernels import find_kernels
from cuda_llm_lsp.source.roles import infer_roles, written_pointers
from cuda_llm_lsp.source.spec import parse_spec

SAXPY = """__global__ void saxpy(int n, float a, float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""


def test_saxpy_with_a_non_const_x_reads_x_only_in_the_draft_spec_and_the_bytes() -> None:
    (kernel,) = find_kernels(SAXPY)
    assert infer_roles(kernel, SAXPY) == {"x": "in", "y": "inout"}
    draft = draft_spec(kernel, SAXPY)
    assert 'args.x = "in float32[' in draft and 'args.y = "inout float32[' in draft
    source = draft + SAXPY
    (kernel,) = find_kernels(source)
    spec, problems = parse_spec(kernel, source)
    assert spec is not None and not [p for p in problems if p.severity == "error"], problems
    case = spec.cases()[-1]
    n = case.sizes["n"]
    assert bytes_moved(spec, case) == 3 * 4 * n  # x read, y read and written


@pytest.mark.parametrize(
    "statement",
    [
        "float v = p[i];",
        "float v = *(p + i) + p[i + 1];",
        "float v = __ldg(&p[i]) + __ldg(p + i);",
        "float4 v = ((float4*)p)[i];",
        "float v = p[i] > 0 ? p[i] : 0.f;",
        "if (p != nullptr && !p) return;",
        "float v = p[p2[i]];",
        "",  # never used: nothing writes it
    ],
)
def test_reading_through_a_pointer_does_not_write_it(statement: str) -> None:
    assert written_pointers("{ int i = 0; " + statement + " }", {"p", "p2"}) == set()


@pytest.mark.parametrize(
    "statement",
    [
        "p[i] = 1.f;",
        "*(p + i) = 1.f;",
        "p[i] += 1.f;",
        "p[i]++;",
        "--p[i];",
        "p[i].x = 1.f;",
        "p->x = 1.f;",
        "atomicAdd(&p[i], 1.f);",
        "atomicAdd(p + i, 1.f);",
        "helper(p);",  # passed on: may be written there
        "float* q = p; q[i] = 1.f;",  # aliased
        "((float4*)p)[i] = v;",
    ],
)
def test_any_write_or_escape_counts_as_written(statement: str) -> None:
    assert written_pointers("{ int i = 0; " + statement + " }", {"p"}) == {"p"}
