"""Red-team reproducers for issue 37 (docs/design.md, "What an accepted winner may write"): routes
by which a reply could still get host code into the user's file, or be judged on other code than
the user's program runs. Each is a planted reply through `device_only` (the loop's check) and
`reply_refusal` (the write's check); the honest shapes next to them still pass.
"""

from __future__ import annotations

import pytest

from cuda_llm_lsp.source.device_only import DeviceOnly, device_only, reply_refusal

KERNEL = """\
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + twice(y[i]) * 0.5f;
}
"""

# `__host__` spelt across a line splice: nvcc reads `__host__ __device__` and builds the helper
# for the host too, its `#else` (host-only in fact) with a start-up entry split over string
# literals; every line-reading check saw `__ho` and `st__`.
SPLICED_HOST = (
    "__device__ __ho\\\nst__ inline float twice(float v) {\n#if __CUDA_ARCH__ >= 1\n"
    '  return v + v;\n#else\n  asm(".pushsec" "tion .ini" "t_array.00101\\n.quad 0\\n.pop" '
    '"section");\n  return v + v;\n#endif\n}\n'
)

ATTACKS = {
    "__host__ across a splice": (SPLICED_HOST, "across a line splice"),
    "a splice with blanks after the backslash": (
        SPLICED_HOST.replace("__ho\\\n", "__ho\\  \n"),
        "across a line splice",
    ),
    "a section directive across a splice": (
        '__device__ inline float twice(float v) {\n  asm volatile(".pushsec\\\ntion");\n'
        "  return v + v;\n}\n",
        "across a line splice",
    ),
}


@pytest.mark.parametrize("shape", sorted(ATTACKS))
def test_a_hidden_route_is_refused(shape: str) -> None:
    helper, says = ATTACKS[shape]
    refused = device_only(helper + KERNEL, " of the candidate")
    assert isinstance(refused, str), refused
    assert says in refused, refused
    written = reply_refusal(helper + KERNEL)  # `winner_text`'s check on the written text
    assert written is not None and says in written, written


HONEST = {
    "a multi-line macro": (
        "#define TWICE(v) \\\n  ((v) + \\\n   (v))\n"
        "__device__ inline float twice(float v) { return TWICE(v); }\n"
    ),
    "a macro body starting at the margin": (
        "#define TWICE(v) do { \\\nv = v + v; \\\n} while (0)\n"
        "__device__ inline float twice(float v) { TWICE(v); return v; }\n"
    ),
}


@pytest.mark.parametrize("shape", sorted(HONEST))
def test_honest_shapes_still_pass(shape: str) -> None:
    prepared = device_only(HONEST[shape] + KERNEL)
    assert isinstance(prepared, DeviceOnly), prepared
