"""`bench` on a spec made from a capture, on the driver double (issue 39): the timed case runs
on the captured bytes, and the original must first reproduce the captured outputs; a capture
whose outputs it does not reproduce is refused with that reason. Also `cuda-llm spec
--from-capture` end to end, and the capture library building against the toolkit's headers."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cuda_llm_lsp.compile.capture_lib import CaptureBuildError, capture_library, find_toolchain
from tests.unit.test_spec_from_capture import _write_capture

ROOT = Path(__file__).resolve().parents[2]

ACCUMULATE = """\
extern "C" __global__ void accumulate(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += 2.0f * x[i];
}
"""


def cli(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["CUDA_LLM_LSP_DRIVER"] = "tests.unit.fake_cuda_driver"
    env["XDG_CACHE_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "cuda_llm_lsp.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=env,
    )


def _capture(directory: Path, n: int, wrong: bool = False) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    after = y + 2 * x
    if wrong:
        after[n // 2] += 1.0
    _write_capture(
        directory,
        {"n": n},
        [("x", x.tobytes(), None), ("y", y.tobytes(), after.tobytes())],
        grid=((n + 255) // 256, 1, 1),
        block=(256, 1, 1),
        demangled="accumulate",
    )


def test_spec_from_capture_benches_on_the_captured_data(tmp_path: Path) -> None:
    source = tmp_path / "acc.cu"
    source.write_text(ACCUMULATE)
    _capture(tmp_path / "cap", 5000)
    printed = cli("spec", str(source), "--from-capture", str(tmp_path / "cap"), home=tmp_path)
    assert printed.returncode == 0, printed.stderr
    assert 'args.y = "inout float32[n]"' in printed.stdout
    assert 'args.x = "in float32[n]"' in printed.stdout
    assert 'grid = "cdiv(n, 256)"' in printed.stdout
    assert source.read_text() == ACCUMULATE  # printed only
    written = cli(
        "spec", str(source), "--from-capture", str(tmp_path / "cap"), "--write", home=tmp_path
    )
    assert written.returncode == 0, written.stderr
    assert source.read_text() == printed.stdout + ACCUMULATE
    out = cli("bench", str(source), home=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "n=5000): ok" in out.stdout, out.stdout
    # a second --write replaces the spec, never stacks a second one
    again = cli(
        "spec", str(source), "--from-capture", str(tmp_path / "cap"), "--write", home=tmp_path
    )
    assert again.returncode == 0 and source.read_text().count("@cuda-llm") == 1


def test_outputs_the_original_does_not_reproduce_are_refused(tmp_path: Path) -> None:
    source = tmp_path / "acc.cu"
    source.write_text(ACCUMULATE)
    _capture(tmp_path / "cap", 5000, wrong=True)
    assert cli("spec", str(source), "--from-capture", "cap", "--write", home=tmp_path).returncode
    # (a relative --from-capture is taken from the working directory: here the repository)
    written = cli(
        "spec", str(source), "--from-capture", str(tmp_path / "cap"), "--write", home=tmp_path
    )
    assert written.returncode == 0, written.stderr
    out = cli("bench", str(source), home=tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "does not reproduce the captured outputs" in out.stdout + out.stderr, out.stdout
    assert "y[2500]" in out.stdout + out.stderr, out.stdout


def test_a_capture_outside_the_source_tree_is_refused(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    source = tmp_path / "src" / "acc.cu"
    source.write_text(ACCUMULATE)
    _capture(tmp_path / "cap", 300)
    out = cli("spec", str(source), "--from-capture", str(tmp_path / "cap"), home=tmp_path)
    assert out.returncode == 2
    assert "outside" in out.stderr and "--out" in out.stderr, out.stderr


def test_capture_usage_errors(tmp_path: Path) -> None:
    out = cli("capture", "--out", str(tmp_path / "c"), home=tmp_path)
    assert out.returncode == 2 and "after --" in out.stderr
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "notes.txt").write_text("mine")
    busy = cli("capture", "--out", str(tmp_path / "c"), "--", "/bin/true", home=tmp_path)
    assert busy.returncode == 1 and "not a capture's" in busy.stderr, busy.stderr
    assert (tmp_path / "c" / "notes.txt").read_text() == "mine"


def test_the_capture_library_builds_and_exports_its_entry(tmp_path: Path) -> None:
    try:
        toolchain = find_toolchain()
    except CaptureBuildError as exc:
        pytest.skip(str(exc))
    os.environ["XDG_CACHE_HOME"] = str(tmp_path)  # (platformdirs reads it on each call)
    try:
        library = capture_library(toolchain)
    finally:
        del os.environ["XDG_CACHE_HOME"]
    assert library.is_file() and str(library).startswith(str(tmp_path))
    nm = subprocess.run(
        ["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True, check=True
    )
    exported = [line.split()[-1] for line in nm.stdout.splitlines()]
    assert exported == ["InitializeInjection"], exported  # nothing else leaks into the program
    # loaded without CUDA_LLM_CAPTURE_OUT it stays out of the way (and needs no libcuda)
    lib = ctypes.CDLL(str(library))
    os.environ.pop("CUDA_LLM_CAPTURE_OUT", None)
    assert lib.InitializeInjection() == 1


FAKE_PROGRAM = """\
import json, os, signal, sys
out = os.environ["CUDA_LLM_CAPTURE_OUT"]
assert os.environ["CUDA_INJECTION64_PATH"].endswith(".so")
assert sys.stdin.read() == ""  # stdin is closed, never the caller's
seen = {"version": 1, "graph_launches": int(sys.argv[2]), "runtime_launches": 0,
        "matched": 0, "captured": False, "kernels": {"spin(float*, int)": 3, "gemm": 1}}
with open(os.path.join(out, "seen.json"), "w") as f:
    json.dump(seen, f)
if sys.argv[1] == "crash":
    os.kill(os.getpid(), signal.SIGSEGV)
"""


@pytest.mark.parametrize("mode", ["exit", "crash"])
def test_what_was_seen_is_said_when_nothing_is_captured(tmp_path: Path, mode: str) -> None:
    """(A Python stand-in writes the library's seen.json, as a program that launched other
    kernels, and CUDA graphs, would leave it.)"""
    from cuda_llm_lsp.engine.capture import CaptureRequest, run_capture

    script = tmp_path / "fake.py"
    script.write_text(FAKE_PROGRAM)
    try:
        capture_library()
    except CaptureBuildError as exc:
        pytest.skip(str(exc))
    command = (sys.executable, str(script), mode, "2")
    outcome = run_capture(CaptureRequest(command, tmp_path / "c", kernel="saxpy", quiet=True))
    assert not outcome.ok
    assert "never launched a kernel matching 'saxpy'" in outcome.message, outcome.message
    assert "spin(float*, int) ×3" in outcome.message and "gemm ×1" in outcome.message
    assert "2 CUDA graphs" in outcome.message
    if mode == "crash":
        assert "killed by signal 11 (it crashed)" in outcome.message
    else:
        assert "exited with status 0" in outcome.message
    assert outcome.seen == {"spin(float*, int)": 3, "gemm": 1}


REPLAY_PROGRAM = """\
import os, shutil, sys
src, out = sys.argv[1], os.environ["CUDA_LLM_CAPTURE_OUT"]
assert os.environ["CUDA_LLM_CAPTURE_KERNEL"] == "_Z17layernorm_forward"  # the capture's kernel
assert os.environ["CUDA_LLM_CAPTURE_LAUNCH"] == "3"  # and its launch
for name in os.listdir(src):
    shutil.copyfile(os.path.join(src, name), os.path.join(out, name))
"""


@pytest.mark.parametrize("wrong", [False, True])
def test_verify_compares_the_new_run_with_the_capture(tmp_path: Path, wrong: bool) -> None:
    """(A Python stand-in for the rebuilt program leaves a prepared capture, as the library
    would: the same outputs, or one element off.)"""
    try:
        capture_library()
    except CaptureBuildError as exc:
        pytest.skip(str(exc))
    source = tmp_path / "acc.cu"
    source.write_text(ACCUMULATE)
    _capture(tmp_path / "cap", 5000)
    _capture(tmp_path / "rerun", 5000, wrong=wrong)
    assert cli("spec", str(source), "--from-capture", str(tmp_path / "cap"), "--write",
               home=tmp_path).returncode == 0  # fmt: skip
    (tmp_path / "prog.py").write_text(REPLAY_PROGRAM)
    out = cli(
        "verify", str(source), "--", sys.executable, str(tmp_path / "prog.py"),
        str(tmp_path / "rerun"), home=tmp_path,
    )  # fmt: skip
    assert "kernel accumulate: 0.25 ms captured, 0.25 ms now (1x)" in out.stdout, out.stdout
    assert "program:" in out.stdout
    if wrong:
        assert out.returncode == 1, out.stdout + out.stderr
        assert "y: 1 of 5000 elements differ from the capture's (first at [2500]" in out.stdout
    else:
        assert out.returncode == 0, out.stdout + out.stderr
        assert "the outputs match the capture's" in out.stdout


def test_cupti_is_found_in_a_wheels_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`nvidia-cuda-cupti` for CUDA 13 installs nvidia/cu13/{include,lib} with only a
    versioned libcupti.so.13: found through CUDA_HOME (as through site-packages)."""
    root = tmp_path / "nvidia" / "cu13"
    (root / "include").mkdir(parents=True)
    (root / "lib").mkdir()
    (root / "include" / "cupti.h").write_text("")
    (root / "include" / "cuda.h").write_text("")
    (root / "lib" / "libcupti.so.13").write_bytes(b"")
    monkeypatch.setenv("CUDA_HOME", str(root))
    monkeypatch.setenv("CXX", "/bin/true")
    toolchain = find_toolchain()
    assert toolchain.cupti_include == root / "include"
    assert toolchain.cupti_lib == root / "lib" / "libcupti.so.13"
    assert toolchain.cuda_include == root / "include"


@pytest.mark.parametrize("wrong", [False, True])
def test_an_evaluation_first_checks_the_original_reproduces_the_capture(
    tmp_path_factory: pytest.TempPathFactory, wrong: bool
) -> None:
    """The optimize path (`evaluate`): a candidate is judged on the captured data once the
    original reproduces the captured outputs; otherwise the evaluation is refused as the
    original's failure (`BaselineFailed`), naming the first differing element."""
    from cuda_llm_lsp.evaluate import timing
    from cuda_llm_lsp.evaluate.types import BaselineFailed, KernelBinary
    from cuda_llm_lsp.source.kernels import find_kernels
    from cuda_llm_lsp.source.spec import parse_spec
    from tests.unit.fake_cuda_driver import cubin
    from tests.unit.test_evaluator_rules import fake_gpu

    root = tmp_path_factory.mktemp("eval")
    _capture(root / "cap", 5000, wrong=wrong)
    source = root / "acc.cu"
    source.write_text(ACCUMULATE)
    assert cli("spec", str(source), "--from-capture", str(root / "cap"), "--write",
               home=root).returncode == 0  # fmt: skip
    text = source.read_text()
    spec, errors = parse_spec(find_kernels(text)[0], text)
    assert spec is not None and spec.capture == "cap", errors

    def binary(name: str) -> KernelBinary:
        return KernelBinary(source_name="acc", entry=name, cubin=cubin(name), arch="sm_90")

    for ev in fake_gpu(tmp_path_factory, timing.Plan(budget_s=0.3, batch=5)):
        if wrong:
            with pytest.raises(BaselineFailed, match=r"does not reproduce the captured outputs"):
                ev.evaluate(binary("accumulate"), binary("accumulate_fast"), spec,
                            spec_dir=root, seed=3)  # fmt: skip
        else:
            result = ev.evaluate(
                binary("accumulate"), binary("accumulate_fast"), spec, spec_dir=root, seed=3
            )
            assert result.status == "ok", result.message
