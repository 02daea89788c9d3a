"""The compile path on a real GPU: the local architecture is detected, and every example's cubin
loads with the driver and exposes its kernel under the lowered (mangled) name NVRTC reported."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cuda_llm_lsp.compile.analysis import analyze
from cuda_llm_lsp.config import Settings

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ("saxpy.cu", "transpose.cu", "reduction.cu", "softmax.cu", "matmul.cu")

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_LLM_CACHE_DIR", str(tmp_path / "cache"))


def _check(result: tuple) -> Any:
    from cuda.bindings import driver

    err, *rest = result
    assert err == driver.CUresult.CUDA_SUCCESS, err
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else tuple(rest)


def test_local_arch_is_detected_and_used() -> None:
    from cuda.bindings import driver

    from cuda_llm_lsp.compile.arch import local_gpu_arch, resolve_arch

    _check(driver.cuInit(0))
    device = _check(driver.cuDeviceGet(0))
    attr = driver.CUdevice_attribute
    major = _check(
        driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device)
    )
    minor = _check(
        driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device)
    )
    local_gpu_arch.cache_clear()
    assert local_gpu_arch() == f"sm_{major}{minor}"
    assert resolve_arch(None) == f"sm_{major}{minor}"


@pytest.mark.parametrize("name", EXAMPLES)
def test_each_kernels_binary_loads_with_the_registers_the_editor_shows(name: str) -> None:
    """The analysis no longer makes one whole-file cubin (a syntax pass, then code generation per
    kernel, issue 17): each kernel's binary, as the evaluator builds it, loads on the GPU and has
    the register count the code lens and `check` report."""
    from cuda.bindings import driver

    from cuda_llm_lsp.evaluate.candidate import build_binary
    from cuda_llm_lsp.evaluate.types import KernelBinary

    path = ROOT / "examples" / name
    text = path.read_text()
    analysis = analyze(text, path, Settings())
    assert analysis.compile is not None and analysis.compile.ok
    assert analysis.compile.cubin is None  # the syntax pass generates no code
    _check(driver.cuInit(0))
    device = _check(driver.cuDeviceGet(0))
    context = _check(driver.cuDevicePrimaryCtxRetain(device))
    _check(driver.cuCtxPushCurrent(context))
    try:
        for info in analysis.kernels:
            binary = build_binary(text, path, info.kernel.name, Settings())
            assert isinstance(binary, KernelBinary), binary
            module = _check(driver.cuModuleLoadData(binary.cubin))
            function = _check(driver.cuModuleGetFunction(module, binary.entry.encode()))
            registers = _check(
                driver.cuFuncGetAttribute(
                    driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NUM_REGS, function
                )
            )
            assert info.resources is not None and registers == info.resources.registers
            _check(driver.cuModuleUnload(module))
    finally:
        _check(driver.cuCtxPopCurrent())
        _check(driver.cuDevicePrimaryCtxRelease(device))
