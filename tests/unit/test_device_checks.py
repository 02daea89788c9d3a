"""Inputs made and runs checked on the device: the counter-based generator, the check kernels
(compiled with the real NVRTC), and the worker's GPU-side paths on the CPU driver double, whose
summaries must be what `compare`'s numpy summaries say about the same buffers."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from cuda_llm_lsp.evaluate import counter, device_checks
from cuda_llm_lsp.evaluate.compare import (
    GUARD_BYTE,
    GUARD_BYTES,
    SCALE_ULPS,
    poison_pattern,
    storage_dtype,
    summarize_changed,
    summarize_guards,
    summarize_output,
)
from cuda_llm_lsp.evaluate.counter import DTYPE_CODES, InitError, buffer_key
from cuda_llm_lsp.evaluate.gpu import GpuEvaluator
from cuda_llm_lsp.evaluate.inputs import counter_values as generate
from cuda_llm_lsp.evaluate.inputs import describe
from cuda_llm_lsp.evaluate.protocol import Buffer, Checks
from cuda_llm_lsp.evaluate.worker import DRIVER_ENV, CudaBackend
from cuda_llm_lsp.source.spec import InitSpec
from tests.support.load import slack
from tests.unit import fake_cuda_driver as fake

FLOATS = ("float32", "float64", "float16", "bfloat16")


# --- the generator -------------------------------------------------------------------------
def as_float(values: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "bfloat16":
        return (values.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return values.astype(np.float64)


@pytest.mark.parametrize("dtype", list(DTYPE_CODES))
def test_every_init_kind_keeps_its_distribution(dtype: str) -> None:
    n = 200_000
    key = buffer_key(3, 1, 0, 2)
    u = as_float(generate(InitSpec("uniform", -2, 6), dtype, n, key), dtype)
    r = generate(InitSpec("randint", 0, 9), dtype, n, key)
    assert set(np.unique(as_float(r, dtype))) == set(range(10))
    assert np.array_equal(
        as_float(generate(InitSpec("arange"), dtype, 5, key), dtype), np.arange(5)
    )
    assert not as_float(generate(InitSpec("zeros"), dtype, 9, key), dtype).any()
    assert (as_float(generate(InitSpec("ones"), dtype, 9, key), dtype) == 1).all()
    default = as_float(generate(None, dtype, n, key), dtype)
    if dtype in FLOATS:
        assert u.min() >= -2 and u.max() <= 6 and abs(u.mean() - 2) < 0.05
        assert abs(u.std() - 8 / 12**0.5) < 0.05  # uniform, not some other shape
        g = as_float(generate(InitSpec("normal", 0.5, 2), dtype, n, key), dtype)
        assert abs(g.mean() - 0.5) < 0.02 and abs(g.std() - 2) < 0.02
        assert abs(np.mean(np.abs(g - 0.5) < 2) - 0.6827) < 0.01  # one sigma holds 68%
        assert default.min() >= -1 and default.max() <= 1 and np.count_nonzero(default) > n * 0.99
    else:
        assert default.min() >= 0 and default.max() <= 100 and len(np.unique(default)) == 101


def test_values_depend_on_seed_case_draw_and_buffer_and_nothing_else() -> None:
    base = generate(None, "float32", 1000, buffer_key(1, 2, 0, 3))
    assert np.array_equal(base, generate(None, "float32", 1000, buffer_key(1, 2, 0, 3)))
    for key in (
        buffer_key(2, 2, 0, 3),
        buffer_key(1, 3, 0, 3),
        buffer_key(1, 2, 1, 3),
        buffer_key(1, 2, 0, 4),
    ):
        assert not np.array_equal(base, generate(None, "float32", 1000, key))
    # a prefix is the same whatever the length: value i is a function of i alone
    assert np.array_equal(base[:10], generate(None, "float32", 10, buffer_key(1, 2, 0, 3)))


def test_known_values_pin_the_generator() -> None:
    """The device kernel must give these too (tests/gpu checks it there): a change of the hash
    or of the arithmetic changes every recorded seed's inputs."""
    key = buffer_key(7, 0, 0, 0)
    assert counter.bits(key, 2).tolist() == [int(v) for v in counter.bits(key, 2)]
    assert (
        generate(InitSpec("randint", -3, 3), "int32", 6, key).tolist()
        == generate(InitSpec("randint", -3, 3), "int64", 6, key).tolist()
    )
    u = generate(InitSpec("uniform", 0, 1), "float64", 3, key)
    assert u.tolist() == [
        float((counter.mix(key ^ ((2 * i * counter.STEP) & ((1 << 64) - 1))) >> 11) * 2.0**-53)
        for i in range(3)
    ]


def test_an_empty_randint_for_the_type_is_refused() -> None:
    with pytest.raises(InitError, match="randint"):
        describe(InitSpec("randint", 300, 400), "int8", 1)


# --- the check kernels, compiled for real ----------------------------------------------------
def test_the_check_kernels_compile_with_nvrtc() -> None:
    build = device_checks.compile_helpers("sm_90")
    assert build.cubin is not None, build.log
    assert build.cubin.startswith(b"\x7fELF")
    for name in device_checks.HELPER_NAMES:
        assert name.encode() in build.cubin  # extern "C": the names the worker looks up
    # NVRTC wrote its empty log into `b" " * 1`, CPython's shared one-byte object: every b" "
    # of the process read b"\0" after this test (the device unit's blanking went wrong)
    assert b" ".isspace() and bytes([32]) == b" "


# --- the worker's GPU-side paths on the CPU double ---------------------------------------------
@pytest.fixture
def backend(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[CudaBackend]:
    monkeypatch.setenv(DRIVER_ENV, "tests.unit.fake_cuda_driver")
    monkeypatch.setenv("CUDA_LLM_CACHE_DIR", str(tmp_path))  # the check kernels' cubin cache
    yield CudaBackend(0)


def put(backend: CudaBackend, ptr: int, values: np.ndarray) -> None:
    backend.check(backend.d.cuMemcpyHtoD(ptr, values.ctypes.data, values.nbytes), "put")


def get(backend: CudaBackend, ptr: int, n: int, dtype: str) -> np.ndarray:
    host = np.empty(n, dtype=storage_dtype(dtype))
    backend.check(backend.d.cuMemcpyDtoH(host.ctypes.data, ptr, host.nbytes), "get")
    return host


# normal() goes through log and cos, whose last bit the device's library may round otherwise
_NORMAL_RTOL = {"float64": 1e-14, "float32": 2**-23, "float16": 2**-10, "bfloat16": 2**-7}


def test_generated_inputs_are_the_numpy_twins_values(backend: CudaBackend) -> None:
    n = 100_003
    for dtype in DTYPE_CODES:
        for init in (
            None,
            InitSpec("uniform", -3, 5),
            InitSpec("normal", 1, 2),
            InitSpec("randint", -5, 5),
            InitSpec("arange"),
            InitSpec("ones"),
        ):
            g = describe(init, dtype, buffer_key(11, 0, 0, 1))
            buf = Buffer("x", n * storage_dtype(dtype).itemsize, dtype, generated=g)
            placed = backend._place([buf], GUARD_BYTES)
            got = get(backend, placed.ptrs["x"], n, dtype)
            want = counter.values_of(g, dtype, n)
            backend._release(placed)
            if init is not None and init.kind == "normal" and dtype in FLOATS:
                np.testing.assert_allclose(
                    as_float(got, dtype), as_float(want, dtype), rtol=_NORMAL_RTOL[dtype], atol=1e-6
                )
            else:
                assert np.array_equal(got, want), (dtype, init)


def planted(dtype: str, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """An expected and a got buffer with wrong, unwritten, NaN and infinite elements."""
    sd = storage_dtype(dtype)
    expected = generate(None, dtype, n, 5)
    got = expected.copy()
    poison = np.frombuffer(poison_pattern(dtype), dtype=sd)[0]
    idx = rng.choice(n, 40, replace=False)
    got[idx[:10]] = generate(InitSpec("randint", 3, 9), dtype, 10, 6)  # wrong
    got[idx[10:15]] = poison  # unwritten
    if dtype in FLOATS:
        special = np.array([np.nan, np.inf, -np.inf], dtype=np.float32)
        bits = counter._store(special.astype(np.float64), dtype)
        expected[idx[15:18]] = bits  # NaN vs NaN passes, inf vs the same inf passes
        got[idx[15:18]] = bits
        expected[idx[18]] = bits[0]  # NaN expected, a number got: wrong
        got[idx[19]] = bits[1]  # inf got for a number: wrong
    return expected, got


@pytest.mark.parametrize("dtype", list(DTYPE_CODES))
def test_output_summaries_match_numpy(backend: CudaBackend, dtype: str) -> None:
    rng = np.random.default_rng(DTYPE_CODES[dtype])
    n = 5000
    expected, got = planted(dtype, n, rng)
    nbytes = expected.nbytes
    checks = Checks(("y",), rtol=1e-2, atol=1e-3)
    ref = backend._place([Buffer("y", nbytes, dtype, data=expected.tobytes())], GUARD_BYTES)
    backend._check([Buffer("y", nbytes, dtype)], ref, Checks(("y",), keep="oracle"))
    backend._keep("oracle", [Buffer("y", nbytes, dtype)], ref, ("y",))
    backend._release(ref)
    run = backend._place([Buffer("y", nbytes, dtype, data=got.tobytes())], GUARD_BYTES)
    poisoned = Buffer("y", nbytes, dtype, poison=poison_pattern(dtype))  # (the run's poison)
    reply = backend._check([poisoned], run, Checks(("y",), 1e-2, 1e-3, against=("oracle",)))
    want = summarize_output(expected, got, dtype, rtol=checks.rtol, atol=checks.atol)
    assert reply.compared["oracle"]["y"] == want
    assert want.bad >= 10 and want.unwritten == 5
    assert reply.unwritten["y"] == summarize_output(None, got, dtype, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16"])
def test_scale_aware_floor_summaries_match_numpy(backend: CudaBackend, dtype: str) -> None:
    """Elements that pass only by the scale-aware floor, and ones just past it: the device's
    `cl_scale` + `cl_check_output` decide each as `compare.within_tolerance` does."""
    n = 4000
    rng = np.random.default_rng(11)
    e = rng.uniform(-1e-3, 1e-3, n)
    e[7] = 50.0  # the buffer's scale
    unit = 2.0**-53 if dtype == "float64" else 2.0**-24
    floor = SCALE_ULPS * unit * 50.0
    g = e.copy()
    g[100:200] += floor * 0.5  # inside the floor, outside atol + rtol * |e|
    g[200:210] += floor * 3.0  # outside both
    expected = counter._store(e, dtype)
    got = counter._store(g, dtype)
    nbytes = expected.nbytes
    rtol, atol = (0.0, 1e-300) if dtype == "float64" else (1e-6, 1e-12)
    ref = backend._place([Buffer("y", nbytes, dtype, data=expected.tobytes())], GUARD_BYTES)
    backend._keep("oracle", [Buffer("y", nbytes, dtype)], ref, ("y",))
    backend._release(ref)
    run = backend._place([Buffer("y", nbytes, dtype, data=got.tobytes())], GUARD_BYTES)
    reply = backend._check(
        [Buffer("y", nbytes, dtype)], run, Checks(("y",), rtol, atol, against=("oracle",))
    )
    want = summarize_output(expected, got, dtype, rtol=rtol, atol=atol)
    assert reply.compared["oracle"]["y"] == want
    assert want.scale == 50.0 and want.first_bad == 200
    if dtype in ("float32", "float64"):  # (half types round the planted offsets away)
        assert want.bad == 10


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16"])
def test_relative_default_atol_summaries_match_numpy(backend: CudaBackend, dtype: str) -> None:
    """A type's default atol times min(1, mean |expected|): `cl_magnitude`'s fixed-point sum
    and `cl_check_output` decide each element as `compare.summarize_output` does, and the
    relative atol rejects 3 % errors on ~1e-3 outputs that the absolute 1e-2 let through."""
    n = 4096
    rng = np.random.default_rng(12)
    e = rng.uniform(2e-4, 2e-3, n)  # a softmax row's magnitudes
    e[5] = 0.75
    e[9] = np.inf  # (counts 0 in the mean, as on the device)
    g = e * (1 + rng.uniform(-0.035, 0.0, n))
    g[5] = e[5]
    expected, got = counter._store(e, dtype), counter._store(g, dtype)
    nbytes = expected.nbytes
    ref = backend._place([Buffer("y", nbytes, dtype, data=expected.tobytes())], GUARD_BYTES)
    backend._keep("oracle", [Buffer("y", nbytes, dtype)], ref, ("y",))
    backend._release(ref)
    run = backend._place([Buffer("y", nbytes, dtype, data=got.tobytes())], GUARD_BYTES)
    for relative in (False, True):
        checks = Checks(("y",), 1e-2, 1e-2, against=("oracle",), atol_relative=relative)
        reply = backend._check([Buffer("y", nbytes, dtype)], run, checks)
        want = summarize_output(expected, got, dtype, rtol=1e-2, atol=1e-2, atol_relative=relative)
        assert reply.compared["oracle"]["y"] == want
        assert 1e-3 < want.typical < 1.5e-3 and want.scale == 0.75
        assert (want.bad > 100) if relative else want.bad == 0


def test_guards_and_changed_inputs_match_numpy(backend: CudaBackend) -> None:
    n = 1000
    x = generate(None, "float32", n, 9)
    bufs = [
        Buffer("x", 4 * n, "float32", data=x.tobytes(), is_input=True),
        Buffer("y", 4 * n, "float32", poison=poison_pattern("float32")),
    ]
    placed = backend._place(bufs, GUARD_BYTES)
    clean = backend._check(bufs, placed, Checks(("y",)))
    assert clean.changed["x"].changed == 0 and clean.guards["y"].back_changed == 0
    assert clean.unwritten["y"].unwritten == n
    put(backend, placed.ptrs["x"] + 4 * 17, np.array([0.5, 0.25], dtype=np.float32))  # changes x
    put(
        backend, placed.ptrs["y"] + 4 * n + 8, np.array([1.0, 2.0], dtype=np.float32)
    )  # past the end
    put(backend, placed.ptrs["y"] - 3, np.array([7], dtype=np.uint8))  # before the start
    reply = backend._check(bufs, placed, Checks(("y",)))
    after = get(backend, placed.ptrs["x"], n, "float32")
    c = reply.changed["x"]
    want = summarize_changed(x, after)
    assert (c.changed, c.first, c.before, c.after) == (
        want.changed,
        want.first,
        want.before,
        want.after,
    )
    raw = get(backend, placed.ptrs["y"] - GUARD_BYTES, 4 * n + 2 * GUARD_BYTES, "uint8").tobytes()
    assert reply.guards["y"] == summarize_guards(raw, 4 * n)
    assert reply.guards["y"].back_changed > 0 and reply.guards["y"].front_changed == 1
    assert raw[0] == GUARD_BYTE


def test_allocations_are_reused_across_runs(backend: CudaBackend) -> None:
    bufs = [Buffer("y", 4096, "float32", poison=poison_pattern("float32"))]
    first = backend._place(bufs, GUARD_BYTES)
    backend._release(first)
    allocated = len(fake.S.allocations)
    second = backend._place(bufs, GUARD_BYTES)
    assert len(fake.S.allocations) == allocated  # the same allocation, from the pool
    assert second.ptrs == first.ptrs
    put(backend, second.ptrs["y"], np.arange(1024, dtype=np.float32))
    backend._keep("kept", bufs, second, ("y",))  # into host memory (issue 11) ...
    backend._release(second)  # ... and the device copy is scrubbed before it is pooled
    assert np.array_equal(backend.kept["kept"]["y"].view(np.float32), np.arange(1024))
    assert not get(backend, second.ptrs["y"], 1024, "float32").any()
    third = backend._place(bufs, GUARD_BYTES)
    assert third.ptrs == second.ptrs


def test_comparing_with_a_run_the_worker_does_not_keep_is_an_error(backend: CudaBackend) -> None:
    bufs = [Buffer("y", 16, "float32", poison=poison_pattern("float32"))]
    placed = backend._place(bufs, GUARD_BYTES)
    with pytest.raises(KeyError, match="no run kept as 'oracle'"):
        backend._check(bufs, placed, Checks(("y",), against=("oracle",)))


def test_the_worker_exits_at_once_when_closed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(DRIVER_ENV, "tests.unit.fake_cuda_driver")
    root = str(Path(__file__).resolve().parents[2])
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    )
    ev = GpuEvaluator(cache_dir=tmp_path)
    ev.device_facts()
    process = ev._worker.process
    assert process is not None
    start = time.perf_counter()
    ev.close()
    assert not process.alive()
    assert time.perf_counter() - start < 1.0 * slack()


def test_out_of_memory_frees_the_pool_and_retries_once(
    backend: CudaBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    placed = backend._place([Buffer("y", 4096, "float32", poison=b"\0" * 4)], GUARD_BYTES)
    backend._release(placed)
    assert backend.pooled_bytes > 0
    real, calls = fake.cuMemAlloc, []

    def full_once(n: int) -> tuple[object, ...]:
        calls.append(n)
        return (2, 0) if len(calls) == 1 else real(n)  # CUDA_ERROR_OUT_OF_MEMORY, then room

    monkeypatch.setattr(fake, "cuMemAlloc", full_once)
    backend._place([Buffer("z", 8192, "float32", poison=b"\0" * 4)], GUARD_BYTES)
    assert len(calls) == 2 and backend.pooled_bytes == 0 and not backend.pool
