"""The evaluator's builder of last resort: a kernel built by `nvcc -cubin` with the file's flags.

NVRTC builds a device unit of the file (`compile.device_unit`); some files it cannot build: a
device-side launch (`child<<<...>>>` in a kernel needs `-rdc=true` and the device runtime), a
library header of another toolkit, the project's own flags, a construct the device unit
mis-handles. Where NVRTC cannot build the original, `evaluate.candidate.build_binary` builds
it, and every candidate for it, here, with the flags the nvcc tier uses (`compile.nvcc_tier`:
the project's compile_commands.json / compile_flags.txt, then the settings).

Safety: `nvcc -cubin` compiles device code only. nvcc runs the host compiler as a preprocessor
(`-E`), then cicc and ptxas on the device side; it compiles no host object, links nothing and
runs nothing from the file (`compile.nvcc.compile_file(cubin=True)`). A candidate's host code
(model text) is parsed by nvcc's front end and dropped; it never reaches a host object. A
relocatable cubin (device-side launches) is linked with `libcudadevrt` by `nvcc -dlink
-cubin` (nvlink, and nvcc's own `crt/prelink.stub` built by the host compiler with the cubin
embedded as bytes: no text of ours or the model's is compiled as host code; checked with
`--dryrun`: `-cubin` runs `gcc -E`, cicc and ptxas only).

The entry is the kernel's mangled symbol as ptxas names it (`-Xptxas -v`), read back with
`compile.mangled`; a template instance the file never instantiates is instantiated by one
line appended to the unit (`(void*)&k<float>`: host code, never compiled to an object).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

from cuda_llm_lsp.compile.analysis import compile_options, with_project_flags
from cuda_llm_lsp.compile.arch import with_arch_features
from cuda_llm_lsp.compile.flags import NVCC_ONLY
from cuda_llm_lsp.compile.mangled import base_name, display_names
from cuda_llm_lsp.compile.nvcc import (
    DEFAULT_TIMEOUT_S,
    NvccResult,
    compile_file,
    find_nvcc,
    link_device_runtime,
)
from cuda_llm_lsp.compile.types import Resources
from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.source.kernels import Kernel

#: What nvcc says of a device-side launch without `-rdc=true`.
_NEEDS_RDC = re.compile(r"requires separate compilation mode|-rdc=true")
#: The name of the line that instantiates the evaluated template instance.
INSTANCE_VARIABLE = "__cuda_llm_evaluated_instance"


@dataclass(frozen=True)
class NvccBuild:
    """nvcc's verdict: `cubin` and `entry` set when it built the kernel, else `result` says why."""

    result: NvccResult
    cubin: bytes | None = None
    entry: str | None = None
    arch: str = ""
    resources: Resources | None = None
    rdc: bool = False
    problem: str = ""  # why there is no entry (nvcc compiled, the kernel was not found)


def available() -> bool:
    """Whether an nvcc is there to build with (`compile.nvcc.find_nvcc`)."""
    return find_nvcc() is not None


def build_with_nvcc(
    text: str,
    path: Path | None,
    settings: Settings,
    arch: str | None,
    kernel: Kernel,
    expression: str,
    known_entry: str | None = None,
) -> NvccBuild:
    """`kernel` (lowered as `expression`, NVRTC's name expression) built from `text` by
    `nvcc -cubin` for `arch` (else the settings'); with `-rdc=true` and the device runtime
    when the file launches kernels from device code; `known_entry`: the symbol the user's
    program launched (a capture's), preferred where the cubin has it. Raises `NvccUnavailable`."""
    settings = with_project_flags(settings, path)
    options = compile_options(
        replace(settings, arch=with_arch_features(arch)) if arch else settings
    )
    unit = text
    if kernel.is_template:  # the instance evaluated, whatever the host code launches
        unit += f"\nstatic void* const {INSTANCE_VARIABLE} = (void*)&{expression};\n"
    flags = list(dict.fromkeys(NVCC_ONLY[f] for f in settings.nvrtc_flags if f in NVCC_ONLY))

    def run(extra: list[str]) -> NvccResult:
        return compile_file(
            unit,
            path,
            include_paths=options.include_paths,
            arch=options.arch,
            timeout=max(DEFAULT_TIMEOUT_S, float(settings.compile_timeout_s)),
            defines=options.defines,
            std=options.std,
            extra_flags=["-lineinfo", *flags, *extra],  # as NVRTC's: lines for ncu
            resource_usage=True,
            cubin=True,
        )

    result, rdc = run([]), False
    if not result.ok and _NEEDS_RDC.search(result.log):
        result, rdc = run(["-rdc=true"]), True
    if not result.ok or result.cubin is None:
        return NvccBuild(result, arch=options.arch)
    entry = entry_symbol(list(result.resources), kernel, expression, known_entry)
    if entry is None:
        found = ", ".join(sorted(result.resources)) or "none"
        problem = f"nvcc built no entry for {expression!r} (entries: {found})"
        return NvccBuild(result, arch=options.arch, problem=problem)
    cubin = result.cubin
    if rdc:
        linked, log = link_device_runtime(cubin, options.arch)
        if linked is None:
            return NvccBuild(result, arch=options.arch, problem=f"device link failed: {log}")
        cubin = linked
    return NvccBuild(result, cubin, entry, options.arch, result.resources.get(entry), rdc=rdc)


def entry_symbol(
    symbols: list[str], kernel: Kernel, expression: str, known: str | None = None
) -> str | None:
    """The symbol of `kernel`'s instance `expression` among the cubin's entries: `known` (the
    mangled name a capture recorded) when the cubin has it; its own name when `extern "C"`, else
    the mangled one whose qualified name is the kernel's (for a template, the one read back as
    `expression`)."""
    if known is not None and known in symbols:
        return known
    if kernel.is_extern_c:
        return kernel.name if kernel.name in symbols else None
    ours = [
        s
        for s in symbols
        if (base := base_name(s)) is not None
        and (base == kernel.qualified_name or base.rpartition("::")[2] == kernel.name)
    ]
    if not ours:  # names the demangler cannot read back (CuTe's, thousands of characters)
        ours = [s for s in symbols if _source_name(kernel.name) in s]
    if not kernel.is_template:
        return ours[0] if len(ours) == 1 else None
    wanted = _spaceless(expression).removeprefix("::")
    shown = display_names(ours, find_nvcc())
    for symbol in ours:
        if _spaceless(shown[symbol]).removeprefix("::") in (wanted, wanted.rpartition("::")[2]):
            return symbol
    return ours[0] if len(ours) == 1 else None


def _source_name(name: str) -> str:
    """`name` as the Itanium ABI spells it inside a mangled symbol (`11gemm_device`), after
    the scope that precedes it (`_Z`, `N...`, or another name's last character)."""
    return f"{len(name)}{name}"


def _spaceless(text: str) -> str:
    return re.sub(r"\s+", "", text)
