"""Signatures compared by ABI: spellings of one type accepted, real changes refused, a dropped
`extern "C"` restored (the symbol host code and loaders look up)."""

from __future__ import annotations

import pytest

from cuda_llm_lsp.evaluate.candidate import check_signature, splice
from cuda_llm_lsp.source.kernels import Kernel, find_kernels
from cuda_llm_lsp.source.signature import abi_type, restore_linkage, signature_problem

ORIGINAL = 'extern "C" __global__ void k(const float* x, float* y, int n) { }'


def kernel(text: str) -> Kernel:
    (found,) = find_kernels(text)
    return found


@pytest.mark.parametrize(
    ("written", "abi"),
    [
        ("const int", "int"),
        ("float const*", "const float*"),
        ("const float * __restrict__", "const float*"),
        ("float* const", "float*"),
        ("float const * const __restrict__", "const float*"),
        ("T const *", "const T*"),
        ("const float* const*", "const float* const*"),
        ("volatile int*", "volatile int*"),
    ],
)
def test_abi_type_has_one_spelling_per_type(written: str, abi: str) -> None:
    assert abi_type(written) == abi


@pytest.mark.parametrize(
    "candidate",
    [
        'extern "C" __global__ void k(float const* x, float* y, const int n) { }',
        'extern "C" __global__ void k(const float* __restrict__ x, float* const y, int n) { }',
        'extern "C" __global__ void __launch_bounds__(256) k(const float *x, float *y, int n) {}',
    ],
)
def test_abi_equal_signatures_are_accepted(candidate: str) -> None:
    assert signature_problem(kernel(ORIGINAL), kernel(candidate)) is None
    assert check_signature(kernel(ORIGINAL), kernel(candidate)) is None  # the judge's entry


@pytest.mark.parametrize(
    ("candidate", "says"),
    [
        ('extern "C" __global__ void k(float* x, float* y, int n) { }', "`const float* x`"),
        ('extern "C" __global__ void k(const float* x, float* y, long n) { }', "`int n`"),
        ('extern "C" __global__ void k(const float* x, float* y, int m) { }', "`int n`"),
        ('extern "C" __global__ void k(const float* x, float* y) { }', "3 parameters"),
    ],
)
def test_real_changes_are_refused(candidate: str, says: str) -> None:
    problem = signature_problem(kernel(ORIGINAL), kernel(candidate))
    assert problem is not None and says in problem


def test_added_extern_c_is_a_mismatch() -> None:
    original = kernel("__global__ void k(int n) { }")
    problem = signature_problem(original, kernel('extern "C" __global__ void k(int n) { }'))
    assert problem is not None and 'extern "C"' in problem


def test_dropped_extern_c_is_restored_where_the_candidate_is_spliced() -> None:
    candidate = (
        "__device__ float two() { return 2.0f; }\n"
        "__global__ void k(const float* x, float* y, int n) { }"
    )
    restored = restore_linkage(kernel(ORIGINAL), candidate)
    assert restored.endswith('\nextern "C" __global__ void k(const float* x, float* y, int n) { }')
    file_text = "// head\n" + ORIGINAL + "\n// tail\n"
    spliced = splice(file_text, kernel(file_text), candidate)
    (found,) = [k for k in find_kernels(spliced) if k.name == "k"]
    assert found.is_extern_c and spliced.startswith("// head\n") and spliced.endswith("// tail\n")
    assert restore_linkage(kernel("__global__ void k(int n) { }"), candidate) == candidate
