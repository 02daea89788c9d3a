"""A winner's helpers whose names the file already uses ([launch], issue 12): an identical
definition is not written twice, a different one is renamed in the helpers and the new kernel
only (the file's own uses untouched, comments and strings never), and one that cannot be renamed
safely refuses the edit naming the name and where the file uses it. Every written file is built
with nvcc (the `nvcc` extra), and so is the verbatim insertion, which must not build or must
change the host's meaning: without the policy these files break."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cuda_llm_lsp.compile.nvcc import compile_file, find_nvcc
from cuda_llm_lsp.fsr.apply import NotApplicable, winner_text
from tests.support.fsr_fakes import make_recording
from tests.unit.test_cli_optimize import cli

needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="no nvcc (the `nvcc` extra)")

FILE = """\
#include <cstdio>
#include <cuda_runtime.h>

#define TILE 16
#define IDX(r, c) ((r) * cols + (c))
#define TILE_BYTES (TILE * TILE * sizeof(float))
constexpr int kThreads = 128;

__device__ float warp_sum(float v) {
    for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

/* @cuda-llm
sizes.rows = [1, 100, 1024]
sizes.cols = [1, 33, 1024]
grid = ["cdiv(cols, 16)", "cdiv(rows, 16)"]
block = [16, 16]
args.in = "float32[rows * cols]"
args.out = "float32[rows * cols]"
args.rows = "rows"
args.cols = "cols"
*/
__global__ void transpose(const float* in, float* out, int rows, int cols) {
    int c = blockIdx.x * TILE + threadIdx.x;
    int r = blockIdx.y * TILE + threadIdx.y;
    if (r < rows && c < cols) out[c * rows + r] = in[IDX(r, c)];
}

__global__ void row_sum(const float* m, float* sums, int N, int cols) {
    int r = blockIdx.x;
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += kThreads) s += m[IDX(r, c)];
    s = warp_sum(s);
    if (threadIdx.x % 32 == 0 && r < N) atomicAdd(&sums[r], s);
}

int main() {
    static_assert(TILE == 16, "the host's tiles are 16 wide");
    int rows = 1024, cols = 1024, WARP = 32;
    float *in = nullptr, *out = nullptr, *sums = nullptr;
    dim3 block(TILE, TILE);
    dim3 grid((cols + TILE - 1) / TILE, (rows + TILE - 1) / TILE);
    transpose<<<grid, block>>>(in, out, rows, cols);
    row_sum<<<rows, kThreads>>>(in, sums, rows, cols);
    printf("TILE=%d warp=%d bytes=%zu\\n", TILE, WARP, TILE_BYTES);
    return cudaDeviceSynchronize() != cudaSuccess;
}
"""
BEFORE = FILE[: FILE.index("/* @cuda-llm")]  # the file above the spec: kept byte for byte
AFTER = FILE[FILE.index("__global__ void row_sum") - 1 :]  # after the kernel: kept too

# The model's tiled transpose (its usual shape: helpers, then the kernel, then a host harness).
TILED = """\
__global__ void transpose(const float* in, float* out, int rows, int cols) {
    // variant: tiled; one TILE x TILE tile per block
    __shared__ float tile[TILE][TILE + 1];
    int c = blockIdx.x * TILE + threadIdx.x;
    int r = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += BLOCK_ROWS)
        if (r + j < rows && c < cols) tile[threadIdx.y + j][threadIdx.x] = in[(r + j) * cols + c];
    __syncthreads();
    c = blockIdx.y * TILE + threadIdx.x;
    r = blockIdx.x * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += BLOCK_ROWS)
        if (r + j < cols && c < rows) out[(r + j) * rows + c] = tile[threadIdx.x][threadIdx.y + j];
}

int main() { return 0; }  // the model's own harness: never written
"""


def kernel_of(body: str) -> str:
    return (
        "__global__ void transpose(const float* in, float* out, int rows, int cols) {\n"
        "    int c = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    int r = blockIdx.y * blockDim.y + threadIdx.y;\n"
        f"{body}"
        "}\n"
    )


# name -> (reply, what the written helpers must be, names renamed, a text the kernel must have)
RENAMES = {
    "a file #define of another value": (
        "#define TILE 32\n#define BLOCK_ROWS 8\n\n" + TILED,
        "#define TILE_transpose 32\n#define BLOCK_ROWS 8",
        {"TILE": "TILE_transpose"},
        "__shared__ float tile[TILE_transpose][TILE_transpose + 1];",
    ),
    "a host variable": (
        "#define WARP 32  // lanes per warp\n\n"
        + kernel_of(
            "    float v = (r < rows && c < cols) ? in[r * cols + c] : 0.0f;\n"
            "    if (threadIdx.x % WARP == 0 && r < rows && c < cols) out[c * rows + r] = v;\n"
        ),
        "#define WARP_transpose 32  // lanes per warp",
        {"WARP": "WARP_transpose"},
        "threadIdx.x % WARP_transpose == 0",
    ),
    "a parameter of another kernel": (
        "#define N 4  // elements per thread\n"
        + kernel_of(
            "    for (int k = 0; k < N; ++k)\n"
            "        if (r < rows && c * N + k < cols) out[(c * N + k) * rows + r] = in[r * cols + c * N + k];\n"  # noqa: E501
        ),
        "#define N_transpose 4  // elements per thread",
        {"N": "N_transpose"},
        "for (int k = 0; k < N_transpose; ++k)",
    ),
    "a function-like macro": (
        "#define IDX(r, c, ld) ((r) * (ld) + (c))\n\n"
        + kernel_of(
            "    if (r < rows && c < cols) out[IDX(c, r, rows)] = __ldg(&in[IDX(r, c, cols)]);\n"
        ),
        "#define IDX_transpose(r, c, ld) ((r) * (ld) + (c))",
        {"IDX": "IDX_transpose"},
        "out[IDX_transpose(c, r, rows)] = __ldg(&in[IDX_transpose(r, c, cols)]);",
    ),
    "a __device__ helper with another body": (
        "__device__ __forceinline__ float warp_sum(float v) {\n"
        "    // butterfly: every lane gets the sum\n"
        "    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);\n"
        "    return v;\n}\n\n"
        + kernel_of(
            "    float v = (r < rows && c < cols) ? in[r * cols + c] : 0.0f;\n"
            "    v = warp_sum(v) - warp_sum(0.0f);\n"
            "    if (r < rows && c < cols) out[c * rows + r] = v;\n"
        ),
        "__device__ __forceinline__ float warp_sum_transpose(float v) {\n"
        "    // butterfly: every lane gets the sum\n"
        "    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);\n"
        "    return v;\n}",
        {"warp_sum": "warp_sum_transpose"},
        "v = warp_sum_transpose(v) - warp_sum_transpose(0.0f);",
    ),
    "a constexpr of another value": (
        "constexpr int kThreads = 256;\n\n"
        + kernel_of(
            "    if (threadIdx.x >= kThreads) return;\n"
            "    if (r < rows && c < cols) out[c * rows + r] = in[r * cols + c];\n"
        ),
        "constexpr int kThreads_transpose = 256;",
        {"kThreads": "kThreads_transpose"},
        "if (threadIdx.x >= kThreads_transpose) return;",
    ),
}


def naive(reply: str) -> str:
    """What was written before the policy: the reply's helpers verbatim above the spec."""
    helpers = reply[: reply.index("__global__ void transpose")].strip("\n")
    kernel = reply[reply.index("__global__ void transpose") :].split("\nint main()")[0]
    spec, start = FILE.index("/* @cuda-llm"), FILE.index("__global__ void transpose")
    return FILE[:spec] + helpers + "\n\n" + FILE[spec:start] + kernel.strip("\n") + AFTER


@pytest.mark.parametrize("shape", list(RENAMES))
def test_a_clashing_name_is_renamed_in_the_helpers_and_the_kernel_only(shape: str) -> None:
    reply, helpers, renames, kernel_line = RENAMES[shape]
    applied = winner_text(FILE, "transpose", reply)
    new = applied.text
    assert dict(applied.renamed) == renames
    assert new.startswith(BEFORE + helpers + "\n\n/* @cuda-llm"), new
    assert new.endswith(AFTER)  # the file's own uses (other kernel, main) untouched
    assert kernel_line in new
    written = re.sub(r"//[^\n]*", "", new[len(BEFORE) : len(new) - len(AFTER)])  # no comments
    for old, fresh in renames.items():
        # every use in the written text renamed, the file's left as they were
        assert fresh not in BEFORE + AFTER and old in BEFORE + AFTER
        assert not [w for w in written.replace(fresh, "").split() if w.strip("[]();,*+") == old]
    assert new.count("int main()") == 1


def test_comments_and_strings_are_never_renamed() -> None:
    reply = "#define TILE 32\n#define BLOCK_ROWS 8\n\n" + TILED.replace(
        "__syncthreads();", '__syncthreads();\n    if (!r && !c) printf("TILE done\\n");'
    )
    new = winner_text(FILE, "transpose", reply).text
    assert "// variant: tiled; one TILE x TILE tile per block" in new
    assert 'printf("TILE done\\n");' in new
    assert "tile[TILE_transpose][TILE_transpose + 1]" in new


def test_an_identical_define_and_helper_are_not_written_twice() -> None:
    reply = (
        "#define TILE  16  // the file's tile\n"
        "__device__ float warp_sum(float v)\n{\n"
        "    for (int o = 16; o > 0; o /= 2)  v += __shfl_down_sync(0xffffffffu, v, o);\n"
        "    return v;\n}\n\n"
        "#define BLOCK_ROWS 4\n" + TILED.replace("} \n", "}\n")
    )
    applied = winner_text(FILE, "transpose", reply)
    new = applied.text
    assert applied.renamed == ()
    assert new.count("#define TILE ") == 1 and new.count("float warp_sum(") == 1
    assert new.startswith(BEFORE + "#define BLOCK_ROWS 4\n\n/* @cuda-llm")
    assert "__shared__ float tile[TILE][TILE + 1];" in new and new.endswith(AFTER)


OVERLOAD = "__device__ double warp_sum(double v) { return v; }\n"
TUNABLE = FILE.replace("#define TILE 16\n", "#ifndef TILE\n#define TILE 16  // tunable\n#endif\n")
TUNABLE = TUNABLE.replace("constexpr int kThreads", OVERLOAD + "constexpr int kThreads")


def test_a_repeated_ifndef_default_and_identical_overloads_are_not_written_twice() -> None:
    reply = (
        "#ifndef TILE\n#define TILE 16\n#endif\n" + OVERLOAD + FILE.split("\n\n")[2] + "\n"
        "#define BLOCK_ROWS 8\n" + TILED
    )  # the model repeats the file's tunable default and both overloads of its helper
    assert "float warp_sum(float v)" in reply
    new = winner_text(TUNABLE, "transpose", reply).text
    assert new.count("#ifndef TILE") == 1 and new.count("warp_sum(double v)") == 1
    assert new.count("float warp_sum(float v)") == 1
    assert "#define BLOCK_ROWS 8\n\n/* @cuda-llm" in new
    if find_nvcc() is not None:
        assert compile_file(new).ok


def test_a_prototype_of_the_files_helper_is_not_a_new_definition() -> None:
    reply = "__device__ float warp_sum(float v);\n#define BLOCK_ROWS 8\n" + TILED.replace(
        "__syncthreads();", "__syncthreads();\n    if (warp_sum(0.0f) != 0.0f) return;"
    )
    applied = winner_text(FILE, "transpose", reply)
    assert applied.renamed == () and "if (warp_sum(0.0f) != 0.0f) return;" in applied.text
    assert "__device__ float warp_sum(float v);\n#define BLOCK_ROWS 8\n" in applied.text


def test_a_redefinition_after_an_undef_is_renamed_not_dropped() -> None:
    text = FILE.replace(
        "constexpr int kThreads", "#undef TILE\n#define TILE 16\nconstexpr int kThreads"
    )
    applied = winner_text(text, "transpose", "#define TILE 16\n#define BLOCK_ROWS 8\n" + TILED)
    assert dict(applied.renamed) == {"TILE": "TILE_transpose"}


# name -> (reply, the file (None: FILE), what the refusal must say)
REFUSALS = {
    "stringized in the reply": (
        "#define STR(x) #x\n#define TILE 32\n#define BLOCK_ROWS 8\n" + TILED.replace(
            "__syncthreads();", '__syncthreads();\n    if (!r && !c) printf("tile " STR(TILE) "\\n");'  # noqa: E501
        ),
        None,
        r"#define `TILE` clashes with `TILE` in the file \(line 4 in #define TILE, line 6 in "
        r"#define TILE_BYTES, line 39 in main\(\) and 3 more\) and cannot be renamed safely: it "
        r"is passed to `STR`, which pastes or stringizes",
    ),
    "pasted by a reply macro": (
        "#define TILE 32\n#define BLOCK_ROWS 8\n#define SMEM(name) name##TILE\n" + TILED,
        None,
        "`TILE` .*the reply's macro `SMEM` pastes or stringizes it",
    ),
    "an #ifndef default": (
        "#ifndef TILE\n#define TILE 32\n#endif\n#define BLOCK_ROWS 8\n" + TILED,
        None,
        r"asks whether `TILE` is defined .* `#define TILE` \(line 4\) decides",
    ),
    "a file macro naming it": (
        "#define TILE 32\n#define BLOCK_ROWS 8\n" + TILED.replace(
            "__syncthreads();",
            "__syncthreads();\n    static_assert(sizeof(tile) >= TILE_BYTES, \"padded\");",
        ),
        None,
        r"the file's macro `TILE_BYTES` \(line 6\) names `TILE`, and the new kernel uses `TILE_BYTES`",  # noqa: E501
    ),
    "a function-like macro not called": (
        "#define MAX(a, b) ((a) > (b) ? (a) : (b))\n#define REDUCE(op, a, b) op(a, b)\n"
        + kernel_of("    if (r < rows && c < cols) out[c * rows + r] = REDUCE(MAX, in[r * cols + c], 0.0f);\n"),  # noqa: E501
        FILE.replace("#define TILE 16\n", "#define TILE 16\n#define MAX(a, b) ((a) < (b) ? (b) : (a))\n"),  # noqa: E501
        r"`MAX` clashes .*line 5.* is used other than by calling it",
    ),
}  # fmt: skip


@pytest.mark.parametrize("shape", list(REFUSALS))
def test_a_clash_that_cannot_be_renamed_safely_refuses_naming_it(shape: str) -> None:
    reply, text, says = REFUSALS[shape]
    with pytest.raises(NotApplicable, match=says):
        winner_text(text or FILE, "transpose", reply)


@needs_nvcc
@pytest.mark.parametrize("shape", list(RENAMES))
def test_the_renamed_file_builds_and_the_verbatim_one_does_not(shape: str) -> None:
    reply = RENAMES[shape][0]
    assert compile_file(FILE).ok  # the original builds
    built = compile_file(winner_text(FILE, "transpose", reply).text)
    assert built.ok, built.message()
    assert not compile_file(naive(reply)).ok  # static_assert, `int 32`, a redefinition...


@needs_nvcc
def test_a_deduplicated_file_builds() -> None:
    reply = "#define TILE 16\n#define BLOCK_ROWS 4\n" + TILED
    built = compile_file(winner_text(FILE, "transpose", reply).text)
    assert built.ok, built.message()


def test_optimize_write_refuses_a_clash_with_its_message(tmp_path: Path) -> None:
    """`cuda-llm optimize --write` end to end (replayed model, recorded outcomes): the refusal
    reaches stderr, the exit code says so and the file is not written."""
    reply = REFUSALS["an #ifndef default"][0].replace("// variant: tiled", "// variant: fast")
    reply = reply.split("\nint main()")[0] + "\n"  # a host harness: the judge refuses it first
    (tmp_path / "transpose.cu").write_text(FILE)
    make_recording(tmp_path / "rec", "transpose", {(1, 1): reply})
    outcomes = {
        "baseline": {"ms": 1.0, "spread_pct": 0.4},
        "candidates": [{"contains": "variant: fast", "status": "ok", "ms": 0.4}],
    }
    (tmp_path / "outcomes.json").write_text(json.dumps(outcomes))
    done = cli(
        tmp_path,
        str(tmp_path / "transpose.cu"),
        "--kernel",
        "transpose",
        "--replay",
        str(tmp_path / "rec"),
        "--rounds",
        "1",
        "--candidates",
        "1",
        "--write",
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "cannot be applied" in done.stderr and "`TILE`" in done.stderr, done.stderr
    assert "line 4" in done.stderr
    assert (tmp_path / "transpose.cu").read_text() == FILE
