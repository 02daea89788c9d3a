"""Red-team reproducers for issue 37 (docs/design.md, "What an accepted winner may write"): routes
by which a reply could still get host code into the user's file, or be judged on other code than
the user's program runs. Each is a planted reply through `device_only` (the loop's check) and
`reply_refusal` (the write's check); the honest shapes next to them still pass.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_llm_lsp.compile.candidate_policy import check_candidate
from cuda_llm_lsp.compile.host_object import build_host_object, new_host_code, tools_available
from cuda_llm_lsp.compile.nvcc import find_nvcc
from cuda_llm_lsp.fsr import apply
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
    # judged by NVRTC on one body, run by the user's nvcc-built program on another
    "#ifndef __CUDACC_RTC__ in a device body": (
        "__device__ inline float twice(float v) {\n#ifndef __CUDACC_RTC__\n"
        "  return 0.f;  // what the user's program runs\n#endif\n  return v + v;\n}\n",
        "names `__CUDACC_RTC__`",
    ),
    "#if !defined(__CUDACC_RTC__)": (
        "#if !defined(__CUDACC_RTC__)\n#define FACTOR 0.f\n#else\n#define FACTOR 2.f\n#endif\n"
        "__device__ inline float twice(float v) { return v * FACTOR; }\n",
        "names `__CUDACC_RTC__`",
    ),
    "#ifdef __NVCC__": (
        "__device__ inline float twice(float v) {\n#ifdef __NVCC__\n  return 0.f;\n#endif\n"
        "  return v + v;\n}\n",
        "names `__NVCC__`",
    ),
    "a macro carrying the toolkit version": (
        "#define NEW (__CUDACC_VER_MAJOR__ > 12)\n"
        "__device__ inline float twice(float v) { return NEW ? 0.f : v + v; }\n",
        "names `__CUDACC_VER_MAJOR__`",
    ),
    "the runtime's version, defined only where nvcc includes cuda_runtime.h": (
        "__device__ inline float twice(float v) {\n#ifdef CUDART_VERSION\n  return 0.f;\n"
        "#endif\n  return v + v;\n}\n",
        "names `CUDART_VERSION`",
    ),
    "a time bomb": (
        "__device__ inline float twice(float v) { return __DATE__[4] == '1' ? 0.f : v + v; }\n",
        "names `__DATE__`",
    ),
    # tree-sitter took `%:include` for a declaration reaching over the kernel, and dropping it
    # dropped the kernel: the preprocessor reads the digraph as `#`
    "a digraph directive": (
        '%:include "../project/.env"\n__device__ inline float twice(float v) { return v + v; }\n',
        "spells a directive with `%:`",
    ),
    "a trigraph directive": (
        "??=define FACTOR 0.f\n__device__ inline float twice(float v) { return v * 2.f; }\n",
        "spells a directive with `??=`",
    ),
    "the host compiler": (
        "#if defined(__GNUC__)\n#define FACTOR 0.f\n#else\n#define FACTOR 2.f\n#endif\n"
        "__device__ inline float twice(float v) { return v * FACTOR; }\n",
        "names `__GNUC__`",
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


# `asm` outside a function body: an `asm` label names a `__device__` variable's host shadow
# `optind`, and the file's own host code then reads the shadow instead of libc's.
ASM_ATTACKS = {
    "an asm label on a device variable": '__device__ int v __asm__("optind");\n',
    "an asm label on a prototype": '__device__ float helper(float) asm("main");\n',
    "an asm label through a macro": '#define L(x) __asm__(x)\n__device__ int v L("optind");\n',
    "through two macros": '#define A __asm__\n#define B A\n__device__ int v B("optind");\n',
}


@pytest.mark.parametrize("shape", sorted(ASM_ATTACKS))
def test_asm_outside_a_function_body_is_refused(shape: str) -> None:
    helper = ASM_ATTACKS[shape] + "__device__ inline float twice(float v) { return v + v; }\n"
    refused = device_only(helper + KERNEL)
    assert isinstance(refused, str) and "outside a function body" in refused, refused
    assert reply_refusal(helper + KERNEL) is not None


def test_asm_in_a_device_body_and_its_macro_still_pass() -> None:
    helper = (
        '#define LANE(r) asm volatile("mov.u32 %0, %%laneid;" : "=r"(r))\n'
        "__device__ inline float twice(float v) {\n  unsigned r;\n  LANE(r);\n"
        '  asm("add.f32 %0, %1, %1;" : "=f"(v) : "f"(v));\n  return v + r * 0.f;\n}\n'
    )
    prepared = device_only(helper + KERNEL)
    assert isinstance(prepared, DeviceOnly), prepared


@pytest.mark.skipif(
    find_nvcc() is None or not tools_available(), reason="no nvcc (the `nvcc` extra) or binutils"
)
def test_the_proof_refuses_a_shadow_of_what_the_original_takes_from_libc(tmp_path: Path) -> None:
    """The source check bypassed: nvcc gives the host shadow the label, as local data (which the
    proof otherwise lets pass); the original used `optind` from libc, the edit defines it."""
    host = (
        "#include <cstdio>\nextern int optind;\n"
        'int main() { std::printf("%d\\n", optind); return 0; }\n'
    )
    kernel = "__global__ void k(int* x) { x[0] = 1; }\n"
    built = []
    for name, text in (
        ("a", kernel + host),
        ("b", '__device__ int v __asm__("optind");\n' + kernel + host),
    ):
        result = build_host_object(text, tmp_path / f"{name}.cu")
        assert result.host is not None, result.result.log
        built.append(result.host)
    found = new_host_code(built[0], built[1], frozenset({"k", "v"}))
    assert any("`optind`" in f and "from elsewhere" in f for f in found), found


def test_a_static_inline_data_member_is_a_host_variable() -> None:
    """`static inline int x = printf(...)` in a reply's type is a host variable whose initialiser
    runs before `main` (an nvcc-built program printed it); NVRTC refuses it, but the `nvcc -cubin`
    builder of last resort never compiles it: the type is dropped like any host object."""
    helper = (
        'struct Hook {\n  static inline int x = printf("PWNED\\n");\n'
        "  static constexpr int k = 2;\n};\n"
        "__device__ inline float twice(float v) { return v * Hook::k; }\n"
    )
    prepared = device_only(helper + KERNEL)
    assert isinstance(prepared, DeviceOnly), prepared
    assert "printf" not in prepared.text
    assert any("static data member `x`" in i.what for i in prepared.dropped), prepared.dropped
    assert reply_refusal(helper + KERNEL) is not None
    honest = "struct Consts {\n  static constexpr int k = 2;\n};\n"
    kept = device_only(honest + "__device__ inline float twice(float v) { return v; }\n" + KERNEL)
    assert isinstance(kept, DeviceOnly) and not kept.dropped, kept


# A start-up entry on a `__constant__` variable's host shadow, its attribute spelt through a macro
# the attribute check could not read (and its section name split over string literals).
ATTRIBUTE_ATTACKS = {
    "__attribute__ through a macro": (
        '#define A __attribute__\n__constant__ int hook A((section(".ini" "t_array"))) = 1;\n'
    ),
    "__declspec through a macro": "#define D __declspec\n__device__ D(selectany) int hook;\n",
    "a bracket through a macro": (
        '#define L [\n__constant__ L[gnu::section(".ini" "t_array")]] int hook = 1;\n'
    ),
}


@pytest.mark.parametrize("shape", sorted(ATTRIBUTE_ATTACKS))
def test_an_attribute_spelt_through_a_macro_is_refused(shape: str) -> None:
    helper = ATTRIBUTE_ATTACKS[shape] + "__device__ inline float twice(float v) { return v; }\n"
    refused = device_only(helper + KERNEL)
    assert isinstance(refused, str) and "through a macro" in refused, refused
    assert reply_refusal(helper + KERNEL) is not None


def test_plain_attributes_and_indexing_macros_still_pass() -> None:
    helper = (
        "#define AT(a, i) a[(i)]\n#define ALIGNED __attribute__((aligned(16)))\n"
        "struct ALIGNED Pair { float a, b; };\n"
        "__device__ inline float twice(float v) { float t[2] = {v, v}; return AT(t, 0) * 2; }\n"
    )
    prepared = device_only(helper + KERNEL)
    assert isinstance(prepared, DeviceOnly), prepared


@pytest.mark.parametrize("header", ["<vector>", "<iostream>", "<unistd.h>"])
def test_has_include_of_a_host_only_header_is_refused(header: str) -> None:
    """NVRTC answers `__has_include(<vector>)` false, nvcc (host preprocessor) true: a kernel
    judged on one branch would be built on the other."""
    helper = (
        f"#if __has_include({header})\n#define FACTOR 0.f\n#else\n#define FACTOR 2.f\n#endif\n"
        "__device__ inline float twice(float v) { return v * FACTOR; }\n"
    )
    refused = check_candidate(helper + KERNEL)
    assert refused is not None and "__has_include" in refused, refused
    honest = "#if __has_include(<cuda_bf16.h>)\n#include <cuda_bf16.h>\n#endif\n"
    assert check_candidate(honest + KERNEL.replace("twice(y[i])", "y[i]")) is None


CHECKED_FILE = """\
#include <cstdio>
#include "check.h"
/* @cuda-llm
sizes.n = [1024]
grid = "cdiv(n, 256)"
block = "256"
*/
__global__ void scale(float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.f * y[i];
}
int main() {
  scale<<<4, 256>>>(nullptr, 0);
  CHECK();  // check.h: if (cudaGetLastError() != cudaSuccess) return 1
  return 0;
}
"""


def test_a_replys_macro_ends_with_the_kernel() -> None:
    """A reply's `#define cudaGetLastError() cudaSuccess` would reach the file's host code
    through a header's macro expanded below the kernel (no token of the file to clash with, no
    new host symbol for the proof): the written file `#undef`s it after the kernel."""
    reply = (
        "#define cudaGetLastError() cudaSuccess\n#define TWICE(v) ((v) + (v))\n"
        "__global__ void scale(float* y, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) y[i] = TWICE(y[i]);\n}\n"
    )
    text = apply.winner_text(CHECKED_FILE, "scale", reply).text
    kernel_end = text.index("TWICE(y[i]);\n}\n") + len("TWICE(y[i]);\n}\n")
    assert text[kernel_end:].startswith("#undef cudaGetLastError\n#undef TWICE\nint main()"), text


@pytest.mark.skipif(
    find_nvcc() is None or not tools_available(), reason="no nvcc (the `nvcc` extra) or binutils"
)
def test_a_device_function_redeclaring_a_host_one_is_not_written() -> None:
    """`__device__ int getchar()` redeclares <cstdio>'s: nvcc treats it as `__host__ __device__`
    and the host object defines `getchar` (global), which takes the C library's place for the
    whole program. Its name is a device name of the edited file, so the symbol rule let it pass;
    nvcc's own warning names it."""
    original = CHECKED_FILE.replace('#include "check.h"\n', "").replace(
        "  CHECK();  // check.h: if (cudaGetLastError() != cudaSuccess) return 1\n", ""
    )
    helper = "__device__ int getchar() { return 0; }\n"
    edited = original.replace("/* @cuda-llm", helper + "/* @cuda-llm").replace(
        "2.f * y[i]", "2.f * y[i] + getchar()"
    )
    checked = apply.write_check(edited, original, None)
    assert checked.refused is not None and "`getchar`" in checked.refused, checked
    honest = original.replace("/* @cuda-llm", "__device__ int one() { return 1; }\n/* @cuda-llm")
    assert apply.write_check(honest, original, None).refused is None


@pytest.mark.parametrize(
    "test", ["#if !(__CUDA_ARCH__)", "#if !(defined(__CUDA_ARCH__))", "#if ! ( __CUDA_ARCH__ )"]
)
def test_a_negated_arch_test_in_parentheses_is_a_host_only_branch(test: str) -> None:
    helper = (
        f"__device__ inline float twice(float v) {{\n{test}\n  return 0.f;\n#endif\n"
        "  return v + v;\n}\n"
    )
    refused = device_only(helper + KERNEL)
    assert isinstance(refused, str) and "host-only branch" in refused, refused


# Routes that held when tried (refused, or their host part dropped): kept as regressions. Each
# carries `hook` in what must never reach the written text.
HELD = {
    "#pragma GCC poison": "#pragma GCC poison hook\n",
    "[[gnu::constructor]]": "[[gnu::constructor]] __device__ void hook() {}\n",
    "_Pragma through stringizing": '#define P(x) _Pragma(#x)\nP(GCC dependency "hook")\n',
    "#define __device__": "#define __device__\nvoid hook() {}\n",
    "#undef __CUDA_ARCH__": "#undef __CUDA_ARCH__\n__device__ int hook;\n",
    "a section on a __constant__": (
        '__constant__ int hook __attribute__((section(".init_array"))) = 1;\n'
    ),
    "a weak libc override": 'extern "C" __attribute__((weak)) int puts(const char* hook);\n',
    "__managed__ with an initialiser": "__managed__ int hook = 5;\n",
    "a host lambda": "__device__ auto hook = [] __host__ () { return 1; };\n",
    "a host specialisation": (
        "template <class T> __device__ int f(T) { return 0; }\n"
        "template <> int f<int>(int) { return hook(); }\n"
    ),
    "#line": '#line 1 "hook.cu"\n',
    "namespace-scope asm in a namespace": 'namespace n { asm(".quad hook"); }\n',
    "#ifndef __CUDACC_RTC__ at namespace scope": (
        "#ifndef __CUDACC_RTC__\nstatic int hook = 1;\n#endif\n"
    ),
}


@pytest.mark.parametrize("shape", sorted(HELD))
def test_routes_that_held_still_hold(shape: str) -> None:
    helper = HELD[shape] + "__device__ inline float twice(float v) { return v + v; }\n"
    prepared = device_only(helper + KERNEL)
    if isinstance(prepared, DeviceOnly):
        assert "hook" not in prepared.text, prepared.text
        assert prepared.dropped, prepared


def test_file_and_line_in_the_kernel_are_refused_a_check_macro_for_main_is_not() -> None:
    bomb = (
        "#define WHERE __FILE__\n"
        "__device__ inline float twice(float v) { return WHERE[1] == 't' ? v + v : 0.f; }\n"
    )
    refused = device_only(bomb + KERNEL)
    assert isinstance(refused, str) and "`WHERE`" in refused, refused
    program = (
        "#include <cstdio>\n"
        '#define CUDA_CHECK(x) do { if ((x) != cudaSuccess) printf("%s:%d\\n", __FILE__, '
        "__LINE__); } while (0)\n"
        "__device__ inline float twice(float v) { return v + v; }\n"
        + KERNEL
        + "int main() { CUDA_CHECK(cudaDeviceSynchronize()); return 0; }\n"
    )
    prepared = device_only(program)
    assert isinstance(prepared, DeviceOnly), prepared
    assert "int main" not in prepared.text
    assert reply_refusal(prepared.text) is None
