"""Comparison of a run's buffers with the oracle's: the messages people and LLMs act on."""

from __future__ import annotations

import numpy as np
import pytest

from cuda_llm_lsp.evaluate.compare import (
    GUARD_BYTE,
    GUARD_BYTES,
    OK,
    bf16_from_float,
    bf16_to_float32,
    check_guards,
    check_unchanged,
    compare_output,
    poison_pattern,
    unwritten_mask,
)

WHERE = "case 3 (rows=1000, cols=999)"


def poisoned(n: int, dtype: str) -> np.ndarray:
    sd = np.uint16 if dtype == "bfloat16" else np.dtype(dtype)
    return np.frombuffer(poison_pattern(dtype) * n, dtype=sd).copy()


def test_equal_outputs_pass() -> None:
    a = np.linspace(-1, 1, 100, dtype=np.float32)
    assert compare_output("out", a, a.copy(), "float32", rtol=1e-4, atol=1e-5, where=WHERE) is OK


def test_wrong_value_message_names_case_index_expected_and_got() -> None:
    exp = np.full(999000, 0.5123, dtype=np.float32)
    got = exp.copy()
    got[12345] = 0.0
    f = compare_output(
        "out",
        exp,
        got,
        "float32",
        rtol=1e-4,
        atol=1e-5,
        where=WHERE,
        sizes={"rows": 1000, "cols": 999},
    )
    assert f.status == "wrong_output"
    assert f.message.startswith("case 3 (rows=1000, cols=999): out[12345]")
    assert "expected 0.5123 got 0 (1 of 999000 elements differ" in f.message
    assert "[12][357] as [rows][cols]" in f.message  # 12345 = 12*999 + 357
    assert f.bad_count == 1


def test_within_tolerance_passes_and_outside_fails() -> None:
    exp = np.ones(10, dtype=np.float32)
    close = exp + 5e-5
    assert compare_output("o", exp, close, "float32", rtol=1e-4, atol=1e-5, where=WHERE) is OK
    far = exp + 1e-3
    f = compare_output("o", exp, far, "float32", rtol=1e-4, atol=1e-5, where=WHERE)
    assert f.status == "wrong_output" and f.bad_count == 10


def test_nan_expected_and_nan_got_is_equal_but_nan_vs_number_is_wrong() -> None:
    exp = np.array([np.nan, 1.0, np.inf], dtype=np.float32)
    assert compare_output("o", exp, exp.copy(), "float32", rtol=0, atol=0, where=WHERE) is OK
    got = np.array([np.nan, np.nan, np.inf], dtype=np.float32)
    f = compare_output("o", exp, got, "float32", rtol=1e-4, atol=1e-5, where=WHERE)
    assert f.status == "wrong_output" and "o[1] expected 1 got NaN" in f.message
    got = np.array([1.0, 1.0, np.inf], dtype=np.float32)
    assert compare_output("o", exp, got, "float32", rtol=1, atol=1, where=WHERE).status == (
        "wrong_output"
    )
    got = np.array([np.nan, 1.0, -np.inf], dtype=np.float32)
    assert compare_output("o", exp, got, "float32", rtol=1, atol=1, where=WHERE).bad_count == 1


@pytest.mark.parametrize(
    "dtype", ["float32", "float64", "float16", "bfloat16", "int8", "uint8", "int32", "int64"]
)
def test_unwritten_elements_are_told_apart_from_wrong_ones(dtype: str) -> None:
    n = 64
    sd = np.uint16 if dtype == "bfloat16" else np.dtype(dtype)
    exp = (
        (np.arange(n) % 7 + 1).astype(sd)
        if dtype != "bfloat16"
        else bf16_from_float(np.arange(n, dtype=np.float32))
    )
    got = poisoned(n, dtype)
    got[: n - 1] = exp[: n - 1]
    f = compare_output("out", exp, got, dtype, rtol=1e-2, atol=1e-2, where=WHERE)
    assert f.status == "unwritten_output"
    assert "out[63] was never written (the last element)" in f.message
    assert unwritten_mask(got, dtype).sum() == 1


def test_float_poison_is_nan_with_a_payload_arithmetic_never_makes() -> None:
    p = np.frombuffer(poison_pattern("float32"), dtype=np.float32)[0]
    assert np.isnan(p)
    with np.errstate(invalid="ignore"):
        computed_nan = np.array([np.float32(np.inf) - np.float32(np.inf)], dtype=np.float32)
    assert not unwritten_mask(computed_nan, "float32").any()
    assert np.isnan(np.frombuffer(poison_pattern("float16"), dtype=np.float16)[0])
    assert np.isnan(bf16_to_float32(np.frombuffer(poison_pattern("bfloat16"), np.uint16))[0])


def test_integers_must_match_exactly() -> None:
    exp = np.arange(10, dtype=np.int32)
    got = exp.copy()
    got[4] = 5
    f = compare_output("idx", exp, got, "int32", rtol=1, atol=1, where=WHERE)
    assert f.status == "wrong_output" and "idx[4] expected 4 got 5" in f.message


def test_bfloat16_compares_decoded_values() -> None:
    vals = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    exp = bf16_from_float(vals)
    got = bf16_from_float(vals * 1.001)  # within bf16 tolerance 1e-2
    assert compare_output("o", exp, got, "bfloat16", rtol=1e-2, atol=1e-2, where=WHERE) is OK
    got = bf16_from_float(vals * 1.5)
    f = compare_output("o", exp, got, "bfloat16", rtol=1e-2, atol=1e-2, where=WHERE)
    assert f.status == "wrong_output" and "expected 1 got 1.5" in f.message


def test_bf16_packing_is_bit_exact_with_ml_dtypes() -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(1)
    x = np.concatenate(
        [rng.normal(0, 100, 10000), [0.0, -0.0, np.inf, -np.inf, 1e-40, 3.0e38]]
    ).astype(np.float32)
    ours = bf16_from_float(x)
    theirs = x.astype(ml_dtypes.bfloat16).view(np.uint16)
    assert np.array_equal(ours, theirs)
    assert np.isnan(bf16_to_float32(bf16_from_float(np.array([np.nan], np.float32)))[0])


def guarded(data: bytes) -> bytearray:
    return bytearray(bytes([GUARD_BYTE]) * GUARD_BYTES + data + bytes([GUARD_BYTE]) * GUARD_BYTES)


def test_guard_band_write_past_the_end_is_out_of_bounds() -> None:
    data = np.zeros(10, dtype=np.float32).tobytes()
    raw = guarded(data)
    assert check_guards("out", bytes(raw), len(data), 4, WHERE) is OK
    raw[GUARD_BYTES + len(data) : GUARD_BYTES + len(data) + 4] = b"\0\0\0\0"
    f = check_guards("out", bytes(raw), len(data), 4, WHERE)
    assert f.status == "out_of_bounds"
    assert "out[10] past the end (out has 10 elements)" in f.message


def test_guard_band_write_before_the_start() -> None:
    data = bytes(40)
    raw = guarded(data)
    raw[GUARD_BYTES - 4] = 0
    f = check_guards("x", bytes(raw), 40, 4, WHERE)
    assert f.status == "out_of_bounds" and "x[-1] before the start" in f.message


def test_modified_input_is_reported_with_old_and_new_value() -> None:
    before = np.arange(5, dtype=np.float32)
    after = before.copy()
    after[2] = 7
    f = check_unchanged("x", before, after, WHERE)
    assert f.status == "input_modified"
    assert "x[2] was 2 and is now 7 (1 of 5 elements changed)" in f.message
    assert check_unchanged("x", before, before.copy(), WHERE) is OK


def test_a_count_0_input_buffer_is_unchanged() -> None:
    empty = np.zeros(0, np.float32)
    assert check_unchanged("x", empty, empty.copy(), WHERE) is OK
