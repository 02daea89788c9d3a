"""Exotic values become a diagnostic or a reported bad setting, never an exception (issue 20).

`grid = "cdiv(1e308 * 10, 1)"` raised OverflowError and its NaN twin ValueError, a TOML block
nested 5,000 deep raised RecursionError inside tomllib, a spec of 10^6 sizes took 12 s, and
`"rounds": 1e400` in `initializationOptions` made `initialize` fail.
"""

from __future__ import annotations

import math
import time

import pytest

from cuda_llm_lsp.config import Settings, settings_from_mapping
from cuda_llm_lsp.source.expr import ExprError, evaluate
from cuda_llm_lsp.source.kernels import find_kernels
from cuda_llm_lsp.source.spec import parse_spec
from cuda_llm_lsp.source.spec.parse import MAX_CASES
from tests.support.load import slack

SPEC = """/* @cuda-llm
sizes.n = {sizes}
grid = {grid}
block = 256
args.x = "float32[n]"
args.n = "n"
{extra}*/
extern "C" __global__ void k(float* x, int n) {{ if (n) x[0] = 0; }}
"""


def problems_of(grid: str = "1", sizes: str = "[1, 1024]", extra: str = "") -> list:
    source = SPEC.format(grid=grid, sizes=sizes, extra=extra)
    (kernel,) = find_kernels(source)
    spec, problems = parse_spec(kernel, source)
    assert spec is None or not any(p.severity == "error" for p in problems)
    return problems


@pytest.mark.parametrize(
    ("text", "column", "fragment"),
    [
        ("cdiv(1e308 * 10, 1)", 11, "overflows to infinity"),
        ("cdiv(1e308*10 - 1e308*10, 1)", 10, "overflows to infinity"),
        ("1e400", 0, "overflows to infinity"),
        ("-1e308 * 10", 7, "overflows to infinity"),
        (" * ".join(["9" * 39] * 9) + " * 0.5", 376, "too large for a floating-point number"),
        ("9" * 5000, 0, "too large"),
    ],
)
def test_non_finite_values_are_expression_errors(text: str, column: int, fragment: str) -> None:
    with pytest.raises(ExprError) as caught:
        evaluate(text, {})
    assert fragment in caught.value.message and caught.value.column == column


def test_large_finite_values_still_evaluate() -> None:
    assert evaluate("cdiv(1e300, 1)", {}) == math.ceil(1e300)
    assert evaluate("n * n * n", {"n": 10**12}) == 10**36


@pytest.mark.parametrize(
    "grid", ['"cdiv(1e308 * 10, 1)"', '"cdiv(1e308*10 - 1e308*10, 1)"', '"n * 1e400"', "1e400"]
)
def test_overflowing_specs_are_diagnostics_on_the_grid_line(grid: str) -> None:
    (problem,) = problems_of(grid=grid)
    assert problem.span.start.line == 2
    assert "overflows" in problem.message or "beyond the range" in problem.message


def test_deep_toml_is_a_diagnostic_at_its_line_not_a_recursion_error() -> None:
    (problem,) = problems_of(extra="a = " + "[" * 5000 + "]" * 5000 + "\n")
    assert problem.span.start.line == 6 and "nests" in problem.message


def test_moderate_nesting_is_still_read() -> None:
    problems = problems_of(extra="inputs = 'in.py:f'\n[init]\nx = 'uniform(0, 1)'\n")
    assert all("nests" not in p.message for p in problems)


def test_a_million_sizes_are_refused_fast_with_the_limit() -> None:
    started = time.monotonic()
    (problem,) = problems_of(sizes="[" + ", ".join(["4"] * 10**6) + "]")
    assert time.monotonic() - started < 1.0 * slack()
    assert problem.span.start.line == 0 and "kB limit" in problem.message


def test_more_cases_than_the_limit_are_refused_on_the_size_line() -> None:
    (problem,) = problems_of(sizes="[" + ", ".join(["4"] * (MAX_CASES + 1)) + "]")
    assert problem.span.start.line == 1 and f"at most {MAX_CASES} cases" in problem.message
    assert problems_of(sizes="[" + ", ".join(["4"] * MAX_CASES) + "]") == []


BAD_NUMBERS = [math.inf, -math.inf, math.nan, 1e30, 10**30, -3, 2.5, True, "4", [4], {"n": 4}]


@pytest.mark.parametrize("key", ["rounds", "candidates", "debounceMs", "maxTokens"])
@pytest.mark.parametrize("value", BAD_NUMBERS, ids=repr)
def test_every_bad_number_setting_is_reported_and_the_default_kept(key: str, value: object) -> None:
    settings, problems = settings_from_mapping({"cudaLlm": {key: value}})
    assert settings == Settings()
    assert len(problems) == 1 and f"cudaLlm.{key}" in problems[0] and "default" in problems[0]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("model", {"a": 1}),
        ("model", "x" * 100_000),
        ("arch", 90),
        ("baseUrl", ["http://x"]),
        ("defines", [1]),
        ("includePaths", ["p"] * 10_000),
        ("nvrtcFlags", {"-O3": True}),
        ("temperature", math.nan),
        ("temperature", math.inf),
    ],
)
def test_bad_values_of_other_types_are_reported_briefly(key: str, value: object) -> None:
    settings, problems = settings_from_mapping({"cudaLlm": {key: value}})
    assert settings == Settings()
    assert len(problems) == 1 and f"cudaLlm.{key}" in problems[0]
    assert len(problems[0]) < 400  # a megabyte value is not echoed


def test_whole_floats_are_accepted_for_counts() -> None:
    settings, problems = settings_from_mapping({"cudaLlm": {"rounds": 3.0}})
    assert settings.rounds == 3 and problems == []
