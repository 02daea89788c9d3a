"""Tunables (`tune.NAME = [ints]`) and restrictions in a spec and in a candidate's launch block:
names in grid/block/smem, the default configuration from the file's guarded `#define`, every
problem at its line; conditions parsed by source/expr.py, never eval'ed."""

from __future__ import annotations

import time

import pytest

from cuda_llm_lsp.source.expr import ExprError, parse_condition, parse_expr
from cuda_llm_lsp.source.kernels import find_kernels
from cuda_llm_lsp.source.spec import SpecError, TestSpec, parse_spec
from cuda_llm_lsp.source.spec.launch import parse_launch_block
from cuda_llm_lsp.tune.space import Space
from tests.support.load import slack

HEAD = "#ifndef BLOCK\n#define BLOCK 128\n#endif\n"
SPEC = """\
/* @cuda-llm
sizes.n = [1, 1000, 100000]
tune.BLOCK = [64, 128, 256, 512]
tune.ITEMS = [1, 2, 4]
restrict = ["BLOCK * ITEMS <= 1024"]
grid = "cdiv(n, BLOCK * ITEMS)"
block = "BLOCK"
smem = "BLOCK * 4"
args.x = "in float32[n]"
args.y = "out float32[n]"
args.n = "n"
*/
__global__ void scale(const float* x, float* y, int n) { }
"""


def parse(text: str) -> tuple[TestSpec | None, list[SpecError]]:
    (kernel,) = find_kernels(text)
    return parse_spec(kernel, text)


def errors_at(text: str) -> list[tuple[int, str]]:
    """(0-based file line, message) of each error."""
    _, errors = parse(text)
    return [(e.span.start.line, e.message) for e in errors if e.severity == "error"]


def test_conditions_compare_and_expressions_refuse_comparisons() -> None:
    env = {"BLOCK": 256, "ITEMS": 4}
    assert parse_condition("BLOCK * ITEMS <= 1024").evaluate(env) == 1
    assert parse_condition("BLOCK * ITEMS < 1024").evaluate(env) == 0
    assert parse_condition("BLOCK % 32 == 0").evaluate(env) == 1
    assert parse_condition("ITEMS != 4").evaluate(env) == 0
    assert parse_condition("max(BLOCK, 64) >= cdiv(ITEMS, 2)").evaluate(env) == 1
    with pytest.raises(ExprError, match="only allowed in restrict"):
        parse_expr("n < 4")
    with pytest.raises(ExprError, match="one comparison per condition"):
        parse_condition("1 < BLOCK < 512")
    with pytest.raises(ExprError, match="unexpected character '='"):
        parse_condition("BLOCK = 4")
    with pytest.raises(ExprError, match="unexpected character"):
        parse_condition("__import__('os') or 1")


def test_tunables_name_the_launch_and_the_default_comes_from_the_guarded_define() -> None:
    spec, errors = parse(HEAD + SPEC)
    assert spec is not None and errors == []
    tunables = spec.tunables
    assert tunables is not None
    assert tunables.values == {"BLOCK": (64, 128, 256, 512), "ITEMS": (1, 2, 4)}
    assert tunables.default == {"BLOCK": 128, "ITEMS": 1}  # the file's #define, ITEMS's first
    assert tunables.defines["BLOCK"].value == 128
    timed = spec.cases()[-1]
    assert (timed.grid[0], timed.block[0], timed.smem) == (782, 128, 512)
    other = spec.with_configuration({"BLOCK": 512, "ITEMS": 2}).cases()[-1]
    assert (other.grid[0], other.block[0], other.smem) == (98, 512, 2048)
    configs = list(tunables.configurations())
    assert len(configs) == 11 and tunables.space_size == 12
    assert {"BLOCK": 512, "ITEMS": 4} not in configs
    assert tunables.compile_defines({"BLOCK": 64, "ITEMS": 2}) == ("BLOCK=64", "ITEMS=2")


def test_without_a_define_the_first_value_is_the_default() -> None:
    spec, errors = parse(SPEC)
    assert spec is not None and errors == []
    assert spec.tunables is not None and spec.tunables.default == {"BLOCK": 64, "ITEMS": 1}


@pytest.mark.parametrize(
    ("old", "new", "line", "message"),
    [
        ("tune.ITEMS = [1, 2, 4]", "tune.ITEMS = [1, 2, 2]", 3, "tune.ITEMS lists 2 twice"),
        ("tune.ITEMS = [1, 2, 4]", "tune.ITEMS = []", 3, "must be a non-empty list"),
        ("tune.ITEMS = [1, 2, 4]", 'tune.ITEMS = [1, "2"]', 3, "'2' is not an integer"),
        ("tune.ITEMS = [1, 2, 4]", "tune.ITEMS = [1, true]", 3, "True is not an integer"),
        ("tune.ITEMS = [1, 2, 4]", "tune.n = [1, 2]", 3, "'n' is already a size"),
        ('"BLOCK * ITEMS <= 1024"', '"BLOCK <= n"', 4, "unknown name 'n' in 'BLOCK <= n'"),
        ('"BLOCK * ITEMS <= 1024"', '"BLOCK << 2"', 4, "restrict: unexpected"),
        ('"BLOCK * ITEMS <= 1024"', '"BLOCK >= 256"', 4, "default configuration (BLOCK=64"),
        ('"BLOCK * ITEMS <= 1024"', '"BLOCK > 4096"', 4, "default configuration"),
        ('["BLOCK * ITEMS <= 1024"]', '"BLOCK < 4"', 4, "restrict must be a list"),
        ('block = "BLOCK"', 'block = "BLOCK * 32"', 6, "limit for axis x is 1024"),
        ('grid = "cdiv(n, BLOCK * ITEMS)"', 'grid = "cdiv(n, TILE)"', 5, "unknown name 'TILE'"),
        ('args.n = "n"', 'args.n = "BLOCK"', 10, "unknown name 'BLOCK'"),  # launch only
    ],
)
def test_errors_are_at_their_line(old: str, new: str, line: int, message: str) -> None:
    text = SPEC.replace(old, new)
    assert text != SPEC
    found = errors_at(text)
    assert any(at == line and message in got for at, got in found), found


def test_restrict_without_tune_and_an_unguarded_define_are_errors() -> None:
    text = SPEC.replace("tune.BLOCK = [64, 128, 256, 512]\ntune.ITEMS = [1, 2, 4]\n", "")
    assert any("restrict without tune" in m for _, m in errors_at(text))
    found = errors_at("#define BLOCK 128\n" + SPEC)
    assert found == [
        (
            3,
            "tune.BLOCK: line 1 defines BLOCK unconditionally, so -DBLOCK=value cannot change "
            "it: write #ifndef BLOCK / #define BLOCK ... / #endif",
        )
    ]
    found = errors_at("#ifndef BLOCK\n#define BLOCK 2 * 64\n#endif\n" + SPEC)
    assert found and "not an integer literal" in found[0][1]


def test_a_candidate_launch_block_declares_its_own_tunables() -> None:
    original = SPEC.replace("tune.BLOCK = [64, 128, 256, 512]\ntune.ITEMS = [1, 2, 4]\n", "")
    original = original.replace('restrict = ["BLOCK * ITEMS <= 1024"]\n', "")
    original = original.replace('"cdiv(n, BLOCK * ITEMS)"', '"cdiv(n, 256)"')
    original = original.replace('"BLOCK"', "256").replace('smem = "BLOCK * 4"\n', "")
    spec, errors = parse(original)
    assert spec is not None, errors
    candidate = (
        "#ifndef TILE\n#define TILE 256\n#endif\n"
        "/* @cuda-llm launch\n"
        "tune.TILE = [128, 256, 512]\n"
        'restrict = ["TILE >= 128"]\n'
        'grid = "cdiv(n, TILE)"\n'
        'block = "TILE"\n'
        "*/\n"
        "__global__ void scale(const float* x, float* y, int n) { }\n"
    )
    (kernel,) = find_kernels(candidate)
    config, errors = parse_launch_block(kernel, spec, candidate)
    assert config is not None and errors == []
    assert config.tunables is not None and config.tunables.default == {"TILE": 256}
    launched = config.applied_to(spec)
    assert launched.cases()[-1].grid[0] == 391
    assert launched.with_configuration({"TILE": 512}).cases()[-1].grid[0] == 196
    bad = candidate.replace('["TILE >= 128"]', '["TILE >= n"]')
    (kernel,) = find_kernels(bad)
    config, errors = parse_launch_block(kernel, spec, bad)
    assert config is None
    assert [(e.span.start.line, e.message.split(" (")[0]) for e in errors] == [
        (5, "restrict: unknown name 'n' in 'TILE >= n'")
    ]


def test_a_restriction_that_allows_nothing_is_an_error_and_a_huge_space_parses_at_once() -> None:
    found = errors_at(
        SPEC.replace(
            '"BLOCK * ITEMS <= 1024"',
            '"BLOCK * ITEMS <= 1024", "ITEMS > 1", "BLOCK == 64", "ITEMS > 4"',
        )
    )
    assert any("default configuration" in m for _, m in found)  # (64, 1) breaks "ITEMS > 1"
    text = SPEC.replace("tune.ITEMS = [1, 2, 4]", "tune.ITEMS = [1, 2, 4]\ntune.X = [7]")
    text = text.replace('"BLOCK * ITEMS <= 1024"', '"X < 7 + ITEMS - ITEMS"')
    assert errors_at(text) == [
        (
            5,
            "restrict: the default configuration (BLOCK=64 ITEMS=1 X=7) "
            "breaks 'X < 7 + ITEMS - ITEMS'",
        )
    ]
    # a default from the file's #define that no listed value matches: allowed, but alone
    only_default = "#ifndef BLOCK\n#define BLOCK 100\n#endif\n" + SPEC.replace(
        '"BLOCK * ITEMS <= 1024"', '"BLOCK % 100 == 0"'
    )
    assert errors_at(only_default) == [(7, "restrict excludes every configuration")]
    names = "ABCDEFGH"
    huge = SPEC.replace(
        "tune.BLOCK = [64, 128, 256, 512]\ntune.ITEMS = [1, 2, 4]\n",
        "tune.BLOCK = [64, 128]\ntune.ITEMS = [1, 2]\n"
        + "".join(f"tune.{n} = {list(range(64))}\n" for n in names),
    ).replace('"BLOCK * ITEMS <= 1024"', '"A + B + C + D + E + F + G + H < 1000"')
    started = time.perf_counter()
    spec, errors = parse(huge)
    assert spec is not None and spec.tunables is not None, errors
    assert time.perf_counter() - started < 2.0 * slack()
    assert spec.tunables.space_size == 4 * 64**8
    strategy, listed = Space(spec.tunables, {}).strategy(100)
    assert strategy == "sample" and listed == []  # not enumerated


def test_a_tunable_the_kernel_uses_without_a_define_default_is_a_warning() -> None:
    text = SPEC.replace("{ }", "{ int i = blockIdx.x * ITEMS; (void)i; }")
    spec, errors = parse(text)
    assert spec is not None  # usable: the tuner passes -DITEMS=...
    assert [(e.span.start.line, e.severity, e.message) for e in errors] == [
        (
            3,
            "warning",
            "tune.ITEMS: the kernel uses ITEMS but the file has no default for it: "
            "add #ifndef ITEMS / #define ITEMS 1 / #endif above the spec",
        )
    ]
    _, errors = parse(HEAD + SPEC)  # BLOCK has its #define; ITEMS is used by the launch only
    assert errors == []
