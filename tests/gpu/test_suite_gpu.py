"""On the GPU: every suite baseline passes its own cases (run twice, unwritten outputs, guard
bands, inputs unchanged) and gets a timing; every hand-written replay candidate is judged with
its own launch (hidden cases included) and is `ok` unless it is labelled wrong; the suite command
writes its report, with `--launch free` winners that carry their own launch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.evaluate.candidate import build_binary
from cuda_llm_lsp.evaluate.types import KernelBinary, NoGpuError
from cuda_llm_lsp.fsr.client import extract_kernel
from cuda_llm_lsp.fsr.launch import candidate_launch
from cuda_llm_lsp.fsr.toolchain import clean_candidate
from cuda_llm_lsp.suite.runner import discover
from tests.gpu.conftest import SKIP_REASON

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "benchmarks" / "suite"
ITEMS = discover(SUITE)
RECORDING = ROOT / "benchmarks" / "recordings" / "hand-written"
RECORDS = sorted(RECORDING.glob("*/*-handwritten.json"))


@pytest.fixture(scope="module")
def evaluator():  # type: ignore[no-untyped-def]
    from cuda_llm_lsp.evaluate import timing
    from cuda_llm_lsp.evaluate.gpu import GpuEvaluator

    ev = GpuEvaluator(plan=timing.Plan(budget_s=0.3))
    try:
        facts = ev.device_facts()
    except NoGpuError:
        ev.close()
        pytest.skip(SKIP_REASON)
    yield ev, facts
    ev.close()


@pytest.mark.parametrize("item", ITEMS, ids=[i.kernel.name for i in ITEMS])
def test_baseline_passes_its_own_cases(evaluator, item) -> None:  # type: ignore[no-untyped-def]
    ev, facts = evaluator
    assert item.spec is not None, item.errors
    binary = build_binary(
        item.text,
        item.path,
        item.kernel.name,
        Settings(),
        instance=item.spec.instance,
        arch=facts.arch,
    )
    assert isinstance(binary, KernelBinary), getattr(binary, "message", "")
    result = ev.benchmark(binary, item.spec, spec_dir=item.path.parent)
    assert result.status == "ok", result.message
    assert result.cases_passed == item.spec.case_count
    assert result.baseline is not None and result.baseline.median_ms > 0
    assert result.baseline.median_ms < 200.0  # every timed baseline stays cheap to measure


@pytest.fixture(scope="module")
def judged():  # type: ignore[no-untyped-def]
    """Each hand-written candidate's status and speedup; written to CUDA_LLM_TEST_LOG_DIR
    (`benchmarks/gpu_all.sh tests` keeps it) and printed (`-s`) after the module."""
    found: dict[str, dict[str, object]] = {}
    yield found
    text = json.dumps(found, indent=2)
    print("\nhand-written candidates:\n" + text)
    where = os.environ.get("CUDA_LLM_TEST_LOG_DIR")
    if where:
        Path(where, "hand-written-candidates.json").write_text(text + "\n")


@pytest.mark.parametrize(
    "record", RECORDS, ids=[r.stem.removesuffix("-handwritten") for r in RECORDS]
)
def test_hand_written_candidate_is_judged_with_its_own_launch(evaluator, judged, record) -> None:  # type: ignore[no-untyped-def]
    ev, facts = evaluator
    data = json.loads(record.read_text())
    name = data["kernel"]
    item = next(i for i in ITEMS if i.kernel.name == name)
    spec = item.spec
    code, error = extract_kernel(data["reply"]["text"], name, "stop")
    assert code is not None, error
    launch = candidate_launch(code, name, spec)  # as the FSR loop reads it under --launch free
    assert not isinstance(launch, str), launch
    baseline = build_binary(
        item.text, item.path, name, Settings(), instance=spec.instance, arch=facts.arch
    )
    candidate = build_binary(
        item.text,
        item.path,
        name,
        Settings(),
        kernel_source=clean_candidate(code, item.text),
        instance=spec.instance,
        arch=facts.arch,
    )
    assert isinstance(baseline, KernelBinary)
    wrong = "DELIBERATELY WRONG" in code
    if not isinstance(candidate, KernelBinary):
        assert wrong, candidate.message
        judged[record.stem] = {"status": candidate.status}
        return
    result = ev.evaluate(
        baseline,
        candidate,
        spec,
        spec_dir=item.path.parent,
        candidate_spec=launch.applied_to(spec) if launch else None,
    )
    judged[record.stem] = {
        "status": result.status,
        "speedup": result.speedup,
        "launch": launch.describe() if launch else None,
    }
    if wrong:
        assert result.status != "ok", "the deliberately wrong candidate passed"
        return
    assert result.status == "ok", result.message  # every case, hidden ones included
    if launch is not None:  # a launch change is there because it helps
        assert result.speedup is not None and result.speedup > 1.0, result.speedup


def test_suite_command_writes_the_report(tmp_path: Path, evaluator) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "report"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "cuda_llm_lsp.cli",
            "suite",
            str(SUITE),
            "--kernel",
            "transpose_f32",
            "--kernel",
            "matmul_f32",
            "--optimize",
            "--replay",
            str(RECORDING),
            "--launch",
            "free",
            "--out",
            str(out),
            "--time-budget",
            "0.3",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads((out / "report.json").read_text())
    rows = {r["kernel"]: r for r in data["kernels"]}
    assert set(rows) == {"transpose_f32", "matmul_f32"}
    transpose = rows["transpose_f32"]
    assert transpose["optimized"] and transpose["candidates"] == 3
    assert transpose["accepted"] and transpose["speedup"] > 1.0
    bad = {s for s in transpose["candidate_statuses"] if s not in ("ok", "slower")}
    assert bad, "the deliberately wrong candidate was not rejected"
    # the launch-changing candidates win (32x32 tiles; 64x64 register tiles), with their launch
    assert "block=[32, 8]" in transpose["launch"], transpose
    assert "cdiv(N, 64)" in rows["matmul_f32"]["launch"], rows["matmul_f32"]
    assert "## Winners with their own launch" in (out / "report.md").read_text()
    assert (out / "chart.png").stat().st_size > 1000 and (out / "report.md").exists()


# --- the baselines compute the right math ---------------------------------------------------
# The evaluator takes the original kernel as the oracle, so a wrong baseline would pass its own
# cases. Here each baseline runs once (through CuPy, from the cubin our NVRTC path built) on
# its third case and is compared with a float64 NumPy reference of the operation.


def _pcg(v: np.ndarray) -> np.ndarray:
    state = (v * np.uint32(747796405) + np.uint32(2891336453)).astype(np.uint32)
    shift = ((state >> np.uint32(28)) + np.uint32(4)).astype(np.uint32)
    word = (((state >> shift) ^ state) * np.uint32(277803737)).astype(np.uint32)
    return ((word >> np.uint32(22)) ^ word).astype(np.uint32)


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x**3)))


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _rope(q: np.ndarray, c: np.ndarray, s: np.ndarray, sz: dict[str, int]) -> np.ndarray:
    t, h, d = sz["tokens"], sz["heads"], sz["dim"]
    q = q.reshape(t, h, d)
    c = c.reshape(t, 1, d // 2)
    s = s.reshape(t, 1, d // 2)
    x1, x2 = q[..., : d // 2], q[..., d // 2 :]
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1).ravel()


def _csr_dense(rp: np.ndarray, ci: np.ndarray, v: np.ndarray, rows: int, cols: int) -> np.ndarray:
    dense = np.zeros((rows, cols))
    for r in range(rows):
        for j in range(int(rp[r]), int(rp[r + 1])):
            dense[r, int(ci[j])] += v[j]
    return dense


def _ell_dense(ci: np.ndarray, v: np.ndarray, sz: dict[str, int]) -> np.ndarray:
    rows, width = sz["rows"], sz["width"]
    dense = np.zeros((rows, sz["cols"]))
    ci = ci.reshape(width, rows)
    v = v.reshape(width, rows)
    for k in range(width):
        for r in range(rows):
            if ci[k, r] >= 0:
                dense[r, int(ci[k, r])] += v[k, r]
    return dense


def _stencil2d(x: np.ndarray, sz: dict[str, int]) -> np.ndarray:
    ny, nx = sz["ny"], sz["nx"]
    x = x.reshape(ny, nx)
    out = x.copy()
    out[1:-1, 1:-1] = 0.25 * (x[1:-1, :-2] + x[1:-1, 2:] + x[:-2, 1:-1] + x[2:, 1:-1])
    return out.ravel()


def _stencil3d(x: np.ndarray, sz: dict[str, int], alpha: float) -> np.ndarray:
    x = x.reshape(sz["nz"], sz["ny"], sz["nx"])
    out = x.copy()
    i = x[1:-1, 1:-1, 1:-1]
    nb = (
        x[1:-1, 1:-1, :-2]
        + x[1:-1, 1:-1, 2:]
        + x[1:-1, :-2, 1:-1]
        + x[1:-1, 2:, 1:-1]
        + x[:-2, 1:-1, 1:-1]
        + x[2:, 1:-1, 1:-1]
    )
    out[1:-1, 1:-1, 1:-1] = i + alpha * (nb - 6 * i)
    return out.ravel()


def _monte_carlo(seeds: np.ndarray, sz: dict[str, int]) -> np.ndarray:
    threads, samples = sz["threads"], sz["samples"]
    seed = seeds.astype(np.uint32)[:, None]
    s = np.arange(samples, dtype=np.uint32)[None, :]
    golden = np.uint32(2654435769)
    hx = _pcg(seed ^ (np.uint32(2) * s * golden).astype(np.uint32))
    hy = _pcg(seed ^ ((np.uint32(2) * s + np.uint32(1)) * golden).astype(np.uint32))
    x = (hx >> np.uint32(8)).astype(np.float64) / 16777216.0
    y = (hy >> np.uint32(8)).astype(np.float64) / 16777216.0
    per_thread = np.exp(-(x * x + y * y)).sum(axis=1)
    blocks = -(-threads // 256)
    padded = np.zeros(blocks * 256)
    padded[:threads] = per_thread
    return padded.reshape(blocks, 256).sum(axis=1)


def _partials(p: np.ndarray, n: int) -> np.ndarray:
    blocks = -(-n // 256)
    padded = np.zeros(blocks * 256)
    padded[:n] = p
    return padded.reshape(blocks, 256).sum(axis=1)


def _norm(x: np.ndarray, sz: dict[str, int]) -> np.ndarray:
    return x.reshape(sz["rows"], sz["cols"])


REFERENCES = {
    "vector_add": lambda f, sz, sc: {"c": f("a") + f("b")},
    "dot": lambda f, sz, sc: {"partial": _partials(f("a") * f("b"), sz["n"])},
    "matvec": lambda f, sz, sc: {"y": _norm(f("A"), sz) @ f("x")},
    "matmul": lambda f, sz, sc: {
        "C": (f("A").reshape(sz["M"], sz["K"]) @ f("B").reshape(sz["K"], sz["N"])).ravel()
    },
    "transpose": lambda f, sz, sc: {"out": _norm(f("in"), sz).T.ravel()},
    "prefix_sum_rows": lambda f, sz, sc: {"out": np.cumsum(_norm(f("in"), sz), axis=1).ravel()},
    "softmax": lambda f, sz, sc: {"y": _softmax(_norm(f("x"), sz)).ravel()},
    "layer_norm": lambda f, sz, sc: {
        "y": (
            (_norm(f("x"), sz) - _norm(f("x"), sz).mean(1, keepdims=True))
            / np.sqrt(_norm(f("x"), sz).var(1, keepdims=True) + sc["eps"])
            * f("gamma")
            + f("beta")
        ).ravel()
    },
    "rms_norm": lambda f, sz, sc: {
        "y": (
            _norm(f("x"), sz)
            / np.sqrt((_norm(f("x"), sz) ** 2).mean(1, keepdims=True) + sc["eps"])
            * f("weight")
        ).ravel()
    },
    "gelu": lambda f, sz, sc: {"y": _gelu(f("x"))},
    "rope": lambda f, sz, sc: {"q": _rope(f("q"), f("cos_t"), f("sin_t"), sz)},
    "silu_and_mul": lambda f, sz, sc: {
        "out": (
            (g := f("x").reshape(sz["tokens"], 2 * sz["d"])[:, : sz["d"]])
            / (1 + np.exp(-g))
            * f("x").reshape(sz["tokens"], 2 * sz["d"])[:, sz["d"] :]
        ).ravel()
    },
    "spmv_csr": lambda f, sz, sc: {
        "y": _csr_dense(f("row_ptr"), f("col_idx"), f("vals"), sz["rows"], sz["cols"]) @ f("x")
    },
    "spmv_ell": lambda f, sz, sc: {"y": _ell_dense(f("col_idx"), f("vals"), sz) @ f("x")},
    "spmm_csr": lambda f, sz, sc: {
        "C": (
            _csr_dense(f("row_ptr"), f("col_idx"), f("vals"), sz["rows"], sz["k"])
            @ f("B").reshape(sz["k"], sz["n"])
        ).ravel()
    },
    "stencil2d": lambda f, sz, sc: {"out": _stencil2d(f("in"), sz)},
    "stencil3d": lambda f, sz, sc: {"out": _stencil3d(f("in"), sz, sc["alpha"])},
    "monte_carlo": lambda f, sz, sc: {"partial": _monte_carlo(f("seeds"), sz)},
}


def _reference_for(name: str):  # type: ignore[no-untyped-def]
    base = name.removesuffix("_f32").removesuffix("_bf16").removesuffix("_i32")
    return REFERENCES[base]


def test_every_suite_kernel_has_a_reference() -> None:
    for item in ITEMS:
        assert _reference_for(item.kernel.name) is not None


@pytest.mark.parametrize("item", ITEMS, ids=[i.kernel.name for i in ITEMS])
def test_baseline_matches_a_numpy_reference(evaluator, item, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cp = pytest.importorskip("cupy", reason="CuPy runs the reference check")
    from cuda_llm_lsp.evaluate.compare import as_float64, storage_dtype
    from cuda_llm_lsp.evaluate.inputs import case_rng, make_inputs

    _, facts = evaluator
    spec = item.spec
    binary = build_binary(
        item.text, item.path, item.kernel.name, Settings(), instance=spec.instance, arch=facts.arch
    )
    assert isinstance(binary, KernelBinary)
    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(binary.cubin)
    fn = cp.RawModule(path=str(cubin)).get_function(binary.entry)
    case = spec.cases()[2]
    inputs = make_inputs(spec, case, case_rng(7, case.index), item.path.parent)
    args, device = [], {}
    for arg in spec.args:
        if arg.is_pointer:
            sd = storage_dtype(arg.dtype or "float32")
            host = inputs.get(arg.name)
            if host is None:
                host = np.zeros(case.counts[arg.name], dtype=sd)
            device[arg.name] = cp.asarray(np.ascontiguousarray(host))
            args.append(device[arg.name])
        else:
            value = case.scalars[arg.name]
            args.append(np.float32(value) if "float" in arg.c_type else np.int32(value))
    fn(case.grid, case.block, tuple(args), shared_mem=case.smem)
    cp.cuda.runtime.deviceSynchronize()

    def f(name: str) -> np.ndarray:
        a = spec.arg(name)
        assert a is not None
        return as_float64(inputs[name], a.dtype or "float32")

    expected = _reference_for(item.kernel.name)(f, case.sizes, case.scalars)
    for name, want in expected.items():
        a = spec.arg(name)
        assert a is not None
        got = as_float64(cp.asnumpy(device[name]), a.dtype or "float32")
        tol = 3e-2 if a.dtype == "bfloat16" or floor_precision(spec) == "bf16" else 1e-3
        np.testing.assert_allclose(
            got, want, rtol=tol, atol=tol, err_msg=f"{item.kernel.name}.{name}"
        )


def floor_precision(spec) -> str:  # type: ignore[no-untyped-def]
    from cuda_llm_lsp.evaluate.roofline import precision

    return precision(spec)
