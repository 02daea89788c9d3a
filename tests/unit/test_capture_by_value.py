"""Structs passed by value, from a capture (issue 39): a Thrust iterator, a CuTe tensor view, a
CUTLASS Params block or a `cutlass::half_t` is passed as the bytes the program passed
(`args.v = "@captured"`), and every device address inside them becomes a buffer of its own,
relocated into those bytes at run time. On the driver double: the spec is written, parses, the
original reproduces the captured outputs, a candidate is judged, and a wrong one is caught."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from cuda_llm_lsp.evaluate.captured import with_captured_arguments
from cuda_llm_lsp.evaluate.launch import case_launch
from cuda_llm_lsp.evaluate.protocol import BufferArg, BytesArg
from cuda_llm_lsp.evaluate.worker import relocated
from cuda_llm_lsp.source.capture_manifest import (
    Capture,
    CapturedParam,
    CapturedPointer,
    CaptureError,
    EmbeddedPointer,
    decode_capture,
    encode_capture,
)
from cuda_llm_lsp.source.kernels import find_kernels
from cuda_llm_lsp.source.spec import parse_spec
from cuda_llm_lsp.source.spec.from_capture import element_type, parameter_types
from cuda_llm_lsp.source.spec.hidden import hidden_cases
from tests.unit.test_capture_bench import cli

VIEW = """\
struct View { const float* x; int n; };

extern "C" __global__ void accumulate_view(View v, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < v.n) y[i] += 2.0f * v.x[i];
}
"""
DEMANGLED = "accumulate_view(View, float*)"
X_BASE, Y_BASE = 0x7F0000000000, 0x7F0010000000


def _view_capture(directory: Path, n: int, wrong: bool = False) -> Capture:
    """What the capture library writes for `accumulate_view<<<cdiv(n, 256), 256>>>(v, y)`: the
    16-byte View with `x`'s address at byte 0 (an embedded pointer) and `y` a pointer."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    after = y + 2 * x
    if wrong:
        after[n // 3] += 1.0
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "p0_0.before.bin").write_bytes(x.tobytes())
    (directory / "p0_0.after.bin").write_bytes(x.tobytes())
    (directory / "p1.before.bin").write_bytes(y.tobytes())
    (directory / "p1.after.bin").write_bytes(after.tobytes())
    xs = CapturedPointer(X_BASE, 0, 4 * n, 4 * n, "p0_0.before.bin", "p0_0.after.bin", False)
    ys = CapturedPointer(Y_BASE, 0, 4 * n, 4 * n, "p1.before.bin", "p1.after.bin", True)
    view = struct.pack("<Qi4x", X_BASE, n)
    capture = Capture(
        1, "_Z15accumulate_view4ViewPf", DEMANGLED, 1, ((n + 255) // 256, 1, 1), (256, 1, 1), 0,
        "NVIDIA H200", "sm_90", 0.02,
        (
            CapturedParam(0, 0, 16, view, embedded=(EmbeddedPointer(0, xs),)),
            CapturedParam(1, 16, 8, struct.pack("<Q", Y_BASE), ys),
        ),
    )  # fmt: skip
    (directory / "manifest.json").write_text(json.dumps(encode_capture(capture)))
    return capture


def _spec_written(tmp_path: Path, n: int = 3000, wrong: bool = False) -> str:
    source = tmp_path / "view.cu"
    source.write_text(VIEW)
    _view_capture(tmp_path / "cap", n, wrong=wrong)
    written = cli(
        "spec", str(source), "--from-capture", str(tmp_path / "cap"), "--write", home=tmp_path
    )
    assert written.returncode == 0, written.stdout + written.stderr
    return source.read_text()


def test_the_manifest_keeps_the_addresses_inside_a_struct(tmp_path: Path) -> None:
    capture = _view_capture(tmp_path, 64)
    again = decode_capture(json.loads((tmp_path / "manifest.json").read_text()), tmp_path)
    assert again == capture
    assert [r.at for r in again.params[0].regions] == [0]
    assert again.params[1].regions[0].pointer.changed
    doc = json.loads((tmp_path / "manifest.json").read_text())
    doc["params"][0]["embedded"][0]["at"] = 12  # not a word of the struct
    with pytest.raises(CaptureError, match="not inside the parameter"):
        decode_capture(doc, tmp_path)
    doc["params"][0]["embedded"][0]["at"] = 0
    doc["params"][0]["embedded"][0]["pointer"]["before"] = "../outside.bin"
    with pytest.raises(CaptureError, match="bad file name"):
        decode_capture(doc, tmp_path)


def test_a_struct_argument_is_specced_as_captured_bytes(tmp_path: Path) -> None:
    text = _spec_written(tmp_path)
    assert 'args.v = "@captured float32"' in text, text
    assert 'args.y = "inout float32[3000]"' in text, text
    assert "# The captured case alone" in text
    spec, errors = parse_spec(find_kernels(text)[0], text)
    assert spec is not None, errors
    assert spec.case_count == 1 and hidden_cases(spec, seed=1) == []


def test_the_struct_bytes_are_relocated_to_the_run_s_buffers(tmp_path: Path) -> None:
    text = _spec_written(tmp_path, n=1000)
    spec, _ = parse_spec(find_kernels(text)[0], text)
    assert spec is not None
    expanded = with_captured_arguments(spec, tmp_path)
    assert with_captured_arguments(expanded, tmp_path) is expanded  # once
    inner = expanded.arg("v@0")
    assert inner is not None and inner.role == "in" and inner.dtype == "float32"
    assert inner.count == "1000" and inner.within == 0
    launch = case_launch(expanded, expanded.cases()[-1], {}, None)
    assert [type(p) for p in launch.params] == [BytesArg, BufferArg]  # v@0 is no parameter
    packed = launch.params[0]
    assert isinstance(packed, BytesArg) and packed.relocations == ((0, "v@0", 0),)
    words = relocated(packed, {"v@0": 0x1234_5678_9ABC, "y": 0x42})
    assert words.dtype == np.uint64 and words.nbytes == 16
    assert struct.unpack("<Qi", words.tobytes()[:12]) == (0x1234_5678_9ABC, 1000)
    with pytest.raises(Exception, match="capture was not read"):
        case_launch(spec, spec.cases()[-1], {}, None)  # never the program's stale address


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ('args.v = "@captured"\nargs.y = "inout float32[n]"\nsizes.n = [4]', "needs the spec's"),
        (
            'capture = "cap"\nsizes.n = [4, 8]\nargs.v = "@captured"\nargs.y = "inout float32[n]"',
            "give every size one value",
        ),
        ('capture = "cap"\nargs.v = "@capture"\nargs.y = "inout float32[4]"', "is not"),
        ('capture = "cap"\nargs.v = "@captured fp32"\nargs.y = "inout float32[4]"', "unknown"),
        ('capture = "cap"\nargs.y = "inout float32[4]"', '"@captured" passes the bytes'),
    ],
)
def test_captured_arguments_are_checked(block: str, message: str) -> None:
    text = f"/* @cuda-llm\ngrid = 1\nblock = 32\n{block}\n*/\n{VIEW.split(chr(10), 2)[2]}"
    text = VIEW.split("\n", 1)[0] + "\n" + text
    spec, errors = parse_spec(find_kernels(text)[0], text)
    assert spec is None and any(message in e.message for e in errors), errors


def test_an_unnamed_parameter_is_keyed_by_its_position() -> None:
    text = """/* @cuda-llm
capture = "cap"
instance = "k<int2>"
grid = 1
block = 32
args.0 = "@captured"
args.y = "inout float32[4]"
args.2 = 3
*/
template <class L> __global__ void k(L, float* y, int) { }
"""
    spec, errors = parse_spec(find_kernels(text)[0], text)
    assert spec is not None, errors
    assert [a.name for a in spec.args] == ["0", "y", "2"]


def test_element_types_are_read_from_the_demangled_parameter() -> None:
    types = parameter_types(
        "void k<cute::Tensor<cute::ViewEngine<cute::gmem_ptr<float*> >, cute::Layout<int> > >"
        "(cute::Tensor<cute::ViewEngine<cute::gmem_ptr<float*> >, cute::Layout<int> >, "
        "thrust::device_ptr<unsigned int>, cute::tuple<int, int>, int)"
    )
    assert len(types) == 4
    assert element_type(types[0]) == "float32"
    assert element_type(types[1]) == "uint32"
    assert element_type(types[2]) is None  # no pointer in it: nothing to guess from


@pytest.mark.parametrize("wrong", [False, True])
def test_bench_runs_the_original_on_the_relocated_struct(tmp_path: Path, wrong: bool) -> None:
    _spec_written(tmp_path, n=3000, wrong=wrong)
    out = cli("bench", str(tmp_path / "view.cu"), home=tmp_path)
    if wrong:
        assert out.returncode == 1, out.stdout + out.stderr
        assert "does not reproduce the captured outputs" in out.stdout + out.stderr
        assert "y[1000]" in out.stdout + out.stderr, out.stdout
    else:
        assert out.returncode == 0, out.stdout + out.stderr
        assert ": ok" in out.stdout, out.stdout


def test_a_candidate_is_judged_on_the_captured_struct(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The optimize path: a faster candidate taking the same struct passes; one that ignores
    what the struct's pointer holds (writes 2x, not y + 2x) is a wrong output."""
    from cuda_llm_lsp.evaluate import timing
    from cuda_llm_lsp.evaluate.types import KernelBinary
    from tests.unit.fake_cuda_driver import cubin
    from tests.unit.test_evaluator_rules import fake_gpu

    root = tmp_path_factory.mktemp("view")
    text = _spec_written(root)
    spec, _ = parse_spec(find_kernels(text)[0], text)
    assert spec is not None

    def binary(name: str) -> KernelBinary:
        return KernelBinary(source_name="view", entry=name, cubin=cubin(name), arch="sm_90")

    for ev in fake_gpu(tmp_path_factory, timing.Plan(budget_s=0.3, batch=5)):
        good = ev.evaluate(
            binary("accumulate_view"), binary("accumulate_view_fast"), spec, spec_dir=root, seed=3
        )
        assert good.status == "ok", good.message
        bad = ev.evaluate(
            binary("accumulate_view"), binary("accumulate_view_wrong"), spec, spec_dir=root, seed=3
        )
        assert bad.status == "wrong_output", bad.message


def test_two_addresses_into_one_allocation_share_one_buffer(tmp_path: Path) -> None:
    """`Pair {float* lo; float* hi;}` with `hi = lo + 8`: one buffer from `lo`, `hi` written
    as that buffer's address + 32, so writes through either land where the program's did."""
    data = np.arange(16, dtype=np.float32).tobytes()
    (tmp_path / "p0_0.before.bin").write_bytes(data)
    (tmp_path / "p0_0.after.bin").write_bytes(data[:32] + bytes(32))
    (tmp_path / "p0_8.before.bin").write_bytes(data[32:])
    (tmp_path / "p0_8.after.bin").write_bytes(bytes(32))
    lo = CapturedPointer(X_BASE, 0, 64, 64, "p0_0.before.bin", "p0_0.after.bin", True)
    hi = CapturedPointer(X_BASE, 32, 64, 32, "p0_8.before.bin", "p0_8.after.bin", True)
    raw = struct.pack("<QQi4x", X_BASE, X_BASE + 32, 8)
    capture = Capture(
        1, "_Z4zero4Pair", "zero(Pair)", 1, (1, 1, 1), (32, 1, 1), 0, "H200", "sm_90", 0.01,
        (CapturedParam(0, 0, 24, raw, embedded=(EmbeddedPointer(8, hi), EmbeddedPointer(0, lo))),),
    )  # fmt: skip
    (tmp_path / "manifest.json").write_text(json.dumps(encode_capture(capture)))
    text = """struct Pair { float* lo; float* hi; int n; };
/* @cuda-llm
capture = "."
grid = 1
block = 32
args.p = "@captured float32"
*/
extern "C" __global__ void zero(Pair p) { p.hi[threadIdx.x % 8] = 0.0f; }
"""
    spec, errors = parse_spec(find_kernels(text)[0], text)
    assert spec is not None, errors
    expanded = with_captured_arguments(spec, tmp_path)
    buffers = [a for a in expanded.args if a.is_pointer]
    assert [(a.name, a.count, a.role) for a in buffers] == [("p@0", "16", "inout")]
    packed = case_launch(expanded, expanded.cases()[-1], {}, None).params[0]
    assert isinstance(packed, BytesArg)
    assert packed.relocations == ((0, "p@0", 0), (8, "p@0", 32))
    words = relocated(packed, {"p@0": 0x5000})
    assert struct.unpack("<QQi", words.tobytes()[:20]) == (0x5000, 0x5020, 8)


def test_an_end_pointer_keeps_its_distance_from_its_begin(tmp_path: Path) -> None:
    """`Range {begin, end}` with `end` one past the allocation (no bytes captured from it): one
    buffer from `begin`, `end` written as its address + the allocation's length."""
    data = np.arange(16, dtype=np.float32).tobytes()
    (tmp_path / "p0_0.before.bin").write_bytes(data)
    (tmp_path / "p0_0.after.bin").write_bytes(data)
    (tmp_path / "p0_8.before.bin").write_bytes(b"")
    (tmp_path / "p0_8.after.bin").write_bytes(b"")
    (tmp_path / "p1.before.bin").write_bytes(bytes(4))
    (tmp_path / "p1.after.bin").write_bytes(struct.pack("<f", 120.0))
    begin = CapturedPointer(X_BASE, 0, 64, 64, "p0_0.before.bin", "p0_0.after.bin", False)
    end = CapturedPointer(X_BASE, 64, 64, 0, "p0_8.before.bin", "p0_8.after.bin", False)
    out = CapturedPointer(Y_BASE, 0, 4, 4, "p1.before.bin", "p1.after.bin", True)
    raw = struct.pack("<QQ", X_BASE, X_BASE + 64)
    capture = Capture(
        1, "_Z3sum5RangePf", "sum(Range, float*)", 1, (1, 1, 1), (1, 1, 1), 0, "H200", "sm_90",
        0.01,
        (
            CapturedParam(
                0, 0, 16, raw, embedded=(EmbeddedPointer(0, begin), EmbeddedPointer(8, end))
            ),
            CapturedParam(1, 16, 8, struct.pack("<Q", Y_BASE), out),
        ),
    )  # fmt: skip
    (tmp_path / "manifest.json").write_text(json.dumps(encode_capture(capture)))
    text = """struct Range { const float* begin; const float* end; };
/* @cuda-llm
capture = "."
grid = 1
block = 1
args.r = "@captured float32"
args.out = "inout float32[1]"
*/
extern "C" __global__ void sum(Range r, float* out) {
    for (const float* p = r.begin; p != r.end; ++p) *out += *p;
}
"""
    spec, errors = parse_spec(find_kernels(text)[0], text)
    assert spec is not None, errors
    expanded = with_captured_arguments(spec, tmp_path)
    assert [(a.name, a.count, a.role) for a in expanded.args if a.within is not None] == [
        ("r@0", "16", "in")
    ]
    packed = case_launch(expanded, expanded.cases()[-1], {}, None).params[0]
    assert isinstance(packed, BytesArg)
    assert packed.relocations == ((0, "r@0", 0), (8, "r@0", 64))


def test_an_end_iterator_at_the_next_allocation_s_start_spans_both(tmp_path: Path) -> None:
    """Thrust's `reduce_kernel(first, last, init, op, result)`: `data` fills its allocation
    exactly and `result`'s comes right after it, so `last == result`. Both allocations become
    one buffer in address order: the range first..last is `data`, and `result` lies after it."""
    data = np.arange(16, dtype=np.uint32).tobytes()
    files = {"p0": (data, data), "p1": (bytes(4), struct.pack("<I", 120))}
    files["p2"] = files["p1"]
    for stem, (before, after) in files.items():
        (tmp_path / f"{stem}.before.bin").write_bytes(before)
        (tmp_path / f"{stem}.after.bin").write_bytes(after)
    r_base = X_BASE + 64
    first = CapturedPointer(X_BASE, 0, 64, 64, "p0.before.bin", "p0.after.bin", False)
    last = CapturedPointer(r_base, 0, 4, 4, "p1.before.bin", "p1.after.bin", True)
    result = CapturedPointer(r_base, 0, 4, 4, "p2.before.bin", "p2.after.bin", True)
    capture = Capture(
        1, "_Z6reduce", "reduce(It, It, Ptr)", 1, (1, 1, 1), (1, 1, 1), 0, "H200", "sm_90", 0.01,
        (
            CapturedParam(0, 0, 8, struct.pack("<Q", X_BASE), first),
            CapturedParam(1, 8, 8, struct.pack("<Q", r_base), last),
            CapturedParam(2, 16, 8, struct.pack("<Q", r_base), result),
        ),
    )  # fmt: skip
    (tmp_path / "manifest.json").write_text(json.dumps(encode_capture(capture)))
    text = """struct It { unsigned* p; };
/* @cuda-llm
capture = "."
grid = 1
block = 1
args.first = "@captured uint32"
args.last = "@captured uint32"
args.result = "@captured uint32"
*/
extern "C" __global__ void reduce(It first, It last, It result) { }
"""
    spec, errors = parse_spec(find_kernels(text)[0], text)
    assert spec is not None, errors
    expanded = with_captured_arguments(spec, tmp_path)
    buffers = [a for a in expanded.args if a.is_pointer]
    assert [(a.name, a.count, a.role) for a in buffers] == [("first@0", "17", "inout")]
    moves = [a.moves for a in expanded.args if a.is_captured]
    assert moves == [((0, "first@0", 0),), ((0, "first@0", 64),), ((0, "first@0", 64),)]
    from cuda_llm_lsp.evaluate.captured import read_buffer

    case = expanded.cases()[-1]
    before = read_buffer(tmp_path, capture, expanded, case, "first@0", "before")
    after = read_buffer(tmp_path, capture, expanded, case, "first@0", "after")
    assert list(before) == [*range(16), 0] and list(after) == [*range(16), 120]


def test_a_launch_that_changed_nothing_is_measured_never_judged(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """CUTLASS's `kernel_dump` only prints: bench measures it; optimize refuses it, since
    with nothing to compare every candidate would pass."""
    from cuda_llm_lsp.evaluate import timing
    from cuda_llm_lsp.evaluate.inputs import InputError
    from cuda_llm_lsp.evaluate.types import KernelBinary
    from tests.unit.fake_cuda_driver import cubin
    from tests.unit.test_evaluator_rules import fake_gpu

    root = tmp_path_factory.mktemp("nothing")
    capture = _view_capture(root / "cap", 256)
    y = capture.params[1].pointer
    assert y is not None
    (root / "cap" / y.after).write_bytes((root / "cap" / y.before).read_bytes())  # unchanged
    text = """struct View { const float* x; int n; };
/* @cuda-llm
capture = "cap"
grid = 1
block = 256
args.v = "@captured float32"
args.y = "in float32[256]"
*/
extern "C" __global__ void view_nothing(View v, const float* y) { }
"""
    spec, errors = parse_spec(find_kernels(text)[0], text)
    assert spec is not None, errors

    def binary(name: str) -> KernelBinary:
        return KernelBinary(source_name="v", entry=name, cubin=cubin(name), arch="sm_90")

    for ev in fake_gpu(tmp_path_factory, timing.Plan(budget_s=0.3, batch=5)):
        measured = ev.benchmark(binary("view_nothing"), spec, spec_dir=root, seed=1)
        assert measured.status == "ok", measured.message
        with pytest.raises(InputError, match="nothing to compare"):
            ev.evaluate(binary("view_nothing"), binary("view_nothing"), spec, spec_dir=root, seed=1)
