"""Launch sites rewritten for a candidate's own launch configuration, each whole file then built
by a real `nvcc` (host code included): the program stays consistent, or the site is refused with
the reason (macro, launch API, side effects, an unbound size, no site)."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

import pytest

from cuda_llm_lsp.compile.nvcc import compile_file, find_nvcc
from cuda_llm_lsp.source.kernels import find_kernels
from cuda_llm_lsp.source.launch_sites import (
    LaunchRewrite,
    RefusalReason,
    find_launch_sites,
    rewrite_launches,
)
from cuda_llm_lsp.source.spec import TestSpec, parse_spec
from cuda_llm_lsp.source.spec.launch import LaunchConfig

needs_nvcc = pytest.mark.skipif(
    find_nvcc() is None,
    reason="nvcc not installed (the test extra installs it: cuda-toolkit[nvcc,cudart,crt,cccl])",
)

SCALE = """\
#include <cuda_runtime.h>
/* @cuda-llm
sizes.n = [1, 1000, 4096]
grid = "cdiv(n, 256)"
block = 256
args.x = "in float32[n]"
args.y = "out float32[n]"
args.n = "n"
*/
__global__ void scale(const float* x, float* y, int n) {
    extern __shared__ float tile[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
"""

TEMPLATE = """\
#include <cuda_runtime.h>
/* @cuda-llm
instance = "scale_t<float>"
sizes.n = [1, 1000]
grid = "cdiv(n, 256)"
block = 256
args.x = "in float32[n]"
args.y = "out float32[n]"
args.n = "n"
*/
template <typename T>
__global__ void scale_t(const T* x, T* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2 * x[i];
}
"""

TRANSPOSE = """\
#include <cuda_runtime.h>
/* @cuda-llm
sizes.rows = [1, 33, 1000]
sizes.cols = [1, 17, 999]
grid = ["cdiv(cols, 16)", "cdiv(rows, 16)"]
block = [16, 16]
args.in = "in float32[rows * cols]"
args.out = "out float32[rows * cols]"
args.rows = "rows"
args.cols = "cols"
*/
__global__ void transpose(const float* in, float* out, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && c < cols) out[c * rows + r] = in[r * cols + c];
}
"""

FLAT = """\
#include <cuda_runtime.h>
/* @cuda-llm
sizes.rows = [1, 33, 1000]
sizes.cols = [1, 17, 999]
grid = "cdiv(rows * cols, 256)"
block = 256
args.x = "in float32[rows * cols]"
args.y = "out float32[rows * cols]"
args.n = "rows * cols"
*/
__global__ void flat(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}
"""

TUNED = """\
#include <cuda_runtime.h>
#ifndef BLOCK
#define BLOCK 128
#endif
/* @cuda-llm
sizes.n = [1, 1000, 4096]
tune.BLOCK = [64, 128, 256]
tune.ITEMS = [1, 2]
grid = "cdiv(n, BLOCK * ITEMS)"
block = "BLOCK"
args.x = "in float32[n]"
args.y = "out float32[n]"
args.n = "n"
*/
__global__ void tuned(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    for (; i < n; i += gridDim.x * blockDim.x) y[i] = 2.0f * x[i];
}
"""

NEW_1D = LaunchConfig(("cdiv(n, 128)",), ("128",), "128 * 4")
NEW_1D_NO_SMEM = LaunchConfig(("cdiv(n, 512)",), ("512",), "0")
NEW_2D = LaunchConfig(("cdiv(cols, 32)", "cdiv(rows, 8)"), ("32", "8"), "0")


@dataclass(frozen=True)
class Shape:
    name: str
    kernel_file: str
    host: str
    config: LaunchConfig
    expect: tuple[str, ...] = ()  # text the rewritten file must contain
    refused: tuple[RefusalReason, ...] = ()  # reasons, in file order
    rewritten: int = 1  # sites rewritten


SHAPES = [
    Shape(
        "inline numbers",
        SCALE,
        """
        void run(const float* x, float* y, int n) {
            scale<<<(n + 255) / 256, 256>>>(x, y, n);
        }
        """,
        NEW_1D,
        ("scale<<<(n + 127) / 128, 128, 128 * 4>>>(x, y, n);",),
    ),
    Shape(
        "inline expressions in the site's own terms",
        SCALE,
        """
        void run(const float* in, float* out, int count) {
            scale<<<(count + 255) / 256, 256>>>(in, out, count - 1);
        }
        """,
        NEW_1D,
        ("scale<<<((count - 1) + 127) / 128, 128, 128 * 4>>>(in, out, count - 1);",),
    ),
    Shape(
        "a compound argument is parenthesised",
        SCALE,
        """
        struct Shape { int rows, cols; };
        void run(const float* x, float* y, Shape s) {
            scale<<<(s.rows * s.cols + 255) / 256, 256>>>(x, y, s.rows * s.cols);
        }
        """,
        NEW_1D_NO_SMEM,
        ("scale<<<((s.rows * s.cols) + 511) / 512, 512>>>(x, y, s.rows * s.cols);",),
    ),
    Shape(
        "dim3 temporaries",
        SCALE,
        """
        void run(const float* x, float* y, int n) {
            scale<<<dim3((n + 255) / 256), dim3(256)>>>(x, y, n);
        }
        """,
        NEW_1D_NO_SMEM,
        ("scale<<<(n + 511) / 512, 512>>>(x, y, n);",),
    ),
    Shape(
        "configuration variables used once: their initialisers change",
        SCALE,
        """
        void run(const float* x, float* y, int n) {
            const int threads = 256;
            int blocks = (n + threads - 1) / threads;
            scale<<<blocks, 256>>>(x, y, n);
        }
        """,
        NEW_1D_NO_SMEM,
        ("int blocks = (n + 511) / 512;", "scale<<<blocks, 512>>>(x, y, n);"),
    ),
    Shape(
        "dim3 variables: one used once (declaration), one shared (call)",
        SCALE,
        """
        void run(const float* x, float* y, int n) {
            dim3 block(256);
            dim3 grid((n + block.x - 1) / block.x);
            scale<<<grid, block>>>(x, y, n);
        }
        """,
        NEW_1D_NO_SMEM,
        ("dim3 block(256);", "dim3 grid((n + 511) / 512);", "scale<<<grid, 512>>>(x, y, n);"),
    ),
    Shape(
        "a variable shared by two launches is left alone",
        SCALE,
        """
        void run(const float* x, float* y, int n) {
            dim3 block(256);
            scale<<<(n + 255) / 256, block>>>(x, y, n);
            scale<<<(n / 2 + 255) / 256, block>>>(y, y, n / 2);
        }
        """,
        NEW_1D_NO_SMEM,
        (
            "dim3 block(256);",
            "scale<<<(n + 511) / 512, 512>>>(x, y, n);",
            "scale<<<((n / 2) + 511) / 512, 512>>>(y, y, n / 2);",
        ),
        rewritten=2,
    ),
    Shape(
        "a value changed between declaration and call: rewritten at the call",
        SCALE,
        """
        void run(const float* x, float* y, int n) {
            dim3 grid((n + 255) / 256);
            n = n / 2;
            scale<<<grid, 256>>>(x, y, n);
        }
        """,
        NEW_1D_NO_SMEM,
        ("dim3 grid((n + 255) / 256);", "scale<<<(n + 511) / 512, 512>>>(x, y, n);"),
    ),
    Shape(
        "a template launch",
        TEMPLATE,
        """
        void run(const float* x, float* y, int n) {
            scale_t<float><<<(n + 255) / 256, 256>>>(x, y, n);
        }
        """,
        NEW_1D,
        ("scale_t<float><<<(n + 127) / 128, 128, 128 * 4>>>(x, y, n);",),
    ),
    Shape(
        "the stream is kept and shared memory added before it",
        SCALE,
        """
        void run(const float* x, float* y, int n, cudaStream_t stream) {
            scale<<<(n + 255) / 256, 256, 0, stream>>>(x, y, n);
        }
        """,
        NEW_1D,
        ("scale<<<(n + 127) / 128, 128, 128 * 4, stream>>>(x, y, n);",),
    ),
    Shape(
        "shared memory removed, and kept as 0 before a stream",
        SCALE,
        """
        void run(const float* x, float* y, int n, cudaStream_t stream) {
            scale<<<(n + 255) / 256, 256, 1024>>>(x, y, n);
            scale<<<(n + 255) / 256, 256, 1024, stream>>>(x, y, n);
        }
        """,
        NEW_1D_NO_SMEM,
        (
            "scale<<<(n + 511) / 512, 512>>>(x, y, n);",
            "scale<<<(n + 511) / 512, 512, 0, stream>>>(x, y, n);",
        ),
        rewritten=2,
    ),
    Shape(
        "a site in a loop (the loop's own values)",
        SCALE,
        """
        void run(const float* x, float* y, int n) {
            dim3 block(256);
            for (int i = 1; i <= 4; ++i) {
                scale<<<(i * n + 255) / 256, block>>>(x, y, i * n);
            }
        }
        """,
        NEW_1D_NO_SMEM,
        ("dim3 block(256);", "scale<<<((i * n) + 511) / 512, 512>>>(x, y, i * n);"),
    ),
    Shape(
        "a 2-D launch with dim3 variables used once",
        TRANSPOSE,
        """
        void run(const float* in, float* out, int rows, int cols) {
            dim3 block(16, 16);
            dim3 grid((cols + 15) / 16, (rows + 15) / 16);
            transpose<<<grid, block>>>(in, out, rows, cols);
        }
        """,
        NEW_2D,
        ("dim3 block(32, 8);", "dim3 grid((cols + 31) / 32, (rows + 7) / 8);"),
    ),
    Shape(
        "a 2-D launch written inline becomes dim3",
        TRANSPOSE,
        """
        void run(const float* in, float* out, int h, int w) {
            transpose<<<dim3((w + 15) / 16, (h + 15) / 16), dim3(16, 16)>>>(in, out, h, w);
        }
        """,
        NEW_2D,
        ("transpose<<<dim3((w + 31) / 32, (h + 7) / 8), dim3(32, 8)>>>(in, out, h, w);",),
    ),
    Shape(
        "a namespace-qualified launch",
        SCALE.replace("/* @cuda-llm", "namespace ops {\n/* @cuda-llm").replace(
            "y[i] = 2.0f * x[i];\n}\n", "y[i] = 2.0f * x[i];\n}\n}  // namespace ops\n"
        ),
        """
        void run(const float* x, float* y, int n) {
            ops::scale<<<(n + 255) / 256, 256>>>(x, y, n);
        }
        """,
        NEW_1D_NO_SMEM,
        ("ops::scale<<<(n + 511) / 512, 512>>>(x, y, n);",),
    ),
    Shape(
        "more than 48 KiB of shared memory: the attribute is set before the launch",
        SCALE,
        """
        void run(const float* x, float* y, int n) {
            cudaFuncSetAttribute(scale, cudaFuncAttributeMaxDynamicSharedMemorySize, 1024);
            scale<<<(n + 255) / 256, 256>>>(x, y, n);
        }
        """,
        LaunchConfig(("cdiv(n, 128)",), ("128",), "64 * 1024"),
        (
            "    cudaFuncSetAttribute(scale, cudaFuncAttributeMaxDynamicSharedMemorySize, "
            "64 * 1024);\n    scale<<<(n + 127) / 128, 128, 64 * 1024>>>(x, y, n);",
        ),
    ),
    Shape(
        "a value macro and a file-scope constant in the configuration",
        SCALE,
        """
        #define THREADS 256
        constexpr int kWaves = 1;
        void run(const float* x, float* y, int n) {
            scale<<<kWaves * (n + THREADS - 1) / THREADS, THREADS>>>(x, y, n);
        }
        """,
        NEW_1D_NO_SMEM,
        ("#define THREADS 256", "scale<<<(n + 511) / 512, 512>>>(x, y, n);"),
    ),
    Shape(
        "a launch in a host function template",
        TEMPLATE,
        """
        template <typename T>
        void run(const T* x, T* y, int n, cudaStream_t s) {
            scale_t<T><<<(n + 255) / 256, 256, 0, s>>>(x, y, n);
        }
        template void run<float>(const float*, float*, int, cudaStream_t);
        """,
        NEW_1D,
        ("scale_t<T><<<(n + 127) / 128, 128, 128 * 4, s>>>(x, y, n);",),
    ),
    Shape(
        "cudaLaunchKernelEx",
        SCALE,
        """
        void run(const float* x, float* y, int n) {
            cudaLaunchConfig_t config = {};
            config.gridDim = dim3((n + 255) / 256);
            config.blockDim = dim3(256);
            cudaLaunchKernelEx(&config, scale, x, y, n);
        }
        """,
        NEW_1D_NO_SMEM,
        refused=("launch_api",),
        rewritten=0,
    ),
    Shape(
        "a launch inside a macro is refused, the others rewritten",
        SCALE,
        """
        #define LAUNCH_SCALE(x, y, n) scale<<<((n) + 255) / 256, 256>>>(x, y, n)
        void run(const float* x, float* y, int n) {
            LAUNCH_SCALE(x, y, n);
            scale<<<(n + 255) / 256, 256>>>(x, y, n);
        }
        """,
        NEW_1D_NO_SMEM,
        ("scale<<<(n + 511) / 512, 512>>>(x, y, n);",),
        refused=("macro",),
    ),
    Shape(
        "a kernel passed to a launching macro",
        SCALE,
        """
        #define LAUNCH(k, g, b, ...) k<<<g, b>>>(__VA_ARGS__)
        void run(const float* x, float* y, int n) {
            LAUNCH(scale, (n + 255) / 256, 256, x, y, n);
        }
        """,
        NEW_1D_NO_SMEM,
        refused=("macro",),
        rewritten=0,
    ),
    Shape(
        "cudaLaunchKernel",
        SCALE,
        """
        void run(const float* x, float* y, int n) {
            void* args[] = {&x, &y, &n};
            cudaLaunchKernel((const void*)scale, dim3((n + 255) / 256), dim3(256), args, 0, 0);
        }
        """,
        NEW_1D_NO_SMEM,
        refused=("launch_api",),
        rewritten=0,
    ),
    Shape(
        "cooperative launch of a template instance",
        TEMPLATE,
        """
        void run(const float* x, float* y, int n) {
            void* args[] = {&x, &y, &n};
            cudaLaunchCooperativeKernel((const void*)scale_t<float>, 4, 256, args, 0, 0);
        }
        """,
        NEW_1D_NO_SMEM,
        refused=("launch_api",),
        rewritten=0,
    ),
    Shape(
        "an argument with side effects",
        SCALE,
        """
        void run(const float* x, float* y, int n) {
            scale<<<(n + 255) / 256, 256>>>(x, y, n++);
        }
        """,
        NEW_1D_NO_SMEM,
        refused=("side_effect",),
        rewritten=0,
    ),
    Shape(
        "a size passed through a function call",
        SCALE,
        """
        static int count(int n) { return n; }
        void run(const float* x, float* y, int n) {
            scale<<<(n + 255) / 256, 256>>>(x, y, count(n));
        }
        """,
        NEW_1D_NO_SMEM,
        refused=("side_effect",),
        rewritten=0,
    ),
    Shape(
        "a tunable with a #define is written as its name",
        TUNED,
        """
        void run(const float* x, float* y, int n) {
            tuned<<<(n + 127) / 128, BLOCK>>>(x, y, n);
        }
        """,
        LaunchConfig(("cdiv(n, BLOCK * 4)",), ("BLOCK",), "0"),
        ("tuned<<<(n + (BLOCK * 4) - 1) / (BLOCK * 4), BLOCK>>>(x, y, n);",),
    ),
    Shape(
        "a tunable without a #define is written as its default",
        TUNED,
        """
        void run(const float* x, float* y, int n) {
            tuned<<<(n + 127) / 128, 128>>>(x, y, n);
        }
        """,
        LaunchConfig(("cdiv(n, BLOCK * ITEMS)",), ("BLOCK",), "BLOCK * 4"),
        ("tuned<<<(n + (BLOCK * 1) - 1) / (BLOCK * 1), BLOCK, BLOCK * 4>>>(x, y, n);",),
    ),
    Shape(
        "a size not bound to a scalar parameter",
        FLAT,
        """
        void run(const float* x, float* y, int rows, int cols) {
            flat<<<(rows * cols + 255) / 256, 256>>>(x, y, rows * cols);
        }
        """,
        LaunchConfig(("cdiv(rows * cols, 512)",), ("512",), "0"),
        refused=("unbound_size",),
        rewritten=0,
    ),
    Shape(
        "no launch site",
        SCALE,
        """
        void run() {}
        """,
        NEW_1D_NO_SMEM,
        refused=("no_site",),
        rewritten=0,
    ),
]


def _spec(text: str) -> TestSpec:
    kernel = next(k for k in find_kernels(text) if k.spec is not None)
    spec, errors = parse_spec(kernel, text)
    assert spec is not None, errors
    return spec


def _rewrite(shape: Shape) -> tuple[str, LaunchRewrite, str]:
    text = shape.kernel_file + textwrap.dedent(shape.host)
    result = rewrite_launches(text, _spec(text), shape.config)
    return text, result, result.apply(text)


@pytest.mark.parametrize("shape", SHAPES, ids=[s.name for s in SHAPES])
def test_launch_sites_are_rewritten_in_their_own_terms(shape: Shape) -> None:
    original, result, rewritten = _rewrite(shape)
    for expected in shape.expect:
        assert expected in rewritten, rewritten
    assert [r.reason for r in result.refusals] == list(shape.refused), result.refusals
    assert len(result.rewrites) == shape.rewritten
    assert result.safe == (not shape.refused and shape.rewritten > 0)
    if not result.rewrites:
        assert rewritten == original
    for refusal in result.refusals:
        assert "by hand" in refusal.message or refusal.reason == "no_site"


@needs_nvcc
@pytest.mark.parametrize("shape", SHAPES, ids=[s.name for s in SHAPES])
def test_each_rewritten_file_builds_with_nvcc(shape: Shape) -> None:
    _, _, rewritten = _rewrite(shape)
    result = compile_file(rewritten, timeout=120)
    assert result.ok, f"{result.message()}\n--- file ---\n{rewritten}"


def test_refusals_say_where_and_what_to_write() -> None:
    shape = next(s for s in SHAPES if s.name == "a size not bound to a scalar parameter")
    _, result, _ = _rewrite(shape)
    (refusal,) = result.refusals
    assert refusal.span is not None and refusal.span.start.line == 16
    assert "rows" in refusal.message and "grid=cdiv(rows * cols, 512) block=512" in refusal.message


def test_sites_found_with_their_configuration_and_arguments() -> None:
    text = SCALE + "void f(float* y, cudaStream_t s) { scale<<<4, 256, 0, s>>>(y, y, 1024); }\n"
    (site,) = find_launch_sites(text, "scale")
    assert (site.callee, site.config, site.args) == (
        "scale",
        ("4", "256", "0", "s"),
        ("y", "y", "1024"),
    )
    assert site.span.slice(text) == "<<<4, 256, 0, s>>>"


def test_non_launching_uses_of_the_kernel_are_not_refused() -> None:
    text = SCALE + textwrap.dedent("""
        void f(float* y, int n) {
            int grid = 0, block = 0;
            cudaOccupancyMaxPotentialBlockSize(&grid, &block, scale, 0, 0);
            scale<<<(n + block - 1) / block, block>>>(y, y, n);
        }
        """)
    result = rewrite_launches(text, _spec(text), NEW_1D_NO_SMEM)
    assert result.safe
    assert "scale<<<(n + 511) / 512, 512>>>(y, y, n);" in result.apply(text)


def test_edits_keep_non_ascii_text_intact() -> None:
    text = SCALE + "void f(float* y, int n) { /* größe */ scale<<<n, 256>>>(y, y, n); }\n"
    result = rewrite_launches(text, _spec(text), NEW_1D_NO_SMEM)
    assert result.apply(text).endswith("/* größe */ scale<<<(n + 511) / 512, 512>>>(y, y, n); }\n")


def test_a_variable_named_like_the_kernel_is_not_a_use_of_it() -> None:
    text = SCALE + textwrap.dedent("""
        float gain(float scale) { return 2.0f * scale; }
        float twice() {
            float scale = gain(1.0f);
            return scale * 2.0f;
        }
        void f(float* y, int n) { scale<<<(n + 255) / 256, 256>>>(y, y, n); }
        """)
    result = rewrite_launches(text, _spec(text), NEW_1D_NO_SMEM)
    assert result.safe and len(result.rewrites) == 1, result.refusals


def test_a_comment_in_a_define_that_mentions_the_kernel_is_not_a_macro_launch() -> None:
    text = SCALE + textwrap.dedent("""
        #define BLOCK 256 // block size used by scale
        #define NAME "scale" /* scale */
        void f(float* y, int n) { scale<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(y, y, n); }
        """)
    result = rewrite_launches(text, _spec(text), NEW_1D_NO_SMEM)
    assert result.safe and not result.refusals, result.refusals
    launches = text + "#define RUN(y, n) scale<<<1, 1>>>(y, y, n)  // a launch\n"
    (refusal,) = rewrite_launches(launches, _spec(launches), NEW_1D_NO_SMEM).refusals
    assert refusal.reason == "macro" and "RUN" in refusal.message


def test_a_define_only_in_a_comment_defines_nothing() -> None:
    # the tunable ITEMS has no #define: its default is written, not its name
    text = TUNED + textwrap.dedent("""
        // #define ITEMS 2
        void run(const float* x, float* y, int n) { tuned<<<(n + 127) / 128, 128>>>(x, y, n); }
        """)
    config = LaunchConfig(("cdiv(n, BLOCK * ITEMS)",), ("BLOCK",), "0")
    result = rewrite_launches(text, _spec(text), config)
    assert result.safe, result.refusals
    assert "tuned<<<(n + (BLOCK * 1) - 1) / (BLOCK * 1), BLOCK>>>(x, y, n);" in result.apply(text)
    # a function named like a macro in a comment: the kernel passed to it is `indirect`
    passed = SCALE + textwrap.dedent("""
        /* #define start(k, n) k<<<1, 1>>>(0, 0, n) */
        void start(void (*k)(const float*, float*, int), int n);
        void run(int n) { start(scale, n); }
        """)
    (refusal,) = rewrite_launches(passed, _spec(passed), NEW_1D_NO_SMEM).refusals
    assert refusal.reason == "indirect", refusal
