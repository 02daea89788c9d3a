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

from cuda_llm_lsp.compile.candidate_policy import strip_spec_comments
from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.evaluate import candidate
from cuda_llm_lsp.evaluate.candidate import CandidateRejected
from cuda_llm_lsp.evaluate.sanitizer import run_sanitizer, sanitizer_path
from cuda_llm_lsp.evaluate.types import EvalResult, KernelBinary
from cuda_llm_lsp.fsr.profile import profile_summary
from cuda_llm_lsp.fsr.types import OptimizeRequest
from cuda_llm_lsp.source.context import device_function_spans
from cuda_llm_lsp.source.draft import draft_spec
from cuda_llm_lsp.source.kernels import Kernel
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
        arch: str | None = None,
    ) -> KernelBinary | CandidateRejected: ...  # arch: the evaluating device's

    def sanitize(
        self, binary: KernelBinary, spec: TestSpec, spec_dir: Path | None
    ) -> EvalResult | None: ...  # None: no sanitizer here

    def profile(
        self, binary: KernelBinary, spec: TestSpec, spec_dir: Path | None
    ) -> str | None: ...  # None: no profiler here


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

    def profile(self, binary: KernelBinary, spec: TestSpec, spec_dir: Path | None) -> str | None:
        return profile_summary(binary, spec, spec_dir)


async def build_original(
    toolchain: Toolchain, request: OptimizeRequest, kernel: Kernel, *, instance: str | None,
    arch: str,
) -> KernelBinary | CandidateRejected:  # fmt: skip
    """The file as it is, built for `arch`; the binary carries the kernel's own text."""
    built = await _build(toolchain, request, None, instance, arch)
    if not isinstance(built, KernelBinary):
        return built
    return dataclasses.replace(built, kernel_source=kernel.span.slice(request.file_text))


async def build_candidate(
    toolchain: Toolchain, request: OptimizeRequest, source: str, *, instance: str | None,
    arch: str,
) -> KernelBinary | CandidateRejected:  # fmt: skip
    """The file with `source` in place of the kernel, built for `arch`; the binary carries it."""
    built = await _build(toolchain, request, source, instance, arch)
    if not isinstance(built, KernelBinary):
        return built
    return dataclasses.replace(built, kernel_source=source)


async def _build(
    toolchain: Toolchain, request: OptimizeRequest, source: str | None, instance: str | None,
    arch: str,
) -> KernelBinary | CandidateRejected:  # fmt: skip
    return await asyncio.to_thread(
        functools.partial(
            toolchain.build,
            request.file_text,
            request.path,
            request.kernel,
            request.settings,
            kernel_source=source,
            instance=instance,
            arch=arch,
        )
    )


def _squashed(text: str) -> str:
    return re.sub(r"\s+", "", text)


def clean_candidate(code: str, file_text: str) -> str:
    """The candidate as it replaces the kernel: no `@cuda-llm` comment anywhere (model text never
    becomes the spec), and none of the includes or `__device__` helpers the file already has
    (models often repeat them: a redefinition). What it may include is checked when it is built
    (`compile.candidate_policy`)."""
    stripped = strip_spec_comments(code)
    # issue [launch]: a `/* @cuda-llm launch */` block in `stripped.blocks` is parsed here
    code = stripped.code
    known = {_squashed(file_text[s:e]) for s, e in device_function_spans(file_text)}
    for start, end in reversed(device_function_spans(code)):
        if _squashed(code[start:end]) in known:
            code = code[:start] + code[end:]
    file_includes = {
        re.sub(r"\s+", "", line)
        for line in file_text.splitlines()
        if re.match(r"\s*#\s*include\b", line)
    }
    lines = [line for line in code.splitlines() if re.sub(r"\s+", "", line) not in file_includes]
    return "\n".join(lines).strip("\n") + "\n"
