"""The tuned examples the H100 run uses (examples/tune/: softmax block size, transpose tile,
matmul tile): each spec parses with its tunables, every allowed configuration compiles with NVRTC
as `cuda-llm tune` builds it (-DNAME=value) and has a launch an H100 can run, and the file with
another configuration written back as its default still builds whole with nvcc."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_llm_lsp.compile.nvcc import compile_file, find_nvcc
from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.evaluate.candidate import CandidateRejected
from cuda_llm_lsp.evaluate.recorded import DEFAULT_DEVICE
from cuda_llm_lsp.source.kernels import find_kernels
from cuda_llm_lsp.source.spec import parse_spec
from cuda_llm_lsp.tune.edit import tuned_text
from cuda_llm_lsp.tune.search import TuneRequest, binary_builder, launch_problem

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tune"
CASES = [("softmax_rows.cu", "softmax_rows", 6), ("transpose_tiled.cu", "transpose", 15),
         ("matmul_tiled.cu", "matmul", 36)]  # fmt: skip


@pytest.mark.parametrize(("name", "kernel_name", "count"), CASES)
def test_every_configuration_compiles_and_launches(name: str, kernel_name: str, count: int) -> None:
    path = EXAMPLES / name
    text = path.read_text()
    (kernel,) = [k for k in find_kernels(text) if k.name == kernel_name]
    spec, errors = parse_spec(kernel, text)
    assert spec is not None and spec.tunables is not None, errors
    configs = list(spec.tunables.configurations())
    assert len(configs) == count
    build = binary_builder(TuneRequest(text, kernel_name, spec, Settings(), path), "sm_90")
    for config in configs:
        assert launch_problem(spec.with_configuration(config), DEFAULT_DEVICE) is None, config
        built = build(config)
        assert not isinstance(built, CandidateRejected), (config, built.message)
        assert built.resources is not None and built.resources.spill_stores == 0, config


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not installed (the test extra installs it)")
@pytest.mark.parametrize(("name", "kernel_name", "count"), CASES)
def test_the_file_with_the_best_written_back_builds_whole(
    name: str, kernel_name: str, count: int, tmp_path: Path
) -> None:
    path = EXAMPLES / name
    text = path.read_text()
    (kernel,) = [k for k in find_kernels(text) if k.name == kernel_name]
    spec, _ = parse_spec(kernel, text)
    assert spec is not None and spec.tunables is not None
    other = list(spec.tunables.configurations())[-1]
    assert other != spec.tunables.default
    edited = tuned_text(text, kernel, spec, other)
    assert edited.text != text and edited.notes == ()
    copy = tmp_path / name
    copy.write_text(edited.text)
    result = compile_file(edited.text, copy, arch="sm_90")
    assert result.ok, result


def test_the_suite_has_tunables_on_at_least_six_kernels_with_runnable_launches() -> None:
    """The issue's suite acceptance: >= 6 kernels tune; every configuration allowed launches."""
    tunable = 0
    for path in sorted((EXAMPLES.parents[1] / "benchmarks" / "suite").glob("*.cu")):
        text = path.read_text()
        for kernel in find_kernels(text):
            spec, errors = parse_spec(kernel, text)
            if kernel.spec is None or spec is None or spec.tunables is None:
                continue
            tunable += 1
            assert [e for e in errors if e.severity == "error"] == []
            for config in spec.tunables.configurations():
                problem = launch_problem(spec.with_configuration(config), DEFAULT_DEVICE)
                assert problem is None, (path.name, kernel.name, config, problem)
    assert tunable >= 6
