"""Where NVRTC's headers come from: the toolkit wheels, CCCL, and our stand-ins for libc/libstdc++.

NVRTC ships no standard library headers. nvcc gets them from the host compiler and implicitly
includes `cuda_runtime.h` (which drags in `<math.h>`, `<cstdlib>`, ...). We mirror that with a
pre-included prelude and a few small stand-ins in `stub_headers/`, most of which forward to
libcu++ (`cuda/std/...`) where it is cheap. Headers that only host code needs are dropped.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from cuda_llm_lsp.compile.nvcc_path import find_nvcc

STUB_DIR = Path(__file__).with_name("stub_headers")
PRELUDE = "cuda_llm_prelude.h"
# Stand-ins for device libraries that are not installed, used in their place (never via -I).
MISSING_DIR = STUB_DIR / "missing"


def _stub_names() -> frozenset[str]:
    """Include names with a stand-in in STUB_DIR, `cub/cub.cuh` included (found first via -I)."""
    found = set()
    for path in STUB_DIR.rglob("*"):
        name = path.relative_to(STUB_DIR).as_posix()
        if path.is_file() and name != PRELUDE and not path.is_relative_to(MISSING_DIR):
            found.add(name)
    return frozenset(found)


# Headers with a device-side stand-in in STUB_DIR (kept in the unit, found through -I):
# standard headers NVRTC lacks, and CUB's umbrella header, which refuses NVRTC with `#error`.
STUBBED: frozenset[str] = _stub_names()


# Host-only standard/system headers: the `#include` line is blanked, never reported.
def names(text: str) -> frozenset[str]:
    """The whitespace-separated names in `text` (for long literal lists)."""
    return frozenset(text.split())


HOST_ONLY: frozenset[str] = names(
    """
    algorithm any array atomic bitset cctype cerrno charconv chrono cinttypes clocale codecvt
    complex condition_variable csignal cstdarg ctime cuchar cwchar cwctype deque exception
    execution filesystem forward_list fstream functional future initializer_list iomanip ios
    iosfwd iostream istream iterator limits list locale map memory memory_resource mutex new
    numeric optional ostream queue random ratio regex scoped_allocator set shared_mutex
    span sstream stack stdexcept streambuf string string_view system_error thread tuple
    typeindex typeinfo unordered_map unordered_set utility valarray variant vector
    bit numbers concepts compare format ranges source_location barrier latch semaphore
    ctype.h errno.h locale.h signal.h stdarg.h time.h wchar.h unistd.h sys/time.h sys/types.h
    omp.h pthread.h windows.h fcntl.h dirent.h Python.h
    cudaProfiler.h cuda_profiler_api.h nvrtc.h nvToolsExt.h nvtx3/nvToolsExt.h
    cuda_gl_interop.h cudaGL.h cudaEGL.h cuda_egl_interop.h cuda_vdpau_interop.h cudaVDPAU.h
    """
)
# Device-side library headers that may be missing from the installed wheels: a missing one is
# worth a warning, since device code using it will fail with undefined names.
DEVICE_LIBRARIES: dict[str, str] = {
    "curand_kernel.h": "cuda-toolkit[curand]",
    "curand_philox4x32_x.h": "cuda-toolkit[curand]",
    "curand_mtgp32_kernel.h": "cuda-toolkit[curand]",
}
# The pip requirement that installs each well-known toolkit library's headers where the include
# search finds them (the environment cuda-llm runs from): named in the "cannot find" warning.
# Keys are header names, or prefixes ending in "/" or "_" (`cusolverDn.h` by "cusolver").
LIBRARY_PACKAGES: dict[str, str] = {
    "cublas": "cuda-toolkit[cublas]==13.*",
    "cusparse": "cuda-toolkit[cusparse]==13.*",
    "cusolver": "cuda-toolkit[cusolver]==13.*",
    "cufft": "cuda-toolkit[cufft]==13.*",
    "cufftw.h": "cuda-toolkit[cufft]==13.*",
    "curand": "cuda-toolkit[curand]==13.*",
    "cupti": "cuda-toolkit[cupti]==13.*",
    "nvToolsExt": "cuda-toolkit[nvtx]==13.*",
    "nvtx3/": "cuda-toolkit[nvtx]==13.*",
    "npp": "cuda-toolkit[npp]==13.*",
    "nvjpeg": "cuda-toolkit[nvjpeg]==13.*",
    "nvjitlink": "cuda-toolkit[nvjitlink]==13.*",
    "nvml.h": "cuda-toolkit[nvml]==13.*",
    "cufile.h": "cuda-toolkit[cufile]==13.*",
    "nccl": "nvidia-nccl-cu13",
    "cudnn": "nvidia-cudnn-cu13",
}


def library_package(name: str) -> str | None:
    """The pip requirement bringing `<name>` (`cublas_v2.h` -> cuda-toolkit[cublas]), or None."""
    for key, package in LIBRARY_PACKAGES.items():
        if name == key or (name.startswith(key) and _library_suffix(key, name[len(key) :])):
            return package
    return None


def library_stem(name: str) -> str | None:
    """The prefix of the names `<name>` declares, lower-case, for a library of
    `LIBRARY_PACKAGES` (`cublas_v2.h` -> "cublas": cublasHandle_t, CUBLAS_OP_N), else None."""
    for key in LIBRARY_PACKAGES:
        if name == key or (name.startswith(key) and _library_suffix(key, name[len(key) :])):
            stem = key.removesuffix(".h").rstrip("/_").lower()
            return {"nvtoolsext": "nvtx", "nvtx3": "nvtx", "cufftw": "cufft"}.get(stem, stem)
    return None


def _library_suffix(key: str, rest: str) -> bool:
    """`rest` continues library `key`'s name (`_v2.h`, `Lt.h`, `Dn.h`; NPP's `i.h`), not
    another word (`cublasfoo`)."""
    return key.endswith("/") or key == "npp" or rest[:1] in ("", ".", "_") or rest[:1].isupper()


# The stand-in each missing device library gets, so that one warning replaces the false errors
# that its undefined names would cause everywhere else in the file.
MISSING_STAND_INS: dict[str, str] = {
    "curand_kernel.h": "curand_kernel.h",
    "curand_philox4x32_x.h": "curand_kernel.h",
    "curand_mtgp32_kernel.h": "curand_kernel.h",
}
# CUB 2.0.0 (CCCL 2) is the first whose headers NVRTC reads (`is_nvrtc_ready`).
_CUB_VERSION = re.compile(r"#\s*define\s+CUB_VERSION\s+(\d+)")
HOST_ONLY_PREFIXES = ("thrust/", "sys/", "nvtx3/", "bits/", "ext/", "tr1/", "pybind11/")
# PyTorch's headers are host C++ NVRTC cannot read (thousands of them, through -I or not): each
# is read as our stand-in for what extension kernels use of them (stub_headers/cuda_llm_torch.h).
_TORCH_PREFIXES = ("torch/", "ATen/", "c10/", "caffe2/")
TORCH_STAND_IN = "#pragma once\n#include <cuda_llm_torch.h>\n"
# CUB's host-side algorithms (`cub::DeviceScan`) refuse NVRTC with an `#error`; kernels never
# call them, but use what they bring (`cub::ScanTileState`, block primitives): each is read as
# our device-side `cub/cub.cuh` (`cub_host_algorithm`).
_CUB_HOST_ALGORITHMS = ("cub/device/", "cub/util_allocator.cuh")
CUB_HOST_ALGORITHM_STAND_IN = "#pragma once\n#include <cub/cub.cuh>\n"
# Headers under a host-only prefix that NVRTC compiles (checked with Thrust 1.17 and CCCL 3):
# Thrust's configuration, only macros, such as THRUST_NAMESPACE_BEGIN, with which user headers
# (CuPy's complex.h) open namespace thrust for their own code.
DEVICE_SAFE_PREFIXES = ("thrust/detail/config/", "thrust/detail/config.h", "thrust/version.h")


# The toolkit libraries NVRTC reads headers of, and where each sits in a toolkit's include
# directory: (subdirectory, a header that shows it is there).
_TOOLKIT_LIBRARIES: dict[str, tuple[str, str]] = {
    "cudart": ("", "cuda_runtime_api.h"),
    "cccl": ("cccl", "cuda/std/version"),
    "curand": ("", "curand_kernel.h"),
}


@functools.lru_cache(maxsize=1)
def toolkit_include_dirs() -> tuple[str, ...]:
    """Toolkit header directories: cudart (with crt/), CCCL, cuRAND, as cuda.pathfinder finds
    them in NVRTC's own environment; one it lacks (a PyTorch venv's wheels have no CCCL) from
    the toolkit of the nvcc in use, where nvcc reads it (`borrowed_include_dirs`).

    pathfinder's last resort, a Python subprocess that loads cudart to find the toolkit it came
    from, is asked only where cudart's headers are found nowhere else (a toolkit the dynamic
    loader reaches, and nothing names): it cost 0.3 s on a quiet machine and 0.7 s while the
    compile processes start, inside the first document's check, for cuRAND's headers in a
    wheel set without them, which it did not find either."""
    found = {lib: _in_environment(lib) or _from_nvcc_toolkit(lib) for lib in _TOOLKIT_LIBRARIES}
    if found["cudart"] is None:
        found = {lib: where or _probed(lib) for lib, where in found.items()}
    return tuple(dict.fromkeys(where for where in found.values() if where))


def _in_environment(lib: str) -> str | None:
    """`lib`'s header directory as cuda.pathfinder finds it without its subprocess probe:
    wheels, conda, `CUDA_HOME`/`CUDA_PATH`. Where this version of pathfinder keeps its steps
    elsewhere, its public lookup (`_probed`)."""
    try:
        from cuda.pathfinder._headers import find_nvidia_headers as lookup

        quick = tuple(s for s in lookup.FIND_STEPS if s is not lookup.find_via_ctk_root_canary)
        located = lookup.run_find_steps(lookup.HEADER_DESCRIPTORS[lib], quick)
    except (ImportError, AttributeError, KeyError, TypeError):
        return _probed(lib)
    except Exception:  # a missing wheel only loses those headers
        return None
    return str(located.abs_path) if located is not None else None


def _probed(lib: str) -> str | None:
    """`lib`'s header directory by pathfinder's whole lookup, its subprocess probe included."""
    try:
        from cuda import pathfinder

        found = pathfinder.find_nvidia_header_directory(lib)
    except Exception:  # no pathfinder, or a missing wheel: only those headers are lost
        return None
    return str(found) if found else None


@functools.lru_cache(maxsize=1)
def borrowed_include_dirs() -> tuple[str, ...]:
    """The directories of `toolkit_include_dirs` taken from the nvcc's toolkit."""
    nvcc_dirs = nvcc_include_dirs(find_nvcc())
    return tuple(
        d for d in toolkit_include_dirs() if any(Path(d).is_relative_to(n) for n in nvcc_dirs)
    )


def _from_nvcc_toolkit(lib: str) -> str | None:
    """`lib`'s header directory in the toolkit of the nvcc in use, if it has one."""
    subdir, marker = _TOOLKIT_LIBRARIES[lib]
    for directory in nvcc_include_dirs(find_nvcc()):
        candidate = Path(directory) / subdir if subdir else Path(directory)
        try:
            if (candidate / marker).is_file():
                return str(candidate)
        except OSError:
            continue
    return None


@functools.lru_cache(maxsize=1)
def borrowed_mismatch() -> str | None:
    """One sentence naming both versions when headers NVRTC's environment lacks come from an
    nvcc's toolkit of another CUDA version than NVRTC's (`toolkit_include_dirs`), else None."""
    borrowed = borrowed_include_dirs()
    ours = nvrtc_toolkit_version()
    nvcc_dirs = nvcc_include_dirs(find_nvcc())
    theirs = next((v for v in map(toolkit_version, nvcc_dirs) if v), None)
    if not borrowed or ours is None or theirs is None or theirs == ours[0]:
        return None
    return (
        f"headers NVRTC's toolkit lacks ({', '.join(borrowed)}) are read from the CUDA "
        f"{theirs} toolkit of nvcc, beside NVRTC's CUDA {ours[0]} headers ({ours[1]}): "
        f"install matching versions if nvcc or the build disagree"
    )


def is_toolkit_include_dir(directory: str) -> bool:
    """Whether `directory` is a CUDA toolkit's own include directory (`/usr/local/cuda/include`,
    often in a project's flags): it holds `cuda_runtime_api.h` and `crt/`."""
    root = Path(directory)
    try:
        return (root / "cuda_runtime_api.h").is_file() and (root / "crt").is_dir()
    except OSError:
        return False


def split_include_dirs(directories: Iterable[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The configured include directories: (a project's, CUDA toolkits' own).

    NVRTC must read the headers of its own toolkit, not another version's (`cuda_fp16.h` of
    12.4 beside NVRTC 13's builtins), and a toolkit header is no project header to blank: a
    toolkit's directory is searched after ours, for what ours lacks (`cublas_v2.h`).
    """
    project: list[str] = []
    toolkits: list[str] = []
    for directory in directories:
        (toolkits if is_toolkit_include_dir(directory) else project).append(directory)
    return tuple(project), tuple(toolkits)


def in_toolkit(name: str) -> bool:
    """Whether our toolkit's headers have `<name>`."""
    return find_system_header(name) is not None


def is_nvrtc_ready(name: str, found: Path) -> bool:
    """Whether `<name>`, found at `found` in a configured directory, is a CCCL header written for
    NVRTC (libcu++ `cuda/`, `nv/`; CUB from CCCL 2 on): NVRTC reads it as it is, like the
    toolkit's copy. Blanking its "host code" like a project header's breaks it (it is all
    templates guarded by CCCL's own macros). A project's own `cuda/x.h` is not one: the
    directory must hold libcu++ (`cuda/std/`) or CUB's version header."""
    root = found
    for _ in name.split("/"):
        root = root.parent
    try:
        if name.startswith(("cuda/", "nv/")):
            return (root / "cuda" / "std").is_dir() and (root / "nv" / "target").is_file()
        if name.startswith("cub/"):
            version = (root / "cub" / "version.cuh").read_text(encoding="utf-8", errors="replace")
            match = _CUB_VERSION.search(version)
            return match is not None and int(match.group(1)) >= 200000
    except OSError:
        return False
    return False


def is_torch(name: str) -> bool:
    """Whether `<name>` is one of PyTorch's headers (see TORCH_STAND_IN)."""
    return name.startswith(_TORCH_PREFIXES)


def cub_host_algorithm(name: str) -> bool:
    """Whether `<name>` is one of CUB's host-side algorithm headers (`cub/device/...`)."""
    return name.startswith(_CUB_HOST_ALGORITHMS)


def is_host_only(name: str) -> bool:
    if name.startswith(DEVICE_SAFE_PREFIXES):
        return False
    return name in HOST_ONLY or name.startswith(HOST_ONLY_PREFIXES)


# Host-only headers that bring libstdc++'s <type_traits> with them under nvcc (g++ -H): code
# after `#include <vector>` may use `std::is_same_v` without including <type_traits> itself
# (CUTLASS's host_tensor.h). Such a line reads our <type_traits> stand-in instead of nothing.
BRINGS_TYPE_TRAITS: frozenset[str] = names(
    """
    algorithm any array atomic bitset chrono complex deque exception functional iostream
    iterator list map memory mutex numeric optional random set sstream stdexcept string
    string_view thread tuple unordered_map unordered_set utility valarray variant vector
    fstream iomanip ostream istream
    """
)


def find_system_header(name: str, extra_dirs: tuple[str, ...] = ()) -> Path | None:
    """The file `#include <name>` would open: configured dirs, then the toolkit's. Any kind of
    file (a FIFO too): the caller checks it with `include_reads.check_header`."""
    for directory in (*extra_dirs, *toolkit_include_dirs()):
        candidate = Path(directory) / name
        try:
            if candidate.exists() and not candidate.is_dir():
                return candidate
        except OSError:
            continue
    return None


@functools.lru_cache(maxsize=1)
def host_include_dirs() -> tuple[str, ...]:
    """The host compiler's system include directories (glibc's, libstdc++'s) that exist here.

    A `<...>` header found there is host-only (nvcc would find it; device code cannot use it):
    dropped silently, where one found nowhere is worth a warning.
    """
    roots = [Path("/usr/local/include"), Path("/usr/include")]
    found = [str(p) for p in roots if p.is_dir()]
    for pattern in ("/usr/include/*-linux-gnu", "/usr/include/c++/*"):
        found.extend(sorted(str(p) for p in Path("/").glob(pattern.lstrip("/")) if p.is_dir()))
    return tuple(found)


def find_host_header(name: str) -> Path | None:
    """The host system header `#include <name>` would open, if any (see host_include_dirs)."""
    for directory in host_include_dirs():
        candidate = Path(directory) / name
        try:
            if candidate.is_file():
                return candidate
        except OSError:
            continue
    return None


def missing_stand_in(name: str) -> str | None:
    """The text that replaces the missing device library header `name`, if it has one."""
    file = MISSING_STAND_INS.get(name)
    return (MISSING_DIR / file).read_text(encoding="utf-8") if file else None


@functools.lru_cache(maxsize=1)
def stub_fingerprint() -> str:
    """A hash of the stand-in headers (part of every compile cache key)."""
    digest = hashlib.sha256()
    for path in sorted(STUB_DIR.rglob("*")):
        if path.is_file():
            digest.update(path.relative_to(STUB_DIR).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


# Host-API libraries of a CUDA toolkit (issue 38): their headers declare host functions only.
# NVRTC never reads them raw: they are blanked like a project header, wherever they are found
# (a newer cuBLAS's declarations name runtime types an older runtime lacks: `cudaEmulation...`).
# Device libraries (`curand_kernel.h`, the `...dx` headers) are not among them.
HOST_LIBRARIES: dict[str, str] = {
    "cublas": "cuBLAS",
    "nvblas": "cuBLAS",
    "cusparse": "cuSPARSE",
    "cufft": "cuFFT",
    "cusolver": "cuSOLVER",
    "nccl": "NCCL",
    "nvjpeg": "nvJPEG",
    "npp": "NPP",
    "cutensor": "cuTENSOR",
}
# The header that holds each library's version macros, where not the one included.
_VERSION_HEADER = {"cuBLAS": "cublas_api.h", "cuSOLVER": "cusolver_common.h", "cuFFT": "cufft.h"}
_MAJOR = re.compile(r"#\s*define\s+[A-Z]+_(?:VER_)?MAJOR\s+(\d+)")
_MINOR = re.compile(r"#\s*define\s+[A-Z]+_(?:VER_)?MINOR\s+(\d+)")
_CUDA_VERSION = re.compile(r"#\s*define\s+CUDA(?:RT)?_VERSION\s+(\d+)")


def host_library(name: str) -> str | None:
    """The host-API library `<name>` belongs to ("cuBLAS" for `cublas_v2.h`), else None."""
    base = name.rsplit("/", 1)[-1].lower()
    if "dx" in base.split(".")[0][-3:]:  # cuBLASDx, cuFFTDx: device code
        return None
    return next((lib for prefix, lib in HOST_LIBRARIES.items() if base.startswith(prefix)), None)


def nvcc_include_dirs(nvcc: Path | None) -> tuple[str, ...]:
    """The include directories of the toolkit `nvcc` belongs to: `include` next to its `bin`
    (`/usr/local/cuda/include`, a wheel set's `nvidia/cu13/include`) and `targets/*/include`."""
    if nvcc is None:
        return ()
    try:
        root = nvcc.resolve().parent.parent
        found = [root / "include", *sorted(root.glob("targets/*/include"))]
        return tuple(dict.fromkeys(str(d) for d in found if d.is_dir()))
    except OSError:
        return ()


def find_library_header(name: str, nvcc_dirs: tuple[str, ...]) -> Path | None:
    """Where `#include <name>` of a host library is read from: the toolkit of the nvcc in use
    (as nvcc resolves it), else NVRTC's own toolkit (the same wheel set); never another dir."""
    for directory in (*nvcc_dirs, *toolkit_include_dirs()):
        candidate = Path(directory) / name
        try:
            if candidate.is_file():
                return candidate
        except OSError:
            continue
    return None


def _read_head(path: Path) -> str:
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            return f.read(200_000)
    except OSError:
        return ""


def library_version(library: str, found: Path) -> str | None:
    """`library`'s version ("13.1") as the headers beside `found` define it (`CUBLAS_VER_MAJOR`
    / `_MINOR`, `NCCL_MAJOR`...), else None."""
    version_file = found.parent / _VERSION_HEADER.get(library, found.name)
    for path in dict.fromkeys((version_file, found)):
        text = _read_head(path)
        major, minor = _MAJOR.search(text), _MINOR.search(text)
        if major and minor:
            return f"{int(major.group(1))}.{int(minor.group(1))}"
    return None


@functools.lru_cache(maxsize=8)
def toolkit_version(directory: str) -> str | None:
    """The CUDA version ("13.0") of the toolkit whose include directory is `directory`
    (`CUDART_VERSION` of cuda_runtime_api.h, else `CUDA_VERSION` of cuda.h)."""
    for name in ("cuda_runtime_api.h", "cuda.h"):
        match = _CUDA_VERSION.search(_read_head(Path(directory) / name))
        if match:
            number = int(match.group(1))
            return f"{number // 1000}.{number % 1000 // 10}"
    return None


def nvrtc_toolkit_version() -> tuple[str, str] | None:
    """(NVRTC's toolkit's CUDA version, its include directory), from its runtime headers."""
    for directory in toolkit_include_dirs():
        version = toolkit_version(directory)
        if version:
            return version, directory
    return None


def version_mismatch(library: str, found: Path) -> str | None:
    """One sentence naming both versions when `library`'s headers at `found` use CUDA runtime
    names NVRTC's runtime headers lack (cuBLAS 13.1's `cudaEmulation...` beside a 13.0
    runtime), else None. The names decide, not the numbers: cuFFT, cuSPARSE and (since 13.x)
    cuBLAS number their releases their own way, and a 13.8 cuBLAS is of CUDA 13.5."""
    ours = nvrtc_toolkit_version()
    if ours is None:
        return None
    used = library_runtime_names(library, found.parent)
    missing = sorted(used - runtime_names() - declared_names(found.parent))
    if not missing:
        return None
    theirs = library_version(library, found)
    shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
    return (
        f"{library}{f' {theirs}' if theirs else ''} headers ({found.parent}) with CUDA "
        f"{ours[0]} runtime headers ({ours[1]}), which lack what they use ({shown}): its host "
        f"API is left out of the device check; install matching versions if nvcc or the build "
        f"disagree"
    )


_RUNTIME_NAME = re.compile(rb"\bcuda[A-Z]\w*")  # the runtime's names: cudaStream_t, cudaDataType
_COMMENT = re.compile(rb"/\*.*?\*/|//[^\n]*", re.S)
# a runtime-style name declared where it appears: `#define`, a tag, a typedef's or enum's name
_DECLARED = re.compile(
    rb"#\s*define\s+(cuda[A-Z]\w*)|\b(?:struct|enum|union|class)\s+(cuda[A-Z]\w*)"
    rb"|\btypedef\b[^;{}]*?\b(cuda[A-Z]\w*)\s*;|}\s*(cuda[A-Z]\w*)\s*[;,]"
)


def _code(paths: Iterable[Path]) -> Iterator[bytes]:
    """Each readable file of `paths`, comments left out."""
    for path in paths:
        try:
            yield _COMMENT.sub(b"", path.read_bytes())
        except OSError:
            continue


def _names_in(paths: Iterable[Path]) -> set[str]:
    """The runtime-style names (`cuda` + a capital) in `paths`' code."""
    return {m.decode() for text in _code(paths) for m in _RUNTIME_NAME.findall(text)}


@functools.lru_cache(maxsize=16)
def library_runtime_names(library: str, directory: Path) -> frozenset[str]:
    """The CUDA runtime names `library`'s headers in `directory` use."""
    try:
        paths = [p for p in directory.glob("*.h") if host_library(p.name) == library]
    except OSError:
        return frozenset()
    return frozenset(_names_in(paths))


@functools.lru_cache(maxsize=16)
def declared_names(directory: Path) -> frozenset[str]:
    """The runtime-style names the headers of `directory` declare themselves (cuFFT's
    `cudaLibXtDesc` in its `cudalibxt.h`, cuSOLVER's `cudaLibMgGrid_t`): not the runtime's."""
    try:
        paths = list(directory.glob("*.h"))
    except OSError:
        return frozenset()
    return frozenset(
        next(g for g in m.groups() if g).decode()
        for text in _code(paths)
        for m in _DECLARED.finditer(text)
    )


@functools.lru_cache(maxsize=1)
def runtime_names() -> frozenset[str]:
    """Every runtime name NVRTC's toolkit headers have (its include directories' headers and
    `crt/`, host libraries' headers left out: a library sharing the wheel set's directory
    does not declare what the runtime lacks)."""
    paths: list[Path] = []
    for directory in toolkit_include_dirs():
        root = Path(directory)
        try:
            found = [*root.glob("*.h"), *root.glob("crt/*.h")]
        except OSError:
            continue
        paths.extend(p for p in found if host_library(p.name) is None)
    return frozenset(_names_in(paths))
