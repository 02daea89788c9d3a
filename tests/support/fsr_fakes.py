"""Stand-ins for the FSR loop's neighbours in CPU tests: a toolchain that builds nothing.

`FakeToolchain` finds kernels with the real tree-sitter source model, returns a fixed spec,
and "builds" a candidate into a `KernelBinary` carrying its source, so `RecordedEvaluator`
can answer by marker. A candidate containing `COMPILE_ERROR` is rejected as `compile_error`,
one containing `BAD_SIGNATURE` as `signature_mismatch` (planted failures for tests).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda_llm_lsp.compile.types import Resources
from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.evaluate.candidate import CandidateRejected
from cuda_llm_lsp.evaluate.types import EvalResult, KernelBinary
from cuda_llm_lsp.source.kernels import Kernel
from cuda_llm_lsp.source.spec import ArgSpec, SpecError, TestSpec

SAXPY_FILE = """\
#include <cstdio>
#include <cuda_runtime.h>

#define BLOCK 256

__device__ float scale(float a, float x) { return a * x; }

/* @cuda-llm
sizes.n = [1, 1000, 1048576]
grid = "cdiv(n, 256)"
block = 256
args.x = "float32[n]"
args.y = "inout float32[n]"
args.a = "2.5"
args.n = "n"
*/
extern "C" __global__ void saxpy(const float* x, float* y, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = scale(a, x[i]) + y[i];
}

int main()
{
    float *x, *y;
    int n = 1 << 20;
    saxpy<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(x, y, 2.5f, n);
    return 0;
}
"""

NO_SPEC_FILE = """\
extern "C" __global__ void scale(float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] *= 2.0f;
}
"""


def saxpy_spec() -> TestSpec:
    return TestSpec(
        kernel="saxpy",
        sizes={"n": [1, 1000, 1048576]},
        grid=("cdiv(n, 256)",),
        block=("256",),
        args=(
            ArgSpec("x", 0, "const float*", True, role="in", dtype="float32", count="n"),
            ArgSpec("y", 1, "float*", True, role="inout", dtype="float32", count="n"),
            ArgSpec("a", 2, "float", False, dtype="float32", value="2.5"),
            ArgSpec("n", 3, "int", False, dtype="int32", value="n"),
        ),
        outputs=("y",),
    )


def saxpy_candidate(marker: str, body: str = "y[i] = a * x[i] + y[i];") -> str:
    """A candidate saxpy with a marker comment the recorded evaluator matches on."""
    return (
        f'extern "C" __global__ void saxpy(const float* x, float* y, float a, int n)\n'
        f"{{\n    // variant: {marker}\n"
        f"    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        f"    if (i < n) {{ {body} }}\n}}\n"
    )


@dataclass
class FakeToolchain:
    spec: TestSpec | None = field(default_factory=saxpy_spec)
    spec_errors: list[SpecError] = field(default_factory=list)
    registers: dict[str, int] = field(default_factory=dict)  # marker -> registers
    sanitizer: dict[str, EvalResult] = field(default_factory=dict)  # marker -> report
    profile_text: str | None = None
    builds: list[str | None] = field(default_factory=list)
    archs: list[str | None] = field(default_factory=list)  # the arch each build was asked for
    lock: threading.Lock = field(default_factory=threading.Lock)

    def find_kernel(self, text: str, name: str) -> Kernel | None:
        from cuda_llm_lsp.source.kernels import find_kernels

        return next((k for k in find_kernels(text) if k.name == name), None)

    def parse_spec(self, kernel: Kernel, text: str) -> tuple[TestSpec | None, list[SpecError]]:
        if self.spec_errors:
            return None, self.spec_errors
        return (self.spec if kernel.spec is not None else None), []

    def draft_spec(self, kernel: Kernel, text: str) -> str:
        return f'/* @cuda-llm\nsizes.n = [1, 1024]\ngrid = "cdiv(n, 256)"\n*/ // {kernel.name}'

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
    ) -> KernelBinary | CandidateRejected:
        with self.lock:
            self.builds.append(kernel_source)
            self.archs.append(arch)
        source = kernel_source or ""
        if "COMPILE_ERROR" in source:
            return CandidateRejected(
                "compile_error", 'line 3:5: error: identifier "COMPILE_ERROR" is undefined'
            )
        if "BAD_SIGNATURE" in source:
            return CandidateRejected("signature_mismatch", "parameter `int n` became `long n`")
        marker = re.search(r"variant: (\S+)", source)
        registers = self.registers.get(marker.group(1), 16) if marker else 16
        return KernelBinary(
            source_name=kernel_name,
            entry=kernel_name,
            cubin=source.encode(),
            arch=arch or "sm_90",
            resources=Resources(
                registers=registers, spill_stores=0, spill_loads=0, shared_bytes=0, stack_bytes=0
            ),
            kernel_source=source,
        )

    def sanitize(self, binary: KernelBinary, spec: TestSpec, spec_dir: Path | None) -> Any:
        for marker, report in self.sanitizer.items():
            if f"variant: {marker}" in binary.kernel_source:
                return report
        return None

    def profile(
        self, binary: KernelBinary, spec: TestSpec, spec_dir: Path | None, cancel: Any
    ) -> str | None:
        return self.profile_text


class FakeLlm:
    """An in-process `LlmClient`: replies by (round, index), or a function of the prompt.

    A debugger's request (a repair) is answered only from `repairs`, by (round, index, attempt):
    unscripted, it gets "not scripted" and the failure it was asked to repair stands."""

    def __init__(
        self,
        replies: dict[tuple[int, int], Any] | None = None,
        *,
        default: Any = None,
        delay_s: float = 0.0,
        tokens: int = 100,
        repairs: dict[tuple[int, int, int], Any] | None = None,
    ) -> None:
        self.replies = dict(replies or {})
        self.repairs = dict(repairs or {})
        self.default = default
        self.delay_s = delay_s
        self.tokens = tokens
        self.prompts: list[Any] = []
        self.cancelled = 0
        self.closed = False

    async def complete(self, prompt: Any) -> Any:
        import asyncio

        from cuda_llm_lsp.fsr.client import LlmReply, extract_kernel

        self.prompts.append(prompt)
        if prompt.role == "debugger":
            answer = self.repairs.get((prompt.round, prompt.index, prompt.attempt))
        else:
            answer = self.replies.get((prompt.round, prompt.index), self.default)
        if callable(answer):
            answer = answer(prompt)
        delay = self.delay_s
        if isinstance(answer, tuple):  # (text, delay_s)
            answer, delay = answer
        try:
            if delay:
                await asyncio.sleep(delay)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        if isinstance(answer, LlmReply):
            return answer
        if answer is None:
            return LlmReply(text="", code=None, error="not scripted")
        text = f"Faster:\n```cuda\n{answer}\n```\n"
        code, error = extract_kernel(text, prompt.kernel)
        return LlmReply(
            text=text,
            code=code,
            error=error,
            prompt_tokens=self.tokens // 2,
            completion_tokens=self.tokens - self.tokens // 2,
        )

    async def close(self) -> None:
        self.closed = True


def make_recording(directory: Path, kernel: str, replies: dict[tuple[int, int], str]) -> None:
    """A `--replay` directory answering candidate (round, index) with `replies[...]` as code."""
    import asyncio

    from cuda_llm_lsp.fsr.client import Prompt
    from cuda_llm_lsp.fsr.replay import RecordingLlm

    async def record() -> None:
        recorder = RecordingLlm(FakeLlm(replies), directory)
        for round_, index in replies:
            messages = ({"role": "user", "content": f"(made by a test) r{round_} c{index}"},)
            await recorder.complete(Prompt(kernel, round_, index, messages))

    asyncio.run(record())
