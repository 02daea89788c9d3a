"""GPU tests: skipped where there is no CUDA GPU or driver, with one short reason (the same on
every skip line of the summary; `no_gpu_reason()` keeps the details for tests that need them)."""

from __future__ import annotations

import functools

import pytest

#: The reason every GPU test gives when it skips.
SKIP_REASON = "no CUDA GPU on this machine"


@functools.lru_cache(maxsize=1)
def no_gpu_reason() -> str | None:
    """None when a CUDA device can be used, else why not (asked once, in this process)."""
    try:
        from cuda.bindings import driver
    except Exception as exc:
        return f"cuda-python is not importable: {exc}"
    try:
        (err,) = driver.cuInit(0)
    except Exception as exc:  # libcuda missing
        return f"no CUDA driver: {exc}"
    if int(err) != 0:
        return f"cuInit failed with CUDA error {int(err)}"
    err, count = driver.cuDeviceGetCount()
    if int(err) != 0 or count < 1:
        return "no CUDA device"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    reason = no_gpu_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=SKIP_REASON)
    for item in gpu_items:
        item.add_marker(skip)
