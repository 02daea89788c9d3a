"""The loop's view of the layers below it, and a kernel built for the GPU that judges it.

`Toolchain` is what the loop needs from the source model, the spec parser, the build, the
sanitizer and the profiler (faked in tests); `DefaultToolchain` is the real thing. A candidate
is cleaned of what the file already has, then built for the evaluating device's architecture,
whatever the settings say: the GPU that times it is the one it must run on.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import re
from pathlib import Path
from typing import Protocol

from cuda_llm_lsp.cancel import CancelToken
from cuda_llm_lsp.compile.candidate_policy import strip_spec_comments
from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.evaluate import candidate
from cuda_llm_lsp.evaluate.candidate import CandidateRejected
from cuda_llm_lsp.evaluate.line_profile import NcuProfiler
from cuda_llm_lsp.evaluate.sanitizer import run_sanitizer, sanitizer_path
from cuda_llm_lsp.evaluate.types import EvalResult, KernelBinary
from cuda_llm_lsp.fsr.profile import line_profile_text
from cuda_llm_lsp.fsr.types import OptimizeRequest
from cuda_llm_lsp.source.draft import draft_spec
from cuda_llm_lsp.source.kernels import Kernel
from cuda_llm_lsp.source.names import Definition, read_names
from cuda_llm_lsp.source.spec import SpecError, TestSpec, parse_spec


class Toolchain(Protocol):
    """Source model, spec, build, sanitizer and profiler: the loop's view of the other layers."""

    def find_kernel(self, text: str, name: str) -> Kernel | None: ...

    def parse_spec(self, kernel: Kernel, text: str) -> tuple[TestSpec | None, list[SpecError]]: ...

    def draft_spec(self, kernel: Kernel, text: str) -> str: ...

    def build(
        self,
        file_text: str,
        path: Path | None,
        kernel_name: str,
        settings: Settings,
        *,
        kernel_source: str | None = None,
        instance: str | None = None,
        spec: TestSpec | None = None,
        arch: str | None = None,
    ) -> KernelBinary | CandidateRejected: ...  # arch: the evaluating device's

    def sanitize(
        self, binary: KernelBinary, spec: TestSpec, spec_dir: Path | None
    ) -> EvalResult | None: ...  # None: no sanitizer here

    def profile(
        self, binary: KernelBinary, spec: TestSpec, spec_dir: Path | None, cancel: CancelToken
    ) -> str | None: ...  # None: no profiler here, or cancelled


class DefaultToolchain:
    """The real layers: tree-sitter source model, spec parser, NVRTC build, sanitizer, ncu."""

    find_kernel = staticmethod(candidate.find_kernel)
    build = staticmethod(candidate.build_binary)

    def parse_spec(self, kernel: Kernel, text: str) -> tuple[TestSpec | None, list[SpecError]]:
        return parse_spec(kernel, text)

    def draft_spec(self, kernel: Kernel, text: str) -> str:
        return draft_spec(kernel, text)

    def sanitize(
        self, binary: KernelBinary, spec: TestSpec, spec_dir: Path | None
    ) -> EvalResult | None:
        if sanitizer_path() is None:
            return None
        return run_sanitizer(binary, spec, spec_dir)

    def profile(
        self, binary: KernelBinary, spec: TestSpec, spec_dir: Path | None, cancel: CancelToken
    ) -> str | None:
        """One ncu capture on GPU 0: per-line findings where ncu gives them (`ProfileText`), else
        the kernel-level class. `cancel` ends ncu and the worker it profiles at once."""
        profiler = NcuProfiler()
        forget = cancel.on_cancel(profiler.cancel)
        try:
            return line_profile_text(binary, spec, spec_dir, profiler)
        finally:
            forget()


async def build_original(
    toolchain: Toolchain,
    request: OptimizeRequest,
    kernel: Kernel,
    *,
    spec: TestSpec,
    arch: str,
) -> KernelBinary | CandidateRejected:
    """The file as it is, built for `arch`; the binary carries the kernel's own text."""
    built = await _build(toolchain, request, None, spec, arch)
    if not isinstance(built, KernelBinary):
        return built
    return dataclasses.replace(
        built,
        kernel_source=kernel.span.slice(request.file_text),
        kernel_line=kernel.span.start.line,
    )


async def build_candidate(
    toolchain: Toolchain,
    request: OptimizeRequest,
    source: str,
    *,
    spec: TestSpec,
    arch: str,
) -> KernelBinary | CandidateRejected:
    """The file with `source` in place of the kernel, built for `arch`; the binary carries it."""
    built = await _build(toolchain, request, source, spec, arch)
    if not isinstance(built, KernelBinary):
        return built
    line = _kernel_line(request.file_text, request.kernel)  # spliced where the original was
    return dataclasses.replace(built, kernel_source=source, kernel_line=line)


@functools.lru_cache(maxsize=8)
def _kernel_line(file_text: str, name: str) -> int:
    kernel = candidate.find_kernel(file_text, name)
    return kernel.span.start.line if kernel is not None else 0


async def _build(
    toolchain: Toolchain,
    request: OptimizeRequest,
    source: str | None,
    spec: TestSpec,
    arch: str,
) -> KernelBinary | CandidateRejected:
    return await asyncio.to_thread(
        functools.partial(
            toolchain.build,
            request.file_text,
            request.path,
            request.kernel,
            request.settings,
            kernel_source=source,
            spec=spec,
            arch=arch,
        )
    )


def clean_candidate(code: str, file_text: str) -> str:
    """The candidate as it replaces the kernel: no `@cuda-llm` comment anywhere (model text never
    becomes the spec), and none of the includes or device-side definitions the file already has
    (models often repeat them: a redefinition; `_without_known_definitions`). What it may
    include is checked when it is built (`compile.candidate_policy`)."""
    stripped = strip_spec_comments(code)
    code = _without_known_definitions(stripped.code, file_text)
    file_includes = {
        re.sub(r"\s+", "", line)
        for line in file_text.splitlines()
        if re.match(r"\s*#\s*include\b", line)
    }
    lines = [line for line in code.splitlines() if re.sub(r"\s+", "", line) not in file_includes]
    return "\n".join(lines).strip("\n") + "\n"


def _without_known_definitions(code: str, file_text: str) -> str:
    """`code` without the top-level device-side definitions (`__device__` functions, types,
    constexpr / constant / device variables, `#define`s) the file already has token for token
    (comments and spacing aside), unconditionally: the rule `fsr.clashes` drops a winner's
    helpers by when it is applied. A `#define` also only when the file defines it that way alone,
    never `#undef`s it, and has it above the kernel (the reply's `__global__` function of the
    same name); a definition of several names (`enum E { A, B }`) only as a whole; a kernel
    never (the file's is the one replaced)."""
    file = read_names(file_text)
    ours = read_names(code)
    kernels = {d.name for d in ours.definitions if d.kind == "function" and _is_kernel(d)}
    insert_at = min(
        (d.start for d in file.definitions if d.name in kernels and _is_kernel(d)),
        default=len(file_text),
    )
    undefs = {t.text for t in file.undefs}

    def known(d: Definition) -> bool:
        if not d.device or d.conditional or _is_kernel(d):
            return False
        same = [f for f in file.definitions if f.name == d.name and not f.conditional]
        if d.kind in ("macro", "function_macro"):
            everywhere = [f for f in file.definitions if f.name == d.name]
            return (
                d.name not in undefs
                and all(f.shape == d.shape for f in everywhere)
                and any(f.end <= insert_at for f in same)
            )
        return any(f.shape == d.shape for f in same)

    spans: dict[tuple[int, int], bool] = {}
    for d in ours.definitions:
        span = (d.start, d.end)
        spans[span] = spans.get(span, True) and known(d)
    for (start, end), drop in sorted(spans.items(), reverse=True):
        if drop:
            code = code[:start] + code[end:]
    return code


def _is_kernel(definition: Definition) -> bool:
    return "__global__" in definition.shape
