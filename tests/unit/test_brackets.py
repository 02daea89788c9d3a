"""The bracket-aware scans shared by the launch facts, template arguments, demangled names and
the spec from a capture (`source/brackets.py`)."""

from __future__ import annotations

from cuda_llm_lsp.source.brackets import ANGLES, close_index, outside_angles, split_top


def test_split_top_keeps_brackets_whole_and_names_which_count() -> None:
    assert split_top("f(a, b), x[1, 2], {3, 4}") == ["f(a, b)", "x[1, 2]", "{3, 4}"]
    # `<` is a comparison in an expression, a bracket in a template argument list
    assert split_top("a < b, c > d") == ["a < b", "c > d"]
    assert split_top("Pair<int, float>, 4", *ANGLES) == ["Pair<int, float>", "4"]
    assert split_top("  ") == [] and split_top("a,") == ["a", ""]


def test_close_index_finds_the_closing_bracket_or_a_comma() -> None:
    text = "f(g(x, y), z) + 1"
    assert close_index(text, 2) == 12  # the ')' closing "f("
    assert close_index(text, 2, comma=True) == 9  # the comma after g(x, y)
    assert close_index("{ int a[2] = {1, 2}; } tail", 1, "{", "}") == 21
    assert close_index("(unclosed", 1) == -1
    assert close_index("{" + " " * 50 + "}", 1, "{", "}", limit=10) == -1


def test_outside_angles_skips_template_arguments() -> None:
    signature = "void k<F<(int)3>, 2>(float*, int)"
    assert outside_angles(signature, "(") == signature.index("(float")
    assert outside_angles("no parameter list", "(") == -1
