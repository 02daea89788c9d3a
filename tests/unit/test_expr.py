"""The size-expression language of test specs: parsing, evaluation, errors with columns."""

from __future__ import annotations

import pytest

from cuda_llm_lsp.source.expr import ExprError, cdiv, evaluate, parse_expr

ENV = {"n": 1000, "rows": 17, "cols": 33, "k": 4, "alpha": 0.5}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("42", 42),
        ("1_048_576", 1048576),
        ("n", 1000),
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("rows * cols", 561),
        ("n - 1 - 1", 998),  # left associative
        ("n / 10 / 10", 10),
        ("-n", -1000),
        ("--3", 3),
        ("+3", 3),
        ("2 * -3", -6),
        ("n % 7", 1000 % 7),
        ("cdiv(n, 256)", 4),
        ("cdiv(1, 256)", 1),
        ("cdiv(256, 256)", 1),
        ("cdiv(0, 256)", 0),
        ("min(rows, cols)", 17),
        ("max(rows, cols, 100)", 100),
        ("min(7)", 7),
        ("cdiv(cols, 16) * 16", 48),
        ("max(1, cdiv(rows * cols, 4 * k))", cdiv(561, 16)),
        ("0.5", 0.5),
        ("1e-3", 0.001),
        (".25", 0.25),
        ("2.5e+2", 250.0),
        ("alpha * 4", 2.0),
        ("n / 4.0", 250.0),
    ],
)
def test_evaluates(text: str, value: int | float) -> None:
    result = parse_expr(text).evaluate(ENV)
    assert result == value
    assert type(result) is type(value)


def test_integer_division_truncates_toward_zero_like_c() -> None:
    assert evaluate("7 / 2", {}) == 3
    assert evaluate("-7 / 2", {}) == -3  # Python's // would give -4
    assert evaluate("7 / -2", {}) == -3
    assert evaluate("-7 % 2", {}) == -1  # sign of the dividend, as in C
    assert evaluate("7 % -2", {}) == 1
    assert evaluate("7.0 / 2", {}) == 3.5


def test_cdiv_is_the_ceiling() -> None:
    assert [evaluate(f"cdiv({a}, 4)", {}) for a in (0, 1, 4, 5, 8, 9)] == [0, 1, 1, 2, 2, 3]
    assert evaluate("cdiv(-5, 4)", {}) == -1


def test_names() -> None:
    assert parse_expr("cdiv(rows * cols, 16) + max(k, 2)").names() == {"rows", "cols", "k"}
    assert parse_expr("3").names() == set()


@pytest.mark.parametrize(
    ("text", "column", "fragment"),
    [
        ("", 0, "empty"),
        ("   ", 0, "empty"),
        ("1 +", 3, "ends too early"),
        ("n n", 2, "unexpected 'n'"),
        ("(n + 1", 6, "expected ')'"),
        ("n + 1)", 5, "unexpected ')'"),
        ("n ** 2", 3, "unexpected '*'"),
        ("n & 1", 2, "unexpected character '&'"),
        ("pow(n, 2)", 0, "unknown function 'pow'"),
        ("cdiv(n)", 0, "takes 2 arguments"),
        ("cdiv(n, 2, 3)", 0, "takes 2 arguments"),
        ("max()", 0, "at least 1"),
        ("n + min", 4, "is a function"),
        ("3n", 0, "malformed number"),
        ("1e", 0, "malformed number"),
        ("__import__('os')", 11, "unexpected character"),
        ("n.real", 1, "unexpected"),
    ],
)
def test_syntax_errors_carry_the_column(text: str, column: int, fragment: str) -> None:
    with pytest.raises(ExprError) as info:
        parse_expr(text)
    assert fragment in info.value.message
    assert info.value.column == column


def test_unknown_name_at_evaluation_has_its_column() -> None:
    expr = parse_expr("rows * colz")
    with pytest.raises(ExprError) as info:
        expr.evaluate(ENV)
    assert "unknown name 'colz'" in info.value.message
    assert info.value.column == 7


@pytest.mark.parametrize(
    ("text", "column"), [("n / 0", 2), ("n % (k - 4)", 2), ("cdiv(n, k - 4)", 0)]
)
def test_division_by_zero_is_an_error(text: str, column: int) -> None:
    with pytest.raises(ExprError, match="by zero") as info:
        evaluate(text, ENV)
    assert info.value.column == column


def test_deep_nesting_is_an_error_not_a_crash() -> None:
    with pytest.raises(ExprError, match="nests too deeply"):
        parse_expr("(" * 1000 + "1" + ")" * 1000)
    with pytest.raises(ExprError, match="nests too deeply"):
        parse_expr("-" * 5000 + "1")
    assert parse_expr("(" * 20 + "1" + ")" * 20).evaluate({}) == 1


def test_no_python_evaluation_happens() -> None:
    # Things `eval` would accept must all be rejected by the grammar.
    for text in ("[1, 2]", "lambda: 1", "'a'", "n if n else 1", "n == 1", "n.bit_length()"):
        with pytest.raises(ExprError):
            parse_expr(text).evaluate(ENV)
