"""Only device code from a model reaches the user's file, and no model text hides what it does
(docs/design.md, "What an accepted winner may write").

A planted reply per class of host code and hidden text is refused where a candidate is cleaned
(`source.device_only.reply_refusal`, in the loop: `compile_error`) and again where a winner is
written (`fsr.apply.winner_text`); honest helpers still pass. Where nvcc is installed, the check
before `--write` / Accept (`fsr.apply.write_check`) builds both files and compares their host
objects: called here directly, with the source check bypassed, it refuses host code that got past
it. Model text shown on a terminal or in the editor is neutralized (`source.untrusted`).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cuda_llm_lsp.compile.host_object import tools_available
from cuda_llm_lsp.compile.nvcc import find_nvcc
from cuda_llm_lsp.evaluate.process import WorkerProcess
from cuda_llm_lsp.fsr import apply
from cuda_llm_lsp.fsr.apply import NotApplicable, winner_text, write_check
from cuda_llm_lsp.source.device_only import DeviceOnly, device_only, host_items, reply_refusal
from cuda_llm_lsp.source.untrusted import hidden_characters, neutralize
from tests.support.fsr_fakes import make_recording
from tests.support.scripted_llm import ScriptedLlmServer
from tests.unit.test_cli_optimize import SAXPY, cli

KERNEL = """\
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  // variant: fast
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
"""

# One planted reply per class: (code before the kernel, the line and words of the refusal).
HOST_CODE = {
    "host function": (
        '#include <cstdio>\nint main() { std::puts("hi"); return 0; }\n',
        "line 2 defines a host function `main`",
    ),
    "host object with a constructor": (
        "struct Timer {\n  Timer() { }\n};\nstatic Timer timer;\n",
        "line 4 defines a host object `timer` of class type `Timer`",
    ),
    "constructor attribute": (
        "__attribute__((constructor)) __host__ __device__ void early() {}\n",
        "line 1 uses the attribute `constructor`",
    ),
    "namespace-scope asm": (
        '__device__ float f(float v) { return v; }\nasm(".section .init_array");\n',
        "line 2 holds namespace-scope `asm`",
    ),
    "host variable with a dynamic initialiser": (
        "int seed();\nconst int SEED = seed();\n",
        "line 2 defines a host variable `SEED` with a dynamic initialiser",
    ),
    "host pragma": ('#pragma GCC optimize("O0")\n', "line 1 holds a host pragma"),
    "a macro hiding a hook": (
        "#define EARLY __attribute__((constructor))\n",
        "line 1 uses the attribute `constructor`",
    ),
    "global operator new": (
        "#include <cstddef>\nvoid* operator new(std::size_t n) { return nullptr; }\n",
        "line 2 defines a host function `operator new`",
    ),
    "extern C host function": (
        'extern "C" int helper(int v) { return v; }\n',
        "line 1 defines a host function `helper`",
    ),
    "redefined execution space": (
        "#define __device__\n",
        "line 1 redefines the reserved name `__device__`",
    ),
}

HIDDEN = {
    "bidi in a comment": (
        "/* \u202e } \u2066 */ __device__ float g(float v) { return v; }\n",
        "line 1 holds <U+202E>, a bidirectional control",
    ),
    "bidi in a string": (
        '__device__ const char* tag() { return "ok\u2067"; }\n',
        "line 1 holds <U+2067>, a bidirectional control",
    ),
    "zero-width in an identifier": (
        "__device__ float sca\u200ble(float v) { return v; }\n",
        "line 1 holds <U+200B>, an invisible format character",
    ),
    "a control character": ("// \x1b[2J\n", "line 1 holds <U+001B>, a control character"),
    "a look-alike identifier": (
        "__device__ float \u0455cale(float v) { return v; }\n",  # Cyrillic s
        "line 1 holds <U+0455>, a non-ASCII character in code",
    ),
}

HONEST = """\
#include <cuda_fp16.h>
#define TILE 32
#define HD __host__ __device__
#pragma unroll
constexpr int K = 4;
const int ROWS = 8;
static const float SCALE = 0.5f;
__constant__ float coeffs[4] = {1.0f, 2.0f, 3.0f, 4.0f};
__device__ int counter = 0;
extern __shared__ float shared[];
typedef float real;
using vec = float4;
enum class Mode { Fast, Exact };
struct Pair { float a, b; __host__ __device__ Pair() : a(0), b(0) {} };
template <int N> struct Unroll { __device__ static float sum(const float* v) { return v[0]; } };
static_assert(sizeof(float) == 4, "float is 4 bytes");
__device__ __forceinline__ float axpy(float a, float x, float y) { return fmaf(a, x, y); }
HD inline float twice(float v) { return v + v; }
__host__ __device__ float half_of(float v) { return v * SCALE; }
template <typename T> __device__ T square(T v) { return v * v; }
__device__ float proto(float);
namespace { __device__ float hidden(float v) { return v; } constexpr int Q = 3; }
namespace detail { __device__ float inner(float v) { return v; } }
#if __CUDA_ARCH__ >= 800
__device__ __forceinline__ float fast(float x) { return x; }
#else
__device__ __forceinline__ float fast(float x) { return x * 1.0f; }
#endif
#if __has_include(<cuda_bf16.h>)
#include <cuda_bf16.h>
#endif
struct __align__(16) Vec4 { float x, y, z, w; };
__device__ __forceinline__ Vec4 operator+(Vec4 a, Vec4 b) { return {a.x + b.x, a.y, a.z, a.w}; }
template <typename T> struct Shared { __device__ T* get() { return nullptr; } };
template <> struct Shared<double> { __device__ double* get() { return nullptr; } };
static constexpr unsigned FULL_MASK = 0xffffffffu;
// un commentaire accentué: comments and strings may be non-ASCII
"""


@pytest.mark.parametrize("shape", sorted(HOST_CODE))
def test_host_code_in_a_reply_is_refused_with_its_line(shape: str) -> None:
    code, says = HOST_CODE[shape]
    refused = reply_refusal(code + KERNEL, " of the candidate")
    assert refused is not None and refused.startswith("host code is not allowed in a reply")
    assert says in refused, refused
    line = says.split()[1]
    assert f"(line {line} of the candidate)" in refused  # the prompt shows the model that line


@pytest.mark.parametrize("shape", sorted(HIDDEN))
def test_hidden_characters_in_a_reply_are_refused_with_their_line(shape: str) -> None:
    code, says = HIDDEN[shape]
    refused = reply_refusal(code + KERNEL)
    assert refused is not None and refused.startswith("hidden characters are not allowed")
    assert says in refused, refused
    assert refused.isascii()  # the refusal itself shows marks, never the characters


def test_honest_helpers_pass_with_host_removed() -> None:
    """`__host__ __device__` helpers (by name, through `HD`, on a member) become `__device__`
    only: nothing of the reply is compiled for the host, and the model hears which lines."""
    prepared = device_only(HONEST + KERNEL)
    assert isinstance(prepared, DeviceOnly), prepared
    assert prepared.dropped == () and prepared.unhosted == (3, 14, 19)
    assert "__host__" not in prepared.text and "#define HD __device__" in prepared.text
    assert "__device__ float half_of" in prepared.text
    assert host_items(prepared.text) == [] and reply_refusal(prepared.text) is None
    assert "`__host__` removed on line(s) 3, 14, 19" in prepared.note()
    assert reply_refusal(HONEST + KERNEL) is not None  # as written: `winner_text` refuses it


def test_a_winner_with_host_code_is_not_written_even_when_it_was_judged() -> None:
    """Defence in depth: `winner_text` checks again what it would write."""
    for shape in ("host object with a constructor", "namespace-scope asm"):
        with pytest.raises(NotApplicable, match="host code is not allowed in a reply"):
            winner_text(SAXPY, "saxpy", HOST_CODE[shape][0] + KERNEL)
    with pytest.raises(NotApplicable, match="hidden characters"):
        winner_text(SAXPY, "saxpy", HIDDEN["bidi in a comment"][0] + KERNEL)
    prepared = device_only(HONEST.replace("#pragma unroll\n", "") + KERNEL)
    assert isinstance(prepared, DeviceOnly)
    honest = winner_text(SAXPY, "saxpy", prepared.text)
    assert "__constant__ float coeffs[4]" in honest.text and "variant: fast" in honest.text


def test_neutralize_shows_escape_sequences_and_hidden_characters_as_marks() -> None:
    text = (
        "ok\x1b]0;title\x07 \x1b[2J\x1b[31mred\x9b1m \u202eevil\u2069 zero\u200bwidth\ttab\r\nend"
    )
    shown = neutralize(text)
    assert "\x1b" not in shown and "\x07" not in shown and "\x9b" not in shown
    assert "\u202e" not in shown and "\u200b" not in shown and "\r" not in shown
    assert "<U+001B>" in shown and "<U+202E>evil<U+2069>" in shown and "red" in shown
    assert "\ttab\nend" in shown
    assert neutralize("plain text, accents é ü, tabs\tand\nlines") == (
        "plain text, accents é ü, tabs\tand\nlines"
    )


def test_the_worker_output_is_neutralized_before_anyone_sees_it() -> None:
    """A kernel's `printf` goes to the worker's stderr, whose tail reaches failure messages."""
    worker = WorkerProcess.__new__(WorkerProcess)
    worker.stderr_tail = __import__("collections").deque(maxlen=40)
    printed = "from the kernel: \x1b]0;owned\x07\x1b[2J\u202e done"
    worker.proc = subprocess.Popen(
        [sys.executable, "-c", f"import sys; sys.stderr.write({printed!r} + '\\n')"],
        stderr=subprocess.PIPE,
    )
    worker._drain()
    worker.proc.wait()
    (line,) = worker.stderr_tail
    assert "from the kernel" in line and "\x1b" not in line and "\u202e" not in line


def test_escape_sequences_in_a_model_reply_never_reach_the_terminal(tmp_path: Path) -> None:
    """A reply's own words are shown (a content-filter stop quotes them): neutralized. Real HTTP
    to the scripted endpoint, the real openai SDK."""
    (tmp_path / "saxpy.cu").write_text(SAXPY)
    (tmp_path / "outcomes.json").write_text('{"baseline": {"ms": 1.0, "spread_pct": 0.4}}')
    steps = [
        {
            "text": "I cannot\x1b]0;owned\x07\x1b[2J\u202e go on",
            "repeat": -1,
            "finish_reason": "content_filter",
        }
    ]
    with ScriptedLlmServer(steps) as server:
        done = cli(
            tmp_path,
            str(tmp_path / "saxpy.cu"),
            "--kernel",
            "saxpy",
            "--rounds",
            "1",
            "--candidates",
            "1",
            "--base-url",
            server.base_url,
            "--model",
            "m",
        )
    shown = done.stdout + done.stderr
    assert "content filter" in shown and "<U+001B>" in shown, shown
    assert "\x1b" not in shown and "\u202e" not in shown and "\x07" not in shown


def test_a_reply_with_a_host_object_is_written_without_it_by_optimize_write(
    tmp_path: Path,
) -> None:
    """The host object is dropped before the candidate is built: the kernel is judged and
    written, the object never is."""
    (tmp_path / "saxpy.cu").write_text(SAXPY)
    reply = HOST_CODE["host object with a constructor"][0] + KERNEL
    make_recording(tmp_path / "rec", "saxpy", {(1, 1): reply})
    (tmp_path / "outcomes.json").write_text(
        '{"baseline": {"ms": 1.0, "spread_pct": 0.4}, "candidates": '
        '[{"contains": "variant: fast", "status": "ok", "ms": 0.4}]}'
    )
    done = cli(
        tmp_path,
        str(tmp_path / "saxpy.cu"),
        "--kernel",
        "saxpy",
        "--replay",
        str(tmp_path / "rec"),
        "--rounds",
        "1",
        "--candidates",
        "1",
        "--write",
    )
    assert done.returncode == 0, done.stderr
    written = (tmp_path / "saxpy.cu").read_text()
    assert "variant: fast" in written and "Timer" not in written and "timer" not in written


# ---------------------------------------------------------------------------------------------
# The nvcc host-object check, with the source check bypassed (write_check called directly)

needs_nvcc = pytest.mark.skipif(
    find_nvcc() is None or not tools_available(), reason="no nvcc (the `nvcc` extra) or binutils"
)


def _edited(helpers: str, kernel: str = KERNEL) -> str:
    """SAXPY with `helpers` above its spec and `kernel` in place of its kernel."""
    spec, start = SAXPY.index("/* @cuda-llm"), SAXPY.index('extern "C"')
    end = SAXPY.index("}\n\nint main") + 2
    return SAXPY[:spec] + helpers + "\n" + SAXPY[spec:start] + kernel + SAXPY[end:]


@needs_nvcc
def test_the_host_object_check_passes_an_honest_winner_with_device_helpers() -> None:
    helpers = HONEST.replace("#pragma unroll\n", "")
    kernel = KERNEL.replace("a * x[i] + y[i]", "axpy(a, x[i], y[i]) + twice(coeffs[0]) * 0")
    checked = write_check(_edited(helpers, kernel), SAXPY, None)
    assert checked.refused is None and checked.note == "", checked


@needs_nvcc
@pytest.mark.parametrize(
    ("sneaked", "says"),
    [
        (
            "struct Timer { Timer(); };\nTimer::Timer() {}\nstatic Timer timer;\n",
            "dynamic initialiser",
        ),
        ("__attribute__((constructor)) static void early() {}\n", "init_array"),
        ('asm(".globl sneaky\\nsneaky: ret");\n', "sneaky"),
        ("int host_helper(int v) { return v + 1; }\n", "host_helper"),
    ],
)
def test_the_host_object_check_refuses_host_code_that_got_past_the_source_check(
    sneaked: str, says: str
) -> None:
    checked = write_check(_edited(sneaked), SAXPY, None)
    assert checked.refused is not None, checked
    assert "host object has host code the original's has not" in checked.refused
    assert says in checked.refused, checked.refused


@needs_nvcc
def test_the_host_object_check_refuses_a_file_nvcc_does_not_build() -> None:
    helper = "__host__ __device__ float twice(float v) {\n#ifndef __CUDA_ARCH__\n  return nope(v);\n#endif\n  return v + v;\n}\n"  # noqa: E501
    checked = write_check(_edited(helper), SAXPY, None)
    assert checked.refused is not None and "does not build with nvcc" in checked.refused


def test_without_nvcc_the_write_says_the_build_check_was_skipped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(apply, "find_nvcc", lambda: None)
    checked = write_check(_edited("__device__ float g(float v) { return v; }\n"), SAXPY, None)
    assert checked.refused is None and "the nvcc build check was skipped" in checked.note
    bidi = write_check(_edited("// \u202e\n"), SAXPY, None)
    assert bidi.refused is not None and "<U+202E>" in bidi.refused


def test_hidden_characters_outside_code_only_checks_allow_non_ascii_text() -> None:
    assert hidden_characters('// µs and é\nconst char* s = "π";\n') == []
    assert hidden_characters("float \u00e9 = 1;\n")[0].why.startswith("a non-ASCII character")


@needs_nvcc
def test_the_written_program_of_an_honest_reply_prints_what_the_original_prints(
    tmp_path: Path,
) -> None:
    """`--write` of a winner with device helpers, then the programs built with nvcc and run
    (no kernel runs without a GPU; what runs on the host is what matters): the same output. The
    same reply with a host object is written without it: the same output too."""
    program = SAXPY.replace("  return 0;\n}", '  std::printf("saxpy done\\n");\n  return 0;\n}')
    helpers = (
        "#define TILE 256\n"
        "constexpr int UNROLL = 4;\n"
        "__constant__ float scale[1] = {1.0f};\n"
        "struct Acc { float s; __device__ void add(float v) { s += v; } };\n"
        "__host__ __device__ inline float twice(float v) { return v + v; }\n"
    )
    kernel = KERNEL.replace("a * x[i] + y[i]", "a * x[i] * scale[0] + y[i] + twice(0.0f)")
    outcomes = (
        '{"baseline": {"ms": 1.0, "spread_pct": 0.4}, "candidates": '
        '[{"contains": "variant: fast", "status": "ok", "ms": 0.4}]}'
    )
    runs = {}
    for name, reply in (("honest", helpers + kernel), ("host", helpers + TIMER_REPLY + kernel)):
        work = tmp_path / name
        work.mkdir()
        (work / "saxpy.cu").write_text(program)
        (work / "outcomes.json").write_text(outcomes)
        make_recording(work / "rec", "saxpy", {(1, 1): reply})
        done = cli(
            work,
            str(work / "saxpy.cu"),
            "--kernel",
            "saxpy",
            "--replay",
            str(work / "rec"),
            "--rounds",
            "1",
            "--candidates",
            "1",
            "--write",
        )
        assert done.returncode == 0, done.stderr
        runs[name] = (work / "saxpy.cu").read_text()
    assert "__device__ inline float twice" in runs["honest"]
    assert "__host__" not in runs["honest"]
    assert "variant: fast" in runs["host"] and "Timer" not in runs["host"]  # dropped
    nvcc = str(find_nvcc())
    printed = []
    for i, text in enumerate((program, runs["honest"], runs["host"])):
        source = tmp_path / f"built{i}.cu"
        source.write_text(text)
        subprocess.run(
            [nvcc, str(source), "-o", str(tmp_path / f"built{i}")],
            check=True,
            capture_output=True,
            timeout=300,
        )
        ran = subprocess.run(
            [str(tmp_path / f"built{i}")], capture_output=True, text=True, timeout=60
        )
        printed.append((ran.returncode, ran.stdout))
    assert printed[0] == printed[1] == printed[2] == (0, "saxpy done\n")


TIMER_REPLY = (
    "struct Timer {\n"
    '  Timer() { std::printf("the model\'s code ran before main\\n"); }\n'
    "};\n"
    "static Timer timer;\n"
)
