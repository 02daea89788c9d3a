"""A spec from a captured launch (issue 39, layer 1): sizes, extents, roles and grid inferred
from a synthetic capture directory; the block parses; the timed case reads the captured bytes."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from cuda_llm_lsp.evaluate.captured import captured_inputs, captured_outputs
from cuda_llm_lsp.evaluate.inputs import InputError, case_sources
from cuda_llm_lsp.source.capture_manifest import (
    Capture,
    CapturedParam,
    CapturedPointer,
    CaptureError,
    encode_capture,
    function_name,
    read_capture,
)
from cuda_llm_lsp.source.kernels import find_kernels
from cuda_llm_lsp.source.spec import parse_spec
from cuda_llm_lsp.source.spec.from_capture import (
    find_captured_kernel,
    match_extent,
    match_grid,
    smaller,
    spec_from_capture,
)

LAYERNORM = """\
#include <cuda_bf16.h>
typedef __nv_bfloat16 floatX;

__global__ void layernorm_forward(floatX* __restrict__ out, float* __restrict__ mean,
                                  float* __restrict__ rstd, const floatX* __restrict__ inp,
                                  const floatX* __restrict__ weight, float eps, int N, int C) {
    int row = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    if (row >= N) return;
    float m = 0.0f;
    for (int i = 0; i < C; i++) m += (float)inp[row * C + i];
    m /= C;
    mean[row] = m;
    rstd[row] = 1.0f;
    for (int i = 0; i < C; i++)
        out[row * C + i] = (floatX)((float)inp[row * C + i] * (float)weight[i] + eps);
}
"""


def _write_capture(
    directory: Path,
    ints: dict[str, int],
    buffers: list[tuple[str, bytes, bytes | None]],
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    scalars_before: list[bytes] = (),  # type: ignore[assignment]
    order: list[str] | None = None,
    demangled: str = "layernorm_forward(__nv_bfloat16*, float*, float*, __nv_bfloat16 const*, "
    "__nv_bfloat16 const*, float, int, int)",
) -> Capture:
    """A capture directory as the library writes it: buffers (name, before, after or None for
    unchanged), then `scalars_before` raw values, then the integers, in `order`."""
    directory.mkdir(parents=True, exist_ok=True)
    params: list[CapturedParam] = []
    offset = 0
    for i, (_name, before, after) in enumerate(buffers):
        (directory / f"p{i}.before.bin").write_bytes(before)
        (directory / f"p{i}.after.bin").write_bytes(after if after is not None else before)
        base = 0x7F0000000000 + i * 0x10000000
        pointer = CapturedPointer(
            base, 0, len(before), len(before), f"p{i}.before.bin", f"p{i}.after.bin",
            after is not None and after != before,
        )  # fmt: skip
        params.append(CapturedParam(i, offset, 8, struct.pack("<Q", base), pointer))
        offset += 8
    for raw in scalars_before:
        params.append(CapturedParam(len(params), offset, len(raw), raw))
        offset += len(raw)
    for name in order or list(ints):
        params.append(CapturedParam(len(params), offset, 4, struct.pack("<i", ints[name])))
        offset += 4
    capture = Capture(
        1, "_Z17layernorm_forward", demangled, 3, grid, block, 0, "NVIDIA H200", "sm_90", 0.25,
        tuple(params),
    )  # fmt: skip
    (directory / "manifest.json").write_text(json.dumps(encode_capture(capture)))
    return capture


def _layernorm_capture(directory: Path, n: int = 512, c: int = 96) -> Capture:
    rng = np.random.default_rng(0)
    inp = rng.standard_normal(n * c).astype(np.float32)
    weight = rng.standard_normal(c).astype(np.float32)
    bf = lambda a: (a.view(np.uint32) >> 16).astype(np.uint16).tobytes()  # noqa: E731
    out_before = np.zeros(n * c, np.uint16).tobytes()
    out_after = bf(inp * np.tile(weight, n))
    mean_after = inp.reshape(n, c).mean(axis=1).astype(np.float32).tobytes()
    zeros = np.zeros(n, np.float32).tobytes()
    return _write_capture(
        directory,
        {"N": n, "C": c},
        [
            ("out", out_before, out_after),
            ("mean", zeros, mean_after),
            ("rstd", zeros, np.ones(n, np.float32).tobytes()),
            ("inp", bf(inp), None),
            ("weight", bf(weight), None),
        ],
        grid=(n * 32 // 256, 1, 1),
        block=(256, 1, 1),
        scalars_before=[struct.pack("<f", 1e-5)],
    )


def test_function_name_of_demangled_signatures() -> None:
    assert function_name("layernorm_forward(float*, int)") == "layernorm_forward"
    assert function_name("void ns::k<float, 4>(float*, int)") == "k"
    assert function_name("softmax") == "softmax"
    assert function_name("a::b::c<std::pair<int, int> >(int)") == "c"


def test_extent_and_grid_matching() -> None:
    ints = {"B": 8, "T": 64, "C": 96, "N": 512}
    assert match_extent(512 * 96, ints).count == "C * N"
    assert match_extent(512, ints).count == "N"
    loose = match_extent(512 * 96 + 100, ints)  # a caching allocator's larger segment
    assert loose.count == "C * N" and loose.review
    literal = match_extent(7, ints)
    assert literal.count == "7" and literal.review
    assert match_grid(64, ints, (256, 1, 1)).count == "T"  # first: equal to a size
    rows = {"N": 512, "C": 96}
    assert match_grid(64, rows, (256, 1, 1)).count == "cdiv(N * 32, 256)"  # a warp per row
    assert match_grid(2, rows, (256, 1, 1)).count == "cdiv(N, 256)"
    assert match_grid(1, rows, (256, 1, 1)).count == "1"
    assert match_grid(3, {"N": 1000}, (7, 1, 1)).review
    assert smaller(768, 16) == 32 and smaller(1000, 4) == 248 and smaller(3, 16) == 1


def test_spec_from_capture_parses_with_the_captured_case_last(tmp_path: Path) -> None:
    capture_dir = tmp_path / "captures" / "ln"
    capture = _layernorm_capture(capture_dir)
    (tmp_path / "ln.cu").write_text(LAYERNORM)
    kernel = find_captured_kernel(find_kernels(LAYERNORM), capture)
    block = spec_from_capture(kernel, LAYERNORM, capture, "captures/ln")
    text = LAYERNORM.replace(
        "__global__ void layernorm_forward", block + "__global__ void layernorm_forward"
    )
    parsed = find_captured_kernel(find_kernels(text), capture)
    spec, errors = parse_spec(parsed, text)
    assert [e for e in errors if e.severity == "error"] == [], (block, errors)
    assert spec is not None
    assert spec.capture == "captures/ln"
    assert 'args.out    = "inout bfloat16[N * C]"' in block, block  # typedef resolved
    assert 'args.mean   = "inout float32[N]"' in block
    assert 'args.inp    = "in bfloat16[N * C]"' in block
    assert 'args.weight = "in bfloat16[C]"' in block
    assert 'grid = "cdiv(N * 32, 256)"' in block
    assert "args.eps    = 1e-05" in block or "args.eps    = 9.99" in block
    timed = spec.cases()[-1]
    assert timed.sizes == {"N": 512, "C": 96}
    assert timed.grid == (64, 1, 1)
    assert spec.cases()[0].sizes["N"] < 512  # smaller cases come first

    inputs = captured_inputs(spec, timed, tmp_path)
    assert set(inputs) == {"out", "mean", "rstd", "inp", "weight"}
    assert inputs["inp"].dtype == np.uint16 and inputs["inp"].size == 512 * 96
    assert inputs["inp"].tobytes() == (capture_dir / "p3.before.bin").read_bytes()
    sources = case_sources(spec, timed, seed=1, spec_dir=tmp_path)
    assert isinstance(sources["mean"], np.ndarray)  # captured, not generated
    small = case_sources(spec, spec.cases()[0], seed=1, spec_dir=tmp_path)
    assert not isinstance(small["mean"], np.ndarray)  # generated on the device
    outputs = captured_outputs(spec, timed, tmp_path, ("mean",))
    assert outputs["mean"].tobytes() == (capture_dir / "p1.after.bin").read_bytes()


def test_captured_data_errors_are_clear(tmp_path: Path) -> None:
    capture_dir = tmp_path / "cap"
    capture = _layernorm_capture(capture_dir, n=64, c=32)
    kernel = find_captured_kernel(find_kernels(LAYERNORM), capture)
    block = spec_from_capture(kernel, LAYERNORM, capture, "cap", cases=1)
    text = LAYERNORM.replace(
        "__global__ void layernorm_forward", block + "__global__ void layernorm_forward"
    )
    # a spec whose timed case needs more than was captured
    bigger = text.replace("sizes.N = [64]", "sizes.N = [128]")
    spec, errors = parse_spec(find_kernels(bigger)[0], bigger)
    assert spec is not None, errors
    with pytest.raises(InputError, match="bytes were captured"):
        case_sources(spec, spec.cases()[-1], seed=1, spec_dir=tmp_path)
    spec, errors = parse_spec(find_kernels(text)[0], text)
    assert spec is not None, errors
    (capture_dir / "p3.before.bin").unlink()
    with pytest.raises(InputError, match=r"p3\.before\.bin"):
        case_sources(spec, spec.cases()[-1], seed=1, spec_dir=tmp_path)


def test_capture_key_must_stay_inside_the_tree() -> None:
    text = LAYERNORM.replace(
        "__global__ void layernorm_forward",
        '/* @cuda-llm\ncapture = "../elsewhere"\nsizes.N = [4]\nsizes.C = [4]\ngrid = 1\n'
        'block = 32\nargs.out = "bfloat16[N*C]"\nargs.mean = "float32[N]"\n'
        'args.rstd = "float32[N]"\nargs.inp = "bfloat16[N*C]"\nargs.weight = "bfloat16[C]"\n'
        'args.eps = 0.1\nargs.N = "N"\nargs.C = "C"\n*/\n__global__ void layernorm_forward',
    )
    spec, errors = parse_spec(find_kernels(text)[0], text)
    assert spec is None
    assert any("capture" in e.message and ".." in e.message for e in errors), errors


def test_manifest_is_checked(tmp_path: Path) -> None:
    with pytest.raises(CaptureError, match="not a capture directory"):
        read_capture(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps({"version": 99}))
    with pytest.raises(CaptureError, match="version 99"):
        read_capture(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps({"error": "over --max-bytes"}))
    with pytest.raises(CaptureError, match="over --max-bytes"):
        read_capture(tmp_path)
    capture = _layernorm_capture(tmp_path / "c", n=32, c=32)
    doc = encode_capture(capture)
    doc["params"][0]["pointer"]["before"] = "../../etc/passwd"
    (tmp_path / "c" / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(CaptureError, match="bad file name"):
        read_capture(tmp_path / "c")


def test_a_capture_of_another_kernel_is_refused(tmp_path: Path) -> None:
    capture = _layernorm_capture(tmp_path / "c", n=32, c=32)
    other = "__global__ void scale(float* x, int n) { x[threadIdx.x] *= 2; }\n"
    with pytest.raises(CaptureError, match=r"no kernel 'layernorm_forward'.*scale"):
        find_captured_kernel(find_kernels(other), capture)


TEMPLATED = """\
template <typename T, int BLOCK>
__global__ void scale(T* y, const T* x, float a, int n) {
    int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) y[i] = (T)(a * (float)x[i]);
}
template __global__ void scale<float, 128>(float*, const float*, float, int);
"""


def test_a_template_kernel_gets_its_captured_instance(tmp_path: Path) -> None:
    n = 1000
    x = np.arange(n, dtype=np.float32)
    capture = _write_capture(
        tmp_path / "cap",
        {},
        [("y", np.zeros(n, np.float32).tobytes(), (2 * x).tobytes()), ("x", x.tobytes(), None)],
        grid=(8, 1, 1),
        block=(128, 1, 1),
        scalars_before=[struct.pack("<f", 2.0), struct.pack("<i", n)],
        demangled="void scale<float, 128>(float*, float const*, float, int)",
    )
    block = spec_from_capture(find_kernels(TEMPLATED)[0], TEMPLATED, capture, "cap")
    assert 'instance = "scale<float, 128>"' in block, block
    text = block + TEMPLATED
    spec, errors = parse_spec(find_kernels(text)[0], text)
    assert spec is not None, (block, errors)
    assert spec.cases()[-1].sizes == {"n": 1000} and spec.cases()[-1].grid == (8, 1, 1)
    assert spec.arg("y").role == "inout" and spec.arg("a").value == "2.0"


GEMM = """\
__global__ void gemm_ref(int M, int N, int K, float alpha, const float* A, int lda,
                         const float* B, int ldb, float beta, float* C, int ldc) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < M && j < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) acc += A[i + k * lda] * B[k + j * ldb];
        C[i + j * ldc] = alpha * acc + beta * C[i + j * ldc];
    }
}
"""


def _gemm_capture(m: int, n: int, k: int) -> Capture:
    """A column-major reference GEMM's launch as a program makes it (lda = M, ldb = K, ldc = M),
    parameters interleaved: ints, floats and pointers in signature order."""
    params: list[CapturedParam] = []
    offset = 0
    layout: list[tuple[str, object]] = [
        ("i", m), ("i", n), ("i", k), ("f", 1.0), ("p", (m * k, False)), ("i", m),
        ("p", (k * n, False)), ("i", k), ("f", 0.5), ("p", (m * n, True)), ("i", m),
    ]  # fmt: skip
    for index, (kind, value) in enumerate(layout):
        if kind == "p":
            count, changed = value  # type: ignore[misc]
            base = 0x7F0000000000 + index * 0x10000000
            pointer = CapturedPointer(
                base, 0, 4 * count, 4 * count, f"p{index}.before.bin", f"p{index}.after.bin",
                changed,
            )  # fmt: skip
            params.append(CapturedParam(index, offset, 8, struct.pack("<Q", base), pointer))
            offset += 8
        else:
            raw = struct.pack("<i" if kind == "i" else "<f", value)
            params.append(CapturedParam(index, offset, 4, raw))
            offset += 4
    return Capture(
        1, "_Z8gemm_refiiifPKfiS0_ifPfi", "gemm_ref(int, int, int, float, float const*, int, "
        "float const*, int, float, float*, int)", 1, (-(-m // 16), -(-n // 16), 1), (16, 16, 1),
        0, "NVIDIA H200", "sm_90", 0.1, tuple(params),
    )  # fmt: skip


@pytest.mark.parametrize(("m", "n", "k"), [(128, 128, 128), (256, 128, 64)])
def test_leading_dimensions_follow_the_sizes_in_the_smaller_cases(m: int, n: int, k: int) -> None:
    """A leading dimension or loop bound equal to a size is that size's expression: a literal
    kept the captured 128 while the smaller cases shrank M, so `A[i + k * lda]` read past
    `A[M * N]` there (CUTLASS's basic_gemm, M = N = K = 128)."""
    kernel = find_kernels(GEMM)[0]
    block = spec_from_capture(kernel, GEMM, _gemm_capture(m, n, k), "captures/gemm")
    text = block + GEMM
    spec, errors = parse_spec(find_kernels(text)[0], text)
    assert [e for e in errors if e.severity == "error"] == [], (block, errors)
    assert spec is not None
    cases = spec.cases()
    assert cases[-1].scalars["lda"] == m and cases[-1].scalars["K"] == k
    shapes = [tuple(sorted(c.sizes.items())) for c in cases]
    assert len(shapes) == len(set(shapes)), block  # no case twice (32 and 32 at M = 128)
    assert cases[0].sizes["M"] < m  # the smaller cases are smaller
    for case in cases:  # every index the kernel computes lies inside its buffer
        s, counts = case.scalars, case.counts
        big_m, big_n, big_k = s["M"], s["N"], s["K"]
        assert (big_m - 1) + (big_k - 1) * s["lda"] < counts["A"], (block, case)
        assert (big_k - 1) + (big_n - 1) * s["ldb"] < counts["B"], (block, case)
        assert (big_m - 1) + (big_n - 1) * s["ldc"] < counts["C"], (block, case)
