"""The CUDA driver as the GPU worker sees it: which module (the real bindings, or the CPU tests'
double), its errors with a hint for the common launch failures, and the result code of a call.
"""

from __future__ import annotations

import ctypes
import importlib
import importlib.util
import os
import sys
from typing import Any

LAUNCH_ERRORS = {1, 701, 9}  # INVALID_VALUE, LAUNCH_OUT_OF_RESOURCES, INVALID_CONFIGURATION(9)
_ERROR_HINTS = {
    1: "invalid launch configuration (block too large, or more shared memory than allowed)",
    9: "invalid launch configuration",
    700: "illegal memory access",
    701: "too many resources requested for launch (registers or threads per block)",
    702: "launch timed out",
    710: "device-side assert triggered",
    714: "misaligned address",
    715: "illegal instruction",
    716: "misaligned address",
    717: "invalid address space",
    718: "invalid program counter",
    719: "unspecified launch failure (e.g. __trap())",
}


# CPU tests point this at a test double of cuda.bindings.driver (tests/unit/fake_cuda_driver.py)
DRIVER_ENV = "CUDA_LLM_LSP_DRIVER"


def driver_module() -> Any:
    name = os.environ.get(DRIVER_ENV)
    if name:
        return importlib.import_module(name)
    from cuda.bindings import driver

    return driver


def driver_missing() -> str | None:
    """Why the CUDA driver certainly cannot load here, or None (it may): checked before any
    compile, so a machine without a GPU hears so at once, not after seconds of compiling. Free
    where the GPU's device nodes exist (the worker loads the driver there anyway)."""
    name = os.environ.get(DRIVER_ENV)
    if name:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        return None if found else f"no CUDA driver library (the driver module {name!r})"
    if not sys.platform.startswith("linux") or any(
        os.path.exists(node)
        for node in ("/dev/nvidiactl", "/dev/dxg")  # dxg: WSL's GPU
    ):
        return None
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return "no CUDA driver library (libcuda.so.1) on this machine"
    return None


class CudaError(Exception):
    def __init__(self, code: int, where: str) -> None:
        self.code = code
        self.where = where
        hint = _ERROR_HINTS.get(code, "")
        super().__init__(f"{where}: CUDA error {code}{f' ({hint})' if hint else ''}")


class Timeout(Exception):
    pass


def code(result: Any) -> int:
    return int(result[0] if isinstance(result, tuple) else result)
