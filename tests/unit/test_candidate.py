"""Building a candidate: splice into the file, keep the signature, compile (real NVRTC, no GPU)."""

from __future__ import annotations

import pytest

from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.evaluate.candidate import CandidateRejected, build_binary, check_signature
from cuda_llm_lsp.evaluate.types import KernelBinary
from cuda_llm_lsp.source.kernels import find_kernels
from tests.gpu.kernels import FAST, PLANTED, TWICE

TEMPLATE = """
/* @cuda-llm
instance = "scale<float, 128>"
sizes.n = [1, 1000]
grid = "cdiv(n, 128)"
block = 128
args.x = "float32[n]"
args.y = "out float32[n]"
args.n = "n"
*/
template <typename T, int B>
__global__ void scale(const T* x, T* y, int n) {
    int i = blockIdx.x * B + threadIdx.x;
    if (i < n) y[i] = 2 * x[i];
}
"""


def build(text: str, name: str, candidate: str | None = None) -> KernelBinary | CandidateRejected:
    return build_binary(text, None, name, Settings(), kernel_source=candidate, arch="sm_90")


def test_original_and_candidate_compile_to_loadable_entries() -> None:
    base = build(TWICE, "twice")
    cand = build(TWICE, "twice", "__device__ float two() { return 2.0f; }\n" + FAST)
    assert isinstance(base, KernelBinary) and isinstance(cand, KernelBinary)
    assert base.entry == cand.entry == "twice"  # extern "C"
    assert base.cubin.startswith(b"\x7fELF") and base.cubin != cand.cubin
    assert base.arch == "sm_90" and base.resources is not None


def test_qualifiers_and_launch_bounds_may_change() -> None:
    fancy = FAST.replace("const float* x", "const float* __restrict__ x").replace(
        'extern "C" __global__ void', 'extern "C" __global__ void __launch_bounds__(256)'
    )
    assert isinstance(build(TWICE, "twice", fancy), KernelBinary)


@pytest.mark.parametrize(
    ("candidate", "needle"),
    [
        (FAST.replace("int n)", "long n)"), "parameter `int n` became `long n`"),
        (FAST.replace("float* y,", "float* out,"), "parameter `float* y` became `float* out`"),
        (FAST.replace(", int n)", ")").replace("i < n", "i < 1"), "must keep its 3 parameters"),
        (
            "__global__ void other() {}",
            "exactly one __global__ kernel named twice (found 0: it defines other instead)",
        ),
        (FAST + "\n" + FAST, "(found 2)"),
    ],
)
def test_signature_changes_are_rejected(candidate: str, needle: str) -> None:
    r = build(TWICE, "twice", candidate)
    assert isinstance(r, CandidateRejected) and r.status == "signature_mismatch"
    assert needle in r.message


def test_compile_errors_point_into_the_candidate() -> None:
    r = build(TWICE, "twice", PLANTED["does_not_compile"][0])
    assert isinstance(r, CandidateRejected) and r.status == "compile_error"
    assert 'identifier "undefined_symbol" is undefined (line 3 of the candidate)' in r.message


def test_templated_kernel_uses_the_spec_instance() -> None:
    base = build(TEMPLATE, "scale")
    assert isinstance(base, KernelBinary) and base.entry.startswith("_Z5scaleIfLi128E")
    kernel_text = TEMPLATE[TEMPLATE.index("template") :].replace("2 * x[i]", "x[i] + x[i]")
    cand = build(TEMPLATE, "scale", kernel_text)
    assert isinstance(cand, KernelBinary) and cand.entry == base.entry


def test_check_signature_ignores_whitespace_and_restrict() -> None:
    a = find_kernels('extern "C" __global__ void k(const float *x, int n) {}')[0]
    b = find_kernels('extern "C" __global__ void k(const float* __restrict__ x, int n) {}')[0]
    assert check_signature(a, b) is None


def test_the_evaluating_gpus_arch_wins_over_the_configured_one() -> None:
    settings = Settings(arch="sm_80", defines=("UNUSED_FLAG=1",))
    built = build_binary(TWICE, None, "twice", settings, arch="sm_90")
    assert isinstance(built, KernelBinary) and built.arch == "sm_90"
    configured = build_binary(TWICE, None, "twice", settings)
    assert isinstance(configured, KernelBinary) and configured.arch == "sm_80"


def test_the_evaluator_builds_with_the_gpus_arch_specific_features() -> None:
    """A Hopper kernel using wgmma (sm_90a only, as CUTLASS's are) builds for an sm_90 GPU:
    the evaluator builds for the GPU that runs it, its `a` features on; the binary says sm_90."""
    text = """extern "C" __global__ void __launch_bounds__(128) grow(float* x) {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\\n" ::: "memory");
    x[threadIdx.x] = 1.0f;
}
"""
    built = build_binary(text, None, "grow", Settings(), arch="sm_90")
    assert isinstance(built, KernelBinary), built
    assert built.arch == "sm_90"


def test_a_spec_the_caller_holds_is_not_parsed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The spec names a template's instance (and a capture's entry): a caller that parsed it
    passes it in; without it the file's spec is parsed here once, for both."""
    from cuda_llm_lsp.evaluate import candidate
    from cuda_llm_lsp.source.spec import parse_spec

    kernel = find_kernels(TEMPLATE)[0]
    spec, problems = parse_spec(kernel, TEMPLATE)
    assert spec is not None, problems
    calls: list[str] = []

    def counted(*args: object) -> object:
        calls.append(kernel.name)
        return parse_spec(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(candidate, "parse_spec", counted)
    given = build_binary(TEMPLATE, None, "scale", Settings(), spec=spec, arch="sm_90")
    assert isinstance(given, KernelBinary) and calls == []
    parsed = build_binary(TEMPLATE, None, "scale", Settings(), arch="sm_90")
    assert isinstance(parsed, KernelBinary) and calls == ["scale"]
    assert given.entry == parsed.entry and "scaleIfLi128E" in given.entry
