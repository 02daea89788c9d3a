"""Turn a file (and optionally an LLM's replacement kernel text) into a loadable `KernelBinary`.

A candidate's text replaces the original kernel's span in the file; the result must still define
exactly one kernel of that name with the same parameters (types and names; qualifiers such as
`__restrict__` and launch bounds may change). It is compiled by NVRTC as a device-only unit:
no host code from a candidate is ever compiled or run. Where NVRTC cannot build the original,
nvcc builds it and every candidate for it (`nvcc -cubin`, device code only:
`evaluate.nvcc_build`); `KernelBinary.builder` says which one judged.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from cuda_llm_lsp.compile import candidate_policy
from cuda_llm_lsp.compile.analysis import compile_options
from cuda_llm_lsp.compile.arch import with_arch_features
from cuda_llm_lsp.compile.cache import compile_cached
from cuda_llm_lsp.compile.device_unit import build_device_unit
from cuda_llm_lsp.compile.nvcc import NvccResult, NvccUnavailable
from cuda_llm_lsp.compile.types import CompileResult
from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.evaluate import nvcc_build
from cuda_llm_lsp.evaluate.captured import CapturedDataError, load_capture
from cuda_llm_lsp.evaluate.types import KernelBinary, Status
from cuda_llm_lsp.source.kernels import Kernel, find_kernels
from cuda_llm_lsp.source.signature import restore_linkage, signature_problem
from cuda_llm_lsp.source.spec import TestSpec, parse_spec
from cuda_llm_lsp.source.text import replace_span

LOG_LINES = 40


@dataclass(frozen=True)
class CandidateRejected:
    """Why a candidate never reached the GPU: `compile_error` or `signature_mismatch`."""

    status: Status
    message: str


def find_kernel(text: str, name: str) -> Kernel | None:
    """The one kernel named `name`; None when there is none or more than one (overloads)."""
    found = [k for k in find_kernels(text) if k.name == name]
    return found[0] if len(found) == 1 else None


def splice(file_text: str, kernel: Kernel, kernel_source: str) -> str:
    """`file_text` with `kernel`'s whole definition replaced by `kernel_source` (the rest of the
    file byte-identical): how a candidate is built and how an accepted one is applied. A dropped
    `extern "C"` is put back (`source.signature.restore_linkage`)."""
    kernel_source = restore_linkage(kernel, kernel_source)
    return replace_span(file_text, kernel.span, kernel_source.strip("\n"))


def check_signature(original: Kernel, candidate: Kernel) -> str | None:
    """None when the candidate keeps the original's parameters and linkage by ABI
    (`source.signature`), else what differs."""
    return signature_problem(original, candidate)


def name_expression(kernel: Kernel, instance: str | None) -> str:
    """What NVRTC is asked to lower: the spec's template instance, a launch site's, or the name."""
    if instance:
        return kernel.scoped(instance)
    if kernel.is_template and kernel.instantiations:
        return kernel.scoped(kernel.instantiations[0])
    return kernel.qualified_name  # `ns::k`: NVRTC resolves names at global scope


def build_binary(
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
    """Compile `kernel_name` from `file_text` (with `kernel_source` spliced in, if given).

    `arch` is the evaluating GPU's (`DeviceFacts.arch`); without it the configured one, else this
    machine's GPU (`compile.arch.resolve_arch`). `instance`
    (a templated kernel's instantiation) defaults to the spec's, else the first launch site's.
    `spec` is the kernel's parsed spec where the caller holds it (its instance and capture are
    read from it); without it the file's spec is parsed here, once, if the kernel has one.
    Raises only `NvrtcUnavailable`; every problem of the candidate is a `CandidateRejected`.

    Long because it is the build's steps in order (the candidate's code checked, spliced, the
    instance and flags chosen, NVRTC or nvcc, the kernel found in the cubin), each rejection
    returned where it is found.
    """
    original = find_kernel(file_text, kernel_name)
    if original is None:
        return CandidateRejected(
            "signature_mismatch", f"no single kernel {kernel_name!r} in the file"
        )
    text = file_text
    candidate_lines = 0
    if kernel_source is not None:
        # model text: no @cuda-llm comment, no host file, before anything compiles it
        kernel_source = candidate_policy.strip_spec_comments(kernel_source).code
        refused = candidate_policy.check_candidate(
            kernel_source,
            allowed_names=candidate_policy.original_include_names(file_text),
            file_dir=Path(path).resolve().parent if path is not None else None,
            include_paths=settings.include_paths,
        )
        if refused:
            return CandidateRejected("compile_error", refused)
        candidate_lines = kernel_source.strip("\n").count("\n") + 1
        text = splice(file_text, original, kernel_source)
        found = [k for k in find_kernels(text) if k.name == kernel_name]
        if len(found) != 1:
            others = sorted({k.name for k in find_kernels(kernel_source)} - {kernel_name})
            renamed = f": it defines {', '.join(others)} instead" if others and not found else ""
            return CandidateRejected(
                "signature_mismatch",
                f"the candidate must define exactly one __global__ kernel named {kernel_name} "
                f"(found {len(found)}{renamed})",
            )
        problem = check_signature(original, found[0])
        if problem:
            return CandidateRejected("signature_mismatch", problem)
        kernel = found[0]
        # the candidate's lines in the file, to point compile errors at them
        first_line = original.span.start.line
    else:
        kernel = original
        first_line = None
    if spec is None and original.spec is not None:
        spec, _ = parse_spec(original, file_text)  # it names the instance and the capture
    if instance is None and original.is_template and spec is not None:
        instance = spec.instance
    expr = name_expression(kernel, instance)
    known = _captured_entry(spec, path)
    if kernel_source is not None and _needs_nvcc(
        file_text, path, settings, arch, original, instance
    ):
        # built the way the original is: nvcc's verdict, not NVRTC's, judges it
        return _nvcc_binary(
            text, path, settings, arch, kernel, expr, first_line, candidate_lines, known
        )
    result = _compile(text, path, settings, arch, expr)
    if not _built(result, kernel, expr):  # (a kernel NVRTC's unit left out is not lowered)
        if kernel_source is None and nvcc_build.available():
            built = _nvcc_binary(text, path, settings, arch, kernel, expr, None, 0, known)
            if isinstance(built, KernelBinary):
                return built
            return CandidateRejected(
                "compile_error",
                _compile_message(result, None, 0)
                + f"\n(nvcc could not build it either: {built.message.splitlines()[0]})",
            )
        if result.ok and result.cubin is not None:  # compiled, the kernel left out
            return CandidateRejected(
                "compile_error",
                f"NVRTC did not lower {expr!r}: its device unit leaves the kernel out (install "
                "the nvcc extra, `pip install 'cuda-llm-lsp[nvcc]'`, to build it with nvcc)",
            )
        return CandidateRejected(
            "compile_error", _compile_message(result, first_line, candidate_lines)
        )
    entry = result.lowered_names.get(expr) or (kernel.name if kernel.is_extern_c else None)
    if entry is None or result.cubin is None:
        return CandidateRejected("compile_error", f"NVRTC did not lower {expr!r}")
    return KernelBinary(
        source_name=kernel_name,
        entry=entry,
        cubin=result.cubin,
        arch=arch or result.arch,  # the GPU's (built with its `a` features: `_compile`)
        resources=result.resources.get(expr),
    )


def _needs_nvcc(
    file_text: str,
    path: Path | None,
    settings: Settings,
    arch: str | None,
    original: Kernel,
    instance: str | None,
) -> bool:
    """Whether the original is built by nvcc (NVRTC cannot build it, an nvcc can): a candidate
    is then built by nvcc too. The original's NVRTC compile is a cache hit after its build."""
    if not nvcc_build.available():
        return False
    expr = name_expression(original, instance)
    result = _compile(file_text, path, settings, arch, expr)
    return not _built(result, original, expr)


def _built(result: CompileResult, kernel: Kernel, expr: str) -> bool:
    """NVRTC built the kernel: compiled, and its instance lowered (a kernel the device unit had
    to leave out, say one calling Thrust's algorithms, compiles to nothing and lowers to none)."""
    if not result.ok or result.cubin is None:
        return False
    return kernel.is_extern_c or expr in result.lowered_names


def _captured_entry(spec: TestSpec | None, path: Path | None) -> str | None:
    """The mangled name the user's program launched, where the kernel's spec has a capture:
    the entry to take from nvcc's cubin when it holds several instances of a template (CuTe's
    names are not read back reliably)."""
    if path is None or spec is None or spec.capture is None:
        return None
    try:
        return load_capture(spec, Path(path).resolve().parent)[1].mangled
    except CapturedDataError:
        return None


def _nvcc_binary(
    text: str,
    path: Path | None,
    settings: Settings,
    arch: str | None,
    kernel: Kernel,
    expr: str,
    first_line: int | None,
    candidate_lines: int,
    known_entry: str | None = None,
) -> KernelBinary | CandidateRejected:
    try:
        built = nvcc_build.build_with_nvcc(text, path, settings, arch, kernel, expr, known_entry)
    except NvccUnavailable as exc:
        return CandidateRejected("compile_error", str(exc))
    if built.cubin is None or built.entry is None:
        if built.result.ok or built.result.timed_out:
            return CandidateRejected("compile_error", built.problem or built.result.message())
        return CandidateRejected(
            "compile_error", "nvcc: " + _compile_message(built.result, first_line, candidate_lines)
        )
    return KernelBinary(
        source_name=kernel.name,
        entry=built.entry,
        cubin=built.cubin,
        arch=arch or built.arch,
        resources=built.resources,
        builder="nvcc",
    )


def _compile(
    text: str, path: Path | None, settings: Settings, arch: str | None, expr: str
) -> CompileResult:
    unit = build_device_unit(text, path, settings.include_paths)
    # a given arch is not resolved: resolving asks the local driver (cuInit, ~0.3 s on an H100);
    # it is the evaluating GPU's, so its architecture-specific features are on (`sm_90a`)
    options = compile_options(
        replace(settings, arch=with_arch_features(arch)) if arch else settings
    )
    return compile_cached(unit, options, (expr,), timeout_s=settings.compile_timeout_s)


def _compile_message(
    result: CompileResult | NvccResult, first_line: int | None, candidate_lines: int
) -> str:
    """NVRTC's errors; a candidate's only on its own lines or in toolkit headers (the rest of a
    log could quote any file NVRTC read: `compile.candidate_policy`)."""
    errors = result.errors
    hidden = 0
    if first_line is not None:
        kept, hidden = candidate_policy.candidate_diagnostics(errors, first_line, candidate_lines)
        errors = tuple(kept)
        if not errors:
            return (
                f"compilation failed: {hidden} error(s) outside the candidate's own lines "
                "are not shown"
            )
    if errors:
        lines = [
            f"line {d.line}:{d.column}: {d.severity}: {d.message}"
            + (
                f" (line {d.line - first_line} of the candidate)"
                if first_line is not None and d.line - 1 >= first_line
                else ""
            )
            for d in errors
        ]
    else:
        lines = result.log.splitlines()
    text = "\n".join(lines[:LOG_LINES])
    if len(lines) > LOG_LINES:
        text += f"\n... ({len(lines) - LOG_LINES} more lines)"
    if hidden:
        text += f"\n({hidden} error(s) outside the candidate's own lines are not shown)"
    return text or "compilation failed"
