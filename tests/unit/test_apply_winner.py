"""A winner written into its file as one consistent change ([launch]): kernel, helpers above the
spec, host code dropped, its own launch in the spec and at every launch site, and the whole file
built with nvcc (where the `nvcc` extra is installed) before it is written."""

from __future__ import annotations

import pytest

from cuda_llm_lsp.compile.nvcc import find_nvcc
from cuda_llm_lsp.fsr.apply import NotApplicable, build_check, winner_text
from cuda_llm_lsp.source.kernels import find_kernels
from cuda_llm_lsp.source.launch_sites import find_launch_sites
from cuda_llm_lsp.source.spec import TestSpec, parse_spec
from cuda_llm_lsp.source.spec.launch import LaunchConfig
from cuda_llm_lsp.source.spec.tunables import Tunables
from tests.support.fsr_fakes import SAXPY_FILE

needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="no nvcc (the `nvcc` extra)")

KERNEL = """__global__ void saxpy(const float* x, float* y, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = twice(scale(a, x[i])) * 0.5f + y[i];
}
"""
REPLY = (
    "#define HALF 0.5f\n__device__ float twice(float v) { return 2.0f * v; }\n\n"
    + KERNEL
    + "\nvoid run(const float* x, float* y, int n) { saxpy<<<1, 1>>>(x, y, 1.0f, n); }\n"
    "int main() { return 0; }\n"
)
OWN = LaunchConfig(("cdiv(n, 1024)",), ("1024",), "4096")


def spec_of(text: str) -> TestSpec | None:
    (kernel,) = [k for k in find_kernels(text) if k.name == "saxpy"]
    return parse_spec(kernel, text)[0]


def test_helpers_go_above_the_spec_and_host_code_is_dropped() -> None:
    new = winner_text(SAXPY_FILE, "saxpy", REPLY).text
    assert new.index("__device__ float twice") < new.index("/* @cuda-llm")
    assert new.count("int main()") == 1 and "void run(" not in new
    assert 'extern "C" __global__ void saxpy' in new  # the dropped linkage is restored
    spec = spec_of(new)  # the spec is still directly above the kernel
    assert spec is not None and spec.grid == ("cdiv(n, 256)",)
    assert "saxpy<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>" in new  # no launch change: sites kept


def test_a_launch_change_rewrites_the_spec_and_every_site_in_one_text() -> None:
    applied = winner_text(SAXPY_FILE, "saxpy", REPLY, OWN)
    assert applied.notes == ()
    spec = spec_of(applied.text)
    assert spec is not None
    assert (spec.grid, spec.block, spec.smem) == (OWN.grid, OWN.block, OWN.smem)
    (site,) = find_launch_sites(applied.text, "saxpy")
    assert "saxpy<<<(n + 1023) / 1024, 1024, 4096>>>(x, y, 2.5f, n);" in applied.text, site


def test_a_stripped_launch_block_leaves_no_whitespace_line_behind() -> None:
    # the loop keeps the candidate with its `@cuda-llm launch` comment replaced by a space
    cleaned = "// why: one block per row\n \n" + KERNEL
    new = winner_text(SAXPY_FILE, "saxpy", cleaned, OWN).text
    assert "// why: one block per row\n\n/* @cuda-llm" in new
    assert not any(line.isspace() for line in new.splitlines()), new


def test_a_site_that_cannot_be_rewritten_is_named_and_left_alone() -> None:
    macro = SAXPY_FILE.replace(
        "saxpy<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(x, y, 2.5f, n);", "LAUNCH(saxpy, x, y, 2.5f, n);"
    ).replace(
        "#define BLOCK 256",
        "#define BLOCK 256\n#define LAUNCH(k, ...) k<<<4096, 256>>>(__VA_ARGS__)",
    )
    applied = winner_text(macro, "saxpy", REPLY, OWN)
    assert applied.notes and "LAUNCH(saxpy, x, y, 2.5f, n);" in applied.text
    spec = spec_of(applied.text)
    assert spec is not None and spec.block == ("1024",)


def test_a_spec_value_over_several_lines_is_not_rewritten_blindly() -> None:
    text = SAXPY_FILE.replace('grid = "cdiv(n, 256)"', 'grid = [\n  "cdiv(n, 256)",\n]')
    with pytest.raises(NotApplicable, match="several lines"):
        winner_text(text, "saxpy", REPLY, OWN)


def test_a_launch_still_declaring_tunables_is_refused() -> None:
    """The loop tunes a launch block's tunables and passes on only the tuned numbers; a launch
    still declaring them is refused, never written into the spec as if it were numbers."""
    tunables = Tunables({"THREADS": (128, 256)}, default={"THREADS": 128})
    declaring = LaunchConfig(("cdiv(n, THREADS)",), ("THREADS",), "0", tunables)
    with pytest.raises(NotApplicable, match="declaring tunables"):
        winner_text(SAXPY_FILE, "saxpy", REPLY, declaring)
    resolved = LaunchConfig(("cdiv(n, 128)",), ("128",), "0")  # the same launch, tuned
    assert "block = 128" in winner_text(SAXPY_FILE, "saxpy", REPLY, resolved).text


@needs_nvcc
def test_the_edited_file_builds_and_a_broken_one_is_refused_with_nvccs_message() -> None:
    new = winner_text(SAXPY_FILE, "saxpy", REPLY, OWN).text
    assert build_check(new, SAXPY_FILE, None) is None
    broken = new.replace("int n = 1 << 20;", "int n = 1 << 20; undefined_call(n);")
    refused = build_check(broken, SAXPY_FILE, None)
    assert refused is not None and "undefined_call" in refused and "line " in refused
    # an original that does not build either: nvcc proves nothing about the edit
    assert build_check(broken, broken, None) is None
