"""The capture library (`compile/capture/inject.cpp`, docs/design.md "Capture"), built with the
host C++ compiler on first use against the toolkit's `cuda.h` and CUPTI, cached in the user
cache directory under a hash of its source and the toolchain it was built with.

CUPTI is looked for in the CUDA toolkit (`$CUDA_HOME`, `$CUDA_PATH`, `/usr/local/cuda`, the
toolkit of the `nvcc` on PATH: `include/` and `extras/CUPTI/`, `lib64/`, `lib/`,
`targets/*/`) and in the NVIDIA wheels (`nvidia/cuda_cupti`, `nvidia/cu13`) of this Python.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import site
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import platformdirs

SOURCE = Path(__file__).with_name("capture") / "inject.cpp"
BUILD_TIMEOUT_S = 180


class CaptureBuildError(RuntimeError):
    """The capture library cannot be built here: the message says what is missing."""


@dataclass(frozen=True)
class Toolchain:
    compiler: str
    cuda_include: Path  # holds cuda.h
    cupti_include: Path  # holds cupti.h
    cupti_lib: Path  # the libcupti.so* file to link


def _cuda_roots() -> list[Path]:
    roots: list[Path] = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        value = os.environ.get(var)
        if value:
            roots.append(Path(value))
    roots.append(Path("/usr/local/cuda"))
    nvcc = shutil.which("nvcc")
    if nvcc:
        roots.append(Path(nvcc).resolve().parent.parent)
    for sp in [*site.getsitepackages(), site.getusersitepackages(), *sys.path]:
        base = Path(sp) / "nvidia"
        roots.extend([base / "cuda_cupti", base / "cu13", base / "cuda_runtime"])
    seen: list[Path] = []
    for r in roots:
        if r.is_dir() and r not in seen:
            seen.append(r)
    return seen


def _includes(root: Path) -> list[Path]:
    dirs = [root / "include", root / "extras" / "CUPTI" / "include"]
    dirs += sorted((root / "targets").glob("*/include")) if (root / "targets").is_dir() else []
    return [d for d in dirs if d.is_dir()]


def _libs(root: Path) -> list[Path]:
    dirs = [root / "lib64", root / "lib", root / "extras" / "CUPTI" / "lib64"]
    dirs += sorted((root / "targets").glob("*/lib")) if (root / "targets").is_dir() else []
    return [d for d in dirs if d.is_dir()]


def find_toolchain() -> Toolchain:
    """The compiler, headers and CUPTI library to build with; `CaptureBuildError` naming what
    is missing and where it was looked for."""
    compiler = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if not compiler:
        raise CaptureBuildError("no C++ compiler (g++) on PATH: the capture library needs one")
    roots = _cuda_roots()
    cuda_h = next((d for r in roots for d in _includes(r) if (d / "cuda.h").is_file()), None)
    cupti_h = next((d for r in roots for d in _includes(r) if (d / "cupti.h").is_file()), None)
    lib = None
    for r in roots:
        for d in _libs(r):
            found = sorted(d.glob("libcupti.so*"))
            if found:
                lib = found[0]
                break
        if lib:
            break
    looked = ", ".join(str(r) for r in roots) or "nowhere (no CUDA toolkit found)"
    if cuda_h is None:
        raise CaptureBuildError(f"cuda.h not found (looked in {looked}); set CUDA_HOME")
    if cupti_h is None or lib is None:
        raise CaptureBuildError(
            f"CUPTI (cupti.h and libcupti.so) not found (looked in {looked}); install the "
            "CUDA toolkit's CUPTI or `pip install nvidia-cuda-cupti`, or set CUDA_HOME"
        )
    return Toolchain(compiler, cuda_h, cupti_h, lib)


def _cache_dir() -> Path:
    return Path(platformdirs.user_cache_dir("cuda-llm-lsp")) / "capture"


def capture_library(toolchain: Toolchain | None = None) -> Path:
    """The built library (cached by source and toolchain); built now if needed."""
    tc = toolchain or find_toolchain()
    source = SOURCE.read_bytes()
    parts = [
        source,
        *(str(v).encode() for v in (tc.compiler, tc.cuda_include, tc.cupti_include, tc.cupti_lib)),
    ]
    key = hashlib.sha256(b"\0".join(parts)).hexdigest()[:16]
    target = _cache_dir() / f"libcuda-llm-capture-{key}.so"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(f".{os.getpid()}.tmp")
    exports = target.with_suffix(f".{os.getpid()}.map")  # only InitializeInjection is visible
    exports.write_text("{ global: InitializeInjection; local: *; };\n")
    includes = [f"-I{tc.cuda_include}"]
    if tc.cupti_include != tc.cuda_include:
        includes.append(f"-I{tc.cupti_include}")
    command = [
        tc.compiler, "-std=c++17", "-O2", "-shared", "-fPIC", "-fvisibility=hidden",
        *includes, str(SOURCE), "-o", str(tmp),
        str(tc.cupti_lib), f"-Wl,-rpath,{tc.cupti_lib.parent}", "-ldl", "-lpthread",
        f"-Wl,--version-script={exports}", "-static-libstdc++", "-static-libgcc",
    ]  # fmt: skip
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CaptureBuildError(f"building the capture library failed: {exc}") from exc
    finally:
        exports.unlink(missing_ok=True)
    if done.returncode != 0:
        tmp.unlink(missing_ok=True)
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        raise CaptureBuildError(f"building the capture library failed:\n{tail}")
    os.replace(tmp, target)
    return target
