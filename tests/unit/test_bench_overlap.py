"""`cuda-llm bench` compiles while the GPU worker starts, and again for a device of another arch.

Issue 18's `bench` <= 2 s: the worker's start (process, CUDA context, device facts: ~0.8 s on an
H100) and the NVRTC compile (~0.6 s) used to add up. An evaluator whose `device_facts` waits for
the first compile stands in for the slow start; real NVRTC compiles the kernel.
"""

from __future__ import annotations

import argparse
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from cuda_llm_lsp.cli import bench
from cuda_llm_lsp.compile.arch import resolve_arch
from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.evaluate.inputs import InputError
from cuda_llm_lsp.evaluate.types import DeviceFacts, KernelBinary
from tests.gpu.kernels import TWICE

pytest.importorskip("cuda.bindings.nvrtc")


def facts(arch: str) -> DeviceFacts:
    major, minor = int(arch[3:-1]), int(arch[-1])
    return DeviceFacts(
        "stand-in",
        (major, minor),
        arch,
        1,
        1024,
        48 << 10,
        48 << 10,
        100 << 10,
        65536,
        65536,
        1 << 20,
        1 << 30,
        1_000_000,
        1_000_000,
        256,
    )


@dataclass
class SlowStartEvaluator:
    """Reports `arch` once a compile has happened (or after `wait_s`), as a worker still
    starting would; `benchmark` records the binary it got."""

    arch: str
    compiled: threading.Event
    wait_s: float = 10.0
    compiled_before_facts: bool | None = None
    benchmarked: list[KernelBinary] = field(default_factory=list)
    closed: bool = False

    def device_facts(self) -> DeviceFacts:
        self.compiled_before_facts = self.compiled.wait(self.wait_s)
        return facts(self.arch)

    def benchmark(self, binary: KernelBinary, *args: Any, **kwargs: Any) -> Any:
        self.benchmarked.append(binary)
        raise InputError("stand-in evaluator: no run")

    def close(self) -> None:
        self.closed = True


def run_bench(monkeypatch: pytest.MonkeyPatch, path: Path, evaluator: SlowStartEvaluator):
    compiles: list[str | None] = []
    from cuda_llm_lsp.engine import actions

    real_build = actions.build_binary

    def build(*args: Any, **kwargs: Any) -> Any:
        result = real_build(*args, **kwargs)
        compiles.append(kwargs.get("arch"))
        evaluator.compiled.set()
        return result

    monkeypatch.setattr(actions, "build_binary", build)
    monkeypatch.setattr(bench, "gpu_evaluator", lambda: evaluator)
    monkeypatch.setattr(bench, "gpu_missing", lambda: None)  # the stand-in is the GPU
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    code = bench.run(parser.parse_args([str(path), "--format", "json"]))
    return code, compiles


def test_the_kernel_compiles_while_the_worker_starts(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CUDA_LLM_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "twice.cu"
    path.write_text(TWICE)
    expected = resolve_arch(Settings())
    evaluator = SlowStartEvaluator(expected, threading.Event())
    code, compiles = run_bench(monkeypatch, path, evaluator)
    assert code == bench.EXIT_USAGE  # the stand-in's InputError
    assert evaluator.compiled_before_facts, "the compile waited for the worker's start"
    assert compiles == [expected]  # the device has the expected arch: compiled once
    assert [b.arch for b in evaluator.benchmarked] == [expected]
    assert evaluator.closed


def test_a_device_of_another_arch_gets_its_own_compile(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CUDA_LLM_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "twice.cu"
    path.write_text(TWICE)
    expected = resolve_arch(Settings())
    other = "sm_75" if expected != "sm_75" else "sm_80"
    evaluator = SlowStartEvaluator(other, threading.Event())
    code, compiles = run_bench(monkeypatch, path, evaluator)
    assert code == bench.EXIT_USAGE
    assert compiles == [expected, other]
    assert [b.arch for b in evaluator.benchmarked] == [other]
