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
def test_example_cubin_loads_and_has_the_lowered_kernel(name: str) -> None:
    from cuda.bindings import driver

    path = ROOT / "examples" / name
    analysis = analyze(path.read_text(), path, Settings())
    assert analysis.compile is not None and analysis.compile.ok
    assert analysis.compile.cubin
    _check(driver.cuInit(0))
    device = _check(driver.cuDeviceGet(0))
    context = _check(driver.cuDevicePrimaryCtxRetain(device))
    _check(driver.cuCtxPushCurrent(context))
    try:
        module = _check(driver.cuModuleLoadData(analysis.compile.cubin))
        for info in analysis.kernels:
            assert info.name_expression is not None
            symbol = analysis.compile.lowered_names[info.name_expression]
            function = _check(driver.cuModuleGetFunction(module, symbol.encode()))
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
