"""Every suite kernel has a usable spec and compiles with NVRTC; every hand-written replay
candidate is found by the replay, keeps (or, when labelled wrong, breaks) the signature and
builds, and its launch block (if any) runs on every case, hidden ones included; the sparse input
hooks build valid structures."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.evaluate.candidate import CandidateRejected, build_binary
from cuda_llm_lsp.evaluate.launch import bad_launch
from cuda_llm_lsp.evaluate.recorded import DEFAULT_DEVICE
from cuda_llm_lsp.evaluate.types import KernelBinary
from cuda_llm_lsp.fsr.client import extract_kernel
from cuda_llm_lsp.fsr.launch import candidate_launch
from cuda_llm_lsp.fsr.toolchain import clean_candidate
from cuda_llm_lsp.source.kernels import find_kernels
from cuda_llm_lsp.source.spec import parse_spec
from cuda_llm_lsp.suite.runner import discover

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "benchmarks" / "suite"
RECORDING = ROOT / "benchmarks" / "recordings" / "hand-written"
FILES = sorted(SUITE.glob("*.cu"))
KERNELS = [(p, k.name) for p in FILES for k in find_kernels(p.read_text())]
RECORDS = sorted(RECORDING.glob("*/*-handwritten.json"))


def test_suite_spans_the_scenarios_with_enough_kernels() -> None:
    found = discover(SUITE)
    assert len(found) >= 16
    assert {k.scenario for k in found} == {"Basic algebra", "LLM kernels", "Sparse", "Scientific"}
    bf16 = [k for k in found if k.spec and any(a.dtype == "bfloat16" for a in k.spec.args)]
    assert len(bf16) >= 8


@pytest.mark.parametrize(("path", "name"), KERNELS, ids=[n for _, n in KERNELS])
def test_suite_kernel_has_a_spec_and_compiles(path: Path, name: str) -> None:
    text = path.read_text()
    kernel = next(k for k in find_kernels(text) if k.name == name)
    spec, errors = parse_spec(kernel, text)
    assert errors == [] and spec is not None
    cases = spec.cases()
    assert len(cases) >= 3
    assert spec.flops is not None or name == "transpose_f32"  # a transpose does no arithmetic
    sizes = [v for c in cases[:-1] for v in c.sizes.values()]
    assert 1 in sizes  # an awkward size in every spec
    binary = build_binary(text, path, name, Settings(), instance=spec.instance, arch="sm_90")
    assert isinstance(binary, KernelBinary), getattr(binary, "message", "")


@pytest.mark.parametrize("record", RECORDS, ids=[r.stem for r in RECORDS])
def test_hand_written_candidates_replay_and_build(record: Path) -> None:
    data = json.loads(record.read_text())
    assert data["label"] == "hand-written" and "not model output" in data["reply"]["model"]
    assert data["reply"]["text"].startswith("HAND-WRITTEN candidate (not model output)")
    kernel = data["kernel"]
    path = next(p for p, n in KERNELS if n == kernel)
    text = path.read_text()
    code, error = extract_kernel(data["reply"]["text"], kernel, "stop")
    assert error is None and code is not None
    spec, _ = parse_spec(next(k for k in find_kernels(text) if k.name == kernel), text)
    assert spec is not None
    built = build_binary(
        text,
        path,
        kernel,
        Settings(),
        kernel_source=clean_candidate(code, text),
        instance=spec.instance,
        arch="sm_90",
    )
    if "DELIBERATELY WRONG" in code and "signature" in code:
        assert isinstance(built, CandidateRejected) and built.status == "signature_mismatch"
    else:
        assert isinstance(built, KernelBinary), getattr(built, "message", "")
        # its own launch (issue [launch]) is valid on every case and every hidden case of an
        # H100, with the kernel's static shared memory
        launch = candidate_launch(code, kernel, spec)
        assert not isinstance(launch, str), launch
        if launch is not None:
            static = built.resources.shared_bytes if built.resources else 0
            problem = bad_launch(launch.applied_to(spec), DEFAULT_DEVICE, 1, static_smem=static)
            assert problem is None, problem
    # vector loads and stores only behind a check of the address (the hidden offset case passes
    # buffers that are element-aligned only)
    if re.search(r"reinterpret_cast<(const )?(float[24]|uint[24]|__nv_bfloat162)\s*\*>", code):
        assert "reinterpret_cast<unsigned long long>" in code, "an unchecked vector access"


def test_recording_covers_six_kernels_and_a_wrong_candidate() -> None:
    kernels = {json.loads(r.read_text())["kernel"] for r in RECORDS}
    assert len(kernels) >= 6
    assert any("DELIBERATELY WRONG" in json.loads(r.read_text())["reply"]["text"] for r in RECORDS)


def test_recording_has_launch_changing_candidates() -> None:
    relaunched = set()
    for record in RECORDS:
        data = json.loads(record.read_text())
        code, _ = extract_kernel(data["reply"]["text"], data["kernel"], "stop")
        if code and "/* @cuda-llm launch" in code:
            relaunched.add(data["kernel"])
    assert relaunched >= {
        "softmax_f32",
        "softmax_bf16",
        "rms_norm_bf16",
        "matvec_f32",
        "matvec_bf16",
        "transpose_f32",
        "matmul_f32",
    }


def _hooks():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(SUITE))
    try:
        import sparse_inputs
    finally:
        sys.path.remove(str(SUITE))
    return sparse_inputs


@pytest.mark.parametrize(
    ("rows", "cols", "nnz"), [(1, 1, 1), (17, 19, 50), (3, 2, 6), (1000, 999, 5000)]
)
def test_csr_hook_builds_sorted_unique_rows(rows: int, cols: int, nnz: int) -> None:
    d = _hooks().spmv_csr({"rows": rows, "cols": cols, "nnz": nnz}, np.random.default_rng(1))
    rp, ci = d["row_ptr"], d["col_idx"]
    assert rp.dtype == np.int32 and ci.dtype == np.int32 and d["vals"].dtype == np.float32
    assert rp[0] == 0 and rp[-1] == nnz and np.all(np.diff(rp) >= 0) and ci.size == nnz
    assert ci.min() >= 0 and ci.max() < cols
    for r in range(rows):
        assert np.all(np.diff(ci[rp[r] : rp[r + 1]]) > 0)


def test_ell_hook_pads_with_minus_one_and_zero() -> None:
    rows, cols, width = 40, 30, 5
    d = _hooks().spmv_ell({"rows": rows, "cols": cols, "width": width}, np.random.default_rng(2))
    ci = d["col_idx"].reshape(width, rows).T
    v = d["vals"].reshape(width, rows).T
    for r in range(rows):
        used = int((ci[r] >= 0).sum())
        assert np.all(ci[r, used:] == -1) and np.all(v[r, used:] == 0)
        assert np.all(np.diff(ci[r, :used]) > 0) and (used == 0 or ci[r, used - 1] < cols)
