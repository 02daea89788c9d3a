"""`fsr.toolchain.clean_candidate` drops what the file already defines by `fsr.clashes`' rule
(token for token, every device-side definition kind), so a reply repeating the file's struct,
constexpr or helper with other comments or spacing builds in the loop as `apply` would write it,
instead of failing as a redefinition."""

from __future__ import annotations

from cuda_llm_lsp.fsr.toolchain import clean_candidate
from tests.support.fsr_fakes import saxpy_candidate

FILE = """\
#include <cuda_runtime.h>

#define BLOCK 256
#define TWICE(v) ((v) + (v))

struct Pair { float a; float b; };
constexpr int UNROLL = 4;
__device__ float scale(float a, float x) { return a * x; }

/* @cuda-llm
sizes.n = [1, 1000]
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

#define LATER 8
"""


def test_repeated_definitions_of_every_kind_are_dropped_whatever_their_comments() -> None:
    code = (
        "#define BLOCK 256  // the file's block\n"
        "#define TWICE(v) ((v) + (v))\n"
        "struct Pair {\n  float a;  // first\n  float b;\n};\n"
        "constexpr int UNROLL = 4;  /* as in the file */\n"
        "// the file's helper\n__device__ float scale(float a, float x)\n{\n"
        "    return a * x;  // same tokens\n}\n"
        "__device__ float twice(float v) { return v + v; }\n" + saxpy_candidate("x")
    )
    cleaned = clean_candidate(code, FILE)
    for gone in (
        "#define BLOCK",
        "#define TWICE",
        "struct Pair",
        "constexpr int UNROLL",
        "__device__ float scale",
    ):
        assert gone not in cleaned, gone
    assert "__device__ float twice(float v)" in cleaned and "variant: x" in cleaned
    assert "// the file's helper" in cleaned  # comments are the reply's: left


def test_what_differs_or_is_not_the_files_to_give_is_kept() -> None:
    code = (
        "#define BLOCK 128\n"  # another value: apply renames it, the build must see it
        "#define LATER 8\n"  # the file's comes after the kernel
        "struct Pair { float a; double b; };\n"
        "#ifndef UNROLL2\nconstexpr int UNROLL = 4;\n#endif\n" + saxpy_candidate("x")  # conditional
    )
    cleaned = clean_candidate(code, FILE)
    for kept in (
        "#define BLOCK 128",
        "#define LATER 8",
        "struct Pair { float a; double b; };",
        "constexpr int UNROLL = 4;",
    ):
        assert kept in cleaned, kept
    # the kernel itself is never dropped, even unchanged
    original = FILE[FILE.index('extern "C"') : FILE.index("#define LATER")]
    assert "void saxpy" in clean_candidate(original, FILE)
