"""Seeded inputs per test case: determinism, dtypes, init functions and the user hook."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cuda_llm_lsp.evaluate.compare import bf16_to_float32
from cuda_llm_lsp.evaluate.inputs import InputError, case_rng, generate, make_inputs
from cuda_llm_lsp.source.spec import ArgSpec, Case, InitSpec, TestSpec


def spec_and_case(inputs: str | None = None, dtype: str = "float32") -> tuple[TestSpec, Case]:
    args = (
        ArgSpec("x", 0, "const float*", True, "in", dtype, "n"),
        ArgSpec("y", 1, "float*", True, "inout", dtype, "n", init=InitSpec("normal", 5, 0.1)),
        ArgSpec("out", 2, "float*", True, "out", dtype, "n"),
        ArgSpec("n", 3, "int", False, dtype="int32", value="n"),
    )
    spec = TestSpec(
        kernel="k",
        sizes={"n": [1000]},
        grid=("cdiv(n, 256)",),
        block=("256",),
        args=args,
        inputs=inputs,
    )
    case = Case(
        0, {"n": 1000}, (4, 1, 1), (256, 1, 1), 0, {"x": 1000, "y": 1000, "out": 1000}, {"n": 1000}
    )
    return spec, case


def test_same_seed_same_inputs_new_seed_or_draw_new_values() -> None:
    spec, case = spec_and_case()
    a = make_inputs(spec, case, case_rng(42, 0))
    b = make_inputs(spec, case, case_rng(42, 0))
    c = make_inputs(spec, case, case_rng(43, 0))
    d = make_inputs(spec, case, case_rng(42, 0, draw=1))
    assert set(a) == {"x", "y"}  # out buffers are poisoned, not initialised
    assert np.array_equal(a["x"], b["x"])
    assert not np.array_equal(a["x"], c["x"])
    assert not np.array_equal(a["x"], d["x"])


def test_defaults_are_never_zeros_and_init_is_honoured() -> None:
    spec, case = spec_and_case()
    arrays = make_inputs(spec, case, case_rng(1, 0))
    x, y = arrays["x"], arrays["y"]
    assert x.dtype == np.float32 and x.size == 1000
    assert np.count_nonzero(x) == 1000 and x.min() >= -1 and x.max() <= 1
    assert abs(float(y.mean()) - 5) < 0.05


@pytest.mark.parametrize(
    ("dtype", "np_dtype"),
    [
        ("float64", np.float64),
        ("float16", np.float16),
        ("int8", np.int8),
        ("uint8", np.uint8),
        ("int32", np.int32),
        ("uint32", np.uint32),
        ("int64", np.int64),
        ("bfloat16", np.uint16),
    ],
)
def test_every_element_type_has_its_storage_dtype(dtype: str, np_dtype: type) -> None:
    v = generate(None, dtype, 100, np.random.default_rng(0))
    assert v.dtype == np_dtype and v.size == 100
    if dtype == "bfloat16":
        f = bf16_to_float32(v)
        assert f.min() >= -1 and f.max() <= 1 and np.count_nonzero(f) > 90
    elif np.dtype(np_dtype).kind in "iu":
        assert v.min() >= 0 and v.max() <= 100


def test_init_kinds() -> None:
    rng = np.random.default_rng(0)
    assert np.array_equal(generate(InitSpec("arange"), "int32", 5, rng), np.arange(5))
    assert np.array_equal(generate(InitSpec("arange"), "int8", 300, rng)[255], -1)  # wraps like C
    assert not generate(InitSpec("zeros"), "float32", 5, rng).any()
    assert (generate(InitSpec("ones"), "float16", 5, rng) == 1).all()
    r = generate(InitSpec("randint", -3, 3), "int32", 1000, rng)
    assert r.min() == -3 and r.max() == 3
    r = generate(InitSpec("randint", 0, 1000), "uint8", 1000, rng)  # clipped to the type
    assert r.max() <= 255
    with pytest.raises(InputError):
        generate(InitSpec("randint", 300, 400), "int8", 5, rng)


def write_hook(tmp_path: Path, body: str) -> None:
    (tmp_path / "gen.py").write_text("import numpy as np\n\n" + body)


def test_hook_provides_structured_inputs(tmp_path: Path) -> None:
    write_hook(
        tmp_path,
        "def make(sizes, rng):\n    return {'x': np.full(sizes['n'], 3.0, dtype=np.float32)}\n",
    )
    spec, case = spec_and_case("gen.py:make")
    arrays = make_inputs(spec, case, case_rng(0, 0), tmp_path)
    assert (arrays["x"] == 3).all()
    assert arrays["y"].size == 1000  # not provided: from its init


@pytest.mark.parametrize(
    ("ref", "body", "needle"),
    [
        ("gen.py", "", 'expected "path/to/file.py:function"'),
        ("missing.py:make", "", "does not exist"),
        ("gen.py:nope", "def make(s, r):\n    return {}\n", "has no function 'nope'"),
        ("gen.py:make", "def make(s, r):\n    raise KeyError('rows')\n", "raised KeyError"),
        ("gen.py:make", "def make(s, r):\n    return [1]\n", "must return a dict"),
        ("gen.py:make", "def make(s, r):\n    return {'z': np.zeros(3)}\n", "not a pointer"),
        ("gen.py:make", "def make(s, r):\n    return {'out': np.zeros(1000)}\n", "an out argument"),
        (
            "gen.py:make",
            "def make(s, r):\n    return {'x': np.zeros(7, np.float32)}\n",
            "expected 1000 elements",
        ),
        (
            "gen.py:make",
            "def make(s, r):\n    return {'x': np.zeros(1000, np.complex64)}\n",
            "expected float32, got complex64",
        ),
        (
            "gen.py:make",
            "def make(s, r):\n    return {'x': [0.0] * 1000}\n",
            "expected a numpy array",
        ),
        ("gen.py:make", "syntax error here(\n", "loading gen.py failed: SyntaxError"),
    ],
)
def test_hook_errors_are_clear(tmp_path: Path, ref: str, body: str, needle: str) -> None:
    write_hook(tmp_path, body)
    spec, case = spec_and_case(ref)
    with pytest.raises(InputError, match=None) as info:
        make_inputs(spec, case, case_rng(0, 0), tmp_path)
    assert needle in str(info.value)


def test_hook_bfloat16_accepts_ml_dtypes_and_floats(tmp_path: Path) -> None:
    pytest.importorskip("ml_dtypes")
    write_hook(
        tmp_path,
        "import ml_dtypes\ndef make(s, r):\n"
        "    return {'x': np.full(s['n'], 1.5, ml_dtypes.bfloat16),\n"
        "            'y': np.full(s['n'], 2.5, np.float32)}\n",
    )
    spec, case = spec_and_case("gen.py:make", dtype="bfloat16")
    arrays = make_inputs(spec, case, case_rng(0, 0), tmp_path)
    assert (bf16_to_float32(arrays["x"]) == 1.5).all()
    assert (bf16_to_float32(arrays["y"]) == 2.5).all()
