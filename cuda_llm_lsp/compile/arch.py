"""Which GPU architecture to compile for: the configured one, else the local GPU's, else sm_90."""

from __future__ import annotations

import functools
import re

from cuda_llm_lsp.config import DEFAULT_ARCH, Settings

_ARCH = re.compile(r"^(?:sm_|compute_)?(\d{2,3})([af]?)$")


def normalize_arch(value: str) -> str | None:
    """ "sm_90", "90", "compute_90a" -> "sm_90" / "sm_90a"; None when it is not an architecture."""
    match = _ARCH.match(value.strip().lower())
    if match is None:
        return None
    return f"sm_{match.group(1)}{match.group(2)}"


def resolve_arch(configured: str | Settings | None) -> str:
    """The architecture to compile for; an unreadable configured value falls back like None.

    Takes the configured string, or the Settings carrying it.
    """
    if isinstance(configured, Settings):
        configured = configured.arch
    if configured:
        arch = normalize_arch(configured)
        if arch is not None:
            return arch
    return local_gpu_arch() or DEFAULT_ARCH


@functools.lru_cache(maxsize=1)
def local_gpu_arch() -> str | None:
    """sm_XY of device 0 through the CUDA driver, or None (no driver, no GPU, any failure).

    Asked once per process: the answer does not change while we run, and a missing driver
    must cost one failed library lookup, not one per keystroke.
    """
    try:
        from cuda.bindings import driver
    except Exception:  # cuda-python missing or broken: no local GPU for us
        return None
    try:
        (err,) = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return None
        err, count = driver.cuDeviceGetCount()
        if err != driver.CUresult.CUDA_SUCCESS or count < 1:
            return None
        err, device = driver.cuDeviceGet(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return None
        attr = driver.CUdevice_attribute
        err, major = driver.cuDeviceGetAttribute(
            attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device
        )
        if err != driver.CUresult.CUDA_SUCCESS:
            return None
        err, minor = driver.cuDeviceGetAttribute(
            attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device
        )
        if err != driver.CUresult.CUDA_SUCCESS:
            return None
        return f"sm_{major}{minor}"
    except Exception:  # libcuda absent (DynamicLibNotFoundError) or unusable
        return None


# architectures with an arch-specific variant (wgmma, setmaxnreg, tcgen05...): `sm_90a` code runs
# on sm_90 devices only, which is where the evaluator runs what it builds
_ARCH_SPECIFIC = frozenset({"sm_90", "sm_100", "sm_103", "sm_120"})


def with_arch_features(arch: str) -> str:
    """`sm_90` -> `sm_90a`: the evaluator builds for the one GPU that runs the kernel, so its
    architecture-specific instructions are on, as the kernel's own build has them (CUTLASS's
    Hopper kernels stop on a device assert without them); others unchanged."""
    return f"{arch}a" if arch in _ARCH_SPECIFIC else arch
