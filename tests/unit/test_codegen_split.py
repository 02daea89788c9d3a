"""Diagnostics from NVRTC's front end first, code generation per kernel after (issue 17).

Real NVRTC in the compile processes; the pool counts the code generations it ran.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cuda_llm_lsp.compile.analysis import KernelCuts, add_resources, analyze, analyze_syntax
from cuda_llm_lsp.compile.isolated import shared_pool
from cuda_llm_lsp.config import Settings
from tests.support.generated_cuda import generate
from tests.support.load import slack

SETTINGS = Settings(arch="sm_90")
WHERE = Path("/tmp/generated.cu")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_LLM_CACHE_DIR", str(tmp_path / "cache"))


def test_an_edit_inside_one_kernel_generates_that_kernel_alone() -> None:
    before = add_resources(analyze_syntax(generate(3000).text, WHERE, SETTINGS))
    assert before.kernels and all(i.resources is not None for i in before.kernels)
    edited = generate(3000, edit=1, tile=512)
    assert abs(edited.text.count("\n") - 3000) < 25
    front = analyze_syntax(edited.text, WHERE, SETTINGS)
    assert front.diagnostics == () and front.resources_pending
    assert all(i.resources is None and i.symbol_note == "updating…" for i in front.kernels)
    pool = shared_pool()
    generations, kernels = pool.generations, pool.kernels_generated
    started = time.perf_counter()
    after = add_resources(front)
    elapsed = time.perf_counter() - started
    assert pool.generations - generations == 1  # one compile
    assert pool.kernels_generated - kernels == 1  # of the edited kernel, no other
    assert elapsed < 1.0 * slack(), elapsed
    for old, new in zip(before.kernels, after.kernels, strict=True):
        assert new.resources is not None
        if new.kernel.name == edited.edited:
            assert (old.resources.shared_bytes, new.resources.shared_bytes) == (1024, 2048)
        else:
            assert new.resources == old.resources


def test_a_newer_edit_supersedes_code_generation_between_kernels() -> None:
    add_resources(analyze_syntax(generate(300).text, WHERE, SETTINGS))
    front = analyze_syntax(generate(300, edit=2, tile=128).text, WHERE, SETTINGS)
    compiles = shared_pool().compiles
    assert add_resources(front, cancelled=lambda: True) is front
    assert shared_pool().compiles == compiles


def test_ptxas_only_errors_come_from_code_generation_at_the_kernel() -> None:
    text = (
        "__global__ void fine(float* x) { x[0] = 1; }\n"
        "\n"
        "__global__ void greedy(float* x) {\n"
        "  __shared__ float s[100000];  // 400 kB: only ptxas sees it\n"
        "  s[threadIdx.x] = x[threadIdx.x]; __syncthreads(); x[threadIdx.x] = s[threadIdx.x + 1];\n"
        "}\n"
    )
    front = analyze_syntax(text, WHERE, SETTINGS)
    assert front.diagnostics == ()  # the front end finds nothing
    full = add_resources(front)
    (problem,) = full.diagnostics
    assert problem.code == "ptxas" and "too much shared data" in problem.message
    assert problem.line == 3 and text.split("\n")[2][problem.column - 1 :].startswith("greedy")
    assert full.compile is not None and not full.compile.ok
    assert analyze(text, WHERE, SETTINGS).diagnostics == full.diagnostics


def test_a_preprocessor_line_inside_a_body_keeps_that_body_in_every_unit() -> None:
    text = (
        "__global__ void a(float* x) {\n"
        "#define SCALE 3.0f\n"
        "  x[0] = SCALE;\n"
        "}\n"
        "__global__ void b(float* x) { x[0] = SCALE; }\n"
    )
    full = analyze(text, WHERE, SETTINGS)
    assert full.diagnostics == ()
    assert all(i.resources is not None for i in full.kernels)


def _unrolled(tile: int) -> str:
    return "".join(
        f"__global__ void k{n}(float* x) {{\n"
        f"  __shared__ float s[{tile if n == 1 else 256}];\n"
        "#pragma unroll\n"
        "  for (int i = 0; i < 4; ++i) s[threadIdx.x * 4 + i] = x[i];\n"
        "  #pragma unroll 2\n"
        "  for (int i = 0; i < 4; ++i) x[i] += s[i];\n"
        "#pragma unroll 1\n"
        "  for (int i = 0; i < 4; ++i) x[i] *= 2;\n"
        "}\n"
        for n in range(6)
    )


def test_an_edit_inside_a_kernel_with_pragma_unroll_generates_that_kernel_alone() -> None:
    """A loop pragma is no reason to keep a body in every unit (every edit regenerated every
    kernel of examples/tune/matmul_tiled.cu)."""
    before = add_resources(analyze_syntax(_unrolled(256), WHERE, SETTINGS))
    assert before.diagnostics == () and all(i.resources is not None for i in before.kernels)
    front = analyze_syntax(_unrolled(512), WHERE, SETTINGS)
    pool = shared_pool()
    generations, kernels = pool.generations, pool.kernels_generated
    after = add_resources(front)
    assert pool.generations - generations == 1
    assert pool.kernels_generated - kernels == 1
    for old, new in zip(before.kernels, after.kernels, strict=True):
        assert new.resources is not None and old.resources is not None
        if new.kernel.name == "k1":
            assert (old.resources.shared_bytes, new.resources.shared_bytes) == (1024, 2048)
        else:
            assert new.resources == old.resources


def test_a_conditional_or_a_continued_pragma_still_keeps_its_body_whole() -> None:
    text = (
        "__global__ void a(float* x) {\n#if 1\n  x[0] = 1;\n#endif\n}\n"
        "__global__ void b(float* x) {\n#pragma unroll \\\n  4\n  for (int i = 0; i < 4; ++i)"
        " x[i] = 0;\n}\n"
        "__global__ void c(float* x) {\n#pragma unroll\n  for (int i = 0; i < 4; ++i)"
        " x[i] = 0;\n}\n"
    )
    front = analyze_syntax(text, WHERE, SETTINGS)
    assert front.plan is not None
    assert set(KernelCuts(front.plan).bodies) == {2}


def test_kernels_whose_bodies_stay_whole_share_one_code_generation() -> None:
    """cuda-samples' tf32TensorCoreGemm: three kernels, each with `#if __CUDA_ARCH__` in its
    body; each one's own unit holds them all, so generating one unit per kernel did the whole
    file's code generation three times (21 s where 7 s do)."""
    text = (
        "".join(
            f"__global__ void k{n}(float* x) {{\n  __shared__ float s[{256 * (n + 1)}];\n"
            "#if __CUDA_ARCH__ >= 800\n  s[threadIdx.x] = x[0];\n#endif\n"
            "  x[threadIdx.x] = s[threadIdx.x + 1];\n}\n"
            for n in range(2)
        )
        + "__global__ void plain(float* x) { x[0] = 1; }\n"
    )
    front = analyze_syntax(text, WHERE, SETTINGS)
    assert front.plan is not None and set(KernelCuts(front.plan).bodies) == {2}
    pool = shared_pool()
    generations = pool.generations
    full = add_resources(front)
    assert pool.generations - generations == 2  # the two whole bodies together, `plain` alone
    shared = [i.resources.shared_bytes if i.resources else None for i in full.kernels]
    assert shared == [1024, 2048, 0] and full.diagnostics == ()
