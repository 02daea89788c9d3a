"""Issue 11's GPU-side holes on a real GPU, each with a planted CUDA candidate that passed the
evaluator before: replay across launches, reading the original's results, `inout` buffers, a
fixed poison, guard bands and memcheck of large cases, hidden generalisation cases, inputs
changed while timed, and module state across evaluations.

Each is rejected with a fitting status, or timed honestly (no better than the kernel it really
is: these candidates do the original's slow work whenever they cannot cheat).
"""

from __future__ import annotations

import pytest

from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.evaluate.candidate import CandidateRejected, build_binary
from cuda_llm_lsp.evaluate.gpu import GpuEvaluator
from cuda_llm_lsp.evaluate.inputs import case_sources
from cuda_llm_lsp.evaluate.launch import case_launch
from cuda_llm_lsp.evaluate.process import Worker
from cuda_llm_lsp.evaluate.protocol import (
    Checks,
    LoadReply,
    LoadRequest,
    Pong,
    RunReply,
    RunRequest,
    UnloadRequest,
)
from cuda_llm_lsp.evaluate.sanitizer import run_sanitizer, sanitizer_path
from cuda_llm_lsp.evaluate.types import EvalResult, KernelBinary
from cuda_llm_lsp.source.kernels import find_kernels
from cuda_llm_lsp.source.spec import TestSpec, parse_spec
from tests.gpu import kernels as K

pytestmark = pytest.mark.gpu

SLOW = """        float v = x[i], acc = 0.0f;
        for (int k = 0; k < 512; ++k) acc = fmaf(acc, 0.5f, v);  // the original's work
"""

# 1. replay: a result saved per input fingerprint (first two values and n), replayed on a hit
FINGERPRINT_REPLAY = (
    K.COUNTERS
    + "__device__ float saved[4194304];\n__device__ float key0, key1;\n__device__ int keyn;\n"
    + K.HEAD
    + K.INDEX
    + """    bool hit = *(volatile int*)&keyn == n && *(volatile float*)&key0 == x[0]
               && *(volatile float*)&key1 == x[n > 1 ? 1 : 0] && n <= 4194304;
    if (i < n) {
        if (hit) y[i] = saved[i];
        else {
"""
    + SLOW
    + """            y[i] = acc;
            if (n <= 4194304) saved[i] = acc;
        }
    }
"""
    + K.LAST_BLOCK.replace(
        "/* last block */", "if (!hit) { key0 = x[0]; key1 = x[n > 1 ? 1 : 0]; keyn = n; }"
    )
)

# 2. the original's results: remembers every y it was given (with n); copies from one that holds
# 2x for its inputs (the original's output on them), else does the original's work
ORACLE_READER = (
    K.COUNTERS
    + "__device__ float* seen[64];\n__device__ int seen_n[64];\n"
    + "__device__ unsigned int seen_count;\n"
    + K.HEAD
    + K.INDEX
    + """    float* found = 0;
    unsigned int count = *(volatile unsigned int*)&seen_count;
    for (unsigned int s = 0; s < count && s < 64; ++s) {
        float* p = ((float* volatile*)seen)[s];
        if (p != y && ((volatile int*)seen_n)[s] == n && n > 1
            && fabsf(p[0] - 2.0f * x[0]) <= 1e-6f && fabsf(p[1] - 2.0f * x[1]) <= 1e-6f) {
            found = p;
            break;
        }
    }
    if (i < n) {
        if (found) y[i] = found[i];
        else {
"""
    + SLOW
    + """            y[i] = acc;
        }
    }
"""
    + K.LAST_BLOCK.replace(
        "/* last block */",
        "unsigned int s = seen_count;\n"
        "            if (s < 64) { seen[s] = y; seen_n[s] = n; seen_count = s + 1; }",
    )
)

# 3. inout: y += 2x; skips the work when y still holds the result it left last time
ACCUMULATE = """
/* @cuda-llm
sizes.n = [1, 1000, 4097, 1048576]
grid = "cdiv(n, 256)"
block = 256
args.x = "float32[n]"
args.y = "inout float32[n]"
args.n = "n"
*/
extern "C" __global__ void accumulate(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i], acc = 0.0f;
        for (int k = 0; k < 512; ++k) acc = fmaf(acc, 0.5f, v);
        y[i] += acc;
    }
}
"""
ACC_HEAD = 'extern "C" __global__ void accumulate(const float* x, float* y, int n) {\n'
INOUT_SKIP = (
    "__device__ float saved[1048576];\n"
    + ACC_HEAD
    + K.INDEX
    + """    if (i < n) {
        if (n <= 1048576 && y[i] == saved[i]) return;  /* y still holds my last result */
"""
    + SLOW
    + """        y[i] += acc;
        if (n <= 1048576) saved[i] = y[i];
    }
}
"""
)

# 4. poison: writes only over NaN (any poison), or only over the documented bit pattern
WRITES_ONLY_OVER_NAN = K.HEAD + K.INDEX + "    if (i < n && isnan(y[i])) y[i] = 2.0f * x[i];\n}\n"
WRITES_ONLY_OVER_FIXED_POISON = (
    K.HEAD
    + K.INDEX
    + "    if (i < n && __float_as_uint(y[i]) == 0x7FA5A5A5u) y[i] = 2.0f * x[i];\n}\n"
)

# 5. guard bands: 8 KiB past the end of a 128 MiB output (beyond a fixed 4 KiB guard)
LARGE = K.TWICE.replace("sizes.n = [1, 1000, 4097, 4194304]", "sizes.n = [1000, 33554432]")
WRITES_8K_PAST_THE_END = (
    K.HEAD
    + K.INDEX
    + "    if (i < n) y[i] = 2.0f * x[i];\n"
    + "    if (i == 0 && n > 1000000) y[n + 2048] = 1.0f;\n}\n"
)
# memcheck: reads past its input only at the timed case's size (32 MiB of buffers)
READS_PAST_ONLY_WHEN_LARGE = (
    K.HEAD
    + K.INDEX
    + "    if (i < n) y[i] = 2.0f * x[i] + (n > 4000000 ? 0.0f * x[i + n + 70000] : 0.0f);\n}\n"
)

# 6. hidden cases: a tail of one element only; a clamp to init's range; float4 loads
TAIL_OF_ONE_ONLY = (
    K.HEAD
    + K.INDEX
    + """    int q = n / 4;
    if (i < q) for (int k = 0; k < 4; ++k) y[4 * i + k] = 2.0f * x[4 * i + k];
    if (i == 0 && (n & 3) == 1) y[n - 1] = 2.0f * x[n - 1];  /* spec sizes: tails 0 and 1 */
}
"""
)
CLAMPS_TO_INIT_RANGE = (
    K.HEAD + K.INDEX + "    if (i < n) y[i] = 2.0f * fminf(fmaxf(x[i], -1.0f), 1.0f);\n}\n"
)
FLOAT4_LOADS = (
    K.HEAD
    + K.INDEX
    + """    int q = n / 4;
    if (i < q) {
        float4 v = reinterpret_cast<const float4*>(x)[i];
        float4 w = make_float4(2.0f * v.x, 2.0f * v.y, 2.0f * v.z, 2.0f * v.w);
        reinterpret_cast<float4*>(y)[i] = w;
    }
    if (i < n - 4 * q) y[4 * q + i] = 2.0f * x[4 * q + i];
}
"""
)

# 7. inputs: leaves x alone on its first launches, zeroes x[0] from its 24th on
MODIFIES_INPUT_WHEN_TIMED = (
    K.COUNTERS
    + K.HEAD
    + K.INDEX
    + "    if (i < n) y[i] = 2.0f * x[i];\n"
    + "    if (i == 0 && *(volatile unsigned int*)&launches_done >= 24) ((float*)x)[0] = 0.0f;\n"
    + K.LAST_BLOCK.replace("/* last block */", "")
)

# module state: y = 2x + launches of this module so far
COUNTS_ITS_LAUNCHES = (
    K.COUNTERS
    + K.HEAD
    + K.INDEX
    + "    if (i < n) y[i] = 2.0f * x[i] + (float)*(volatile unsigned int*)&launches_done;\n"
    + K.LAST_BLOCK.replace("/* last block */", "")
)


def spec_of(source: str) -> TestSpec:
    spec, problems = parse_spec(find_kernels(source)[0], source)
    assert spec is not None, problems
    return spec


@pytest.fixture(scope="module")
def evaluator() -> GpuEvaluator:
    ev = GpuEvaluator(launch_timeout_s=3.0)
    yield ev
    ev.close()


@pytest.fixture(scope="module")
def arch(evaluator: GpuEvaluator) -> str:
    return evaluator.device_facts().arch


def build(source: str, name: str, arch: str, candidate: str | None = None) -> KernelBinary:
    binary = build_binary(source, None, name, Settings(), kernel_source=candidate, arch=arch)
    assert not isinstance(binary, CandidateRejected), binary
    return binary


def judge(
    evaluator: GpuEvaluator, arch: str, candidate: str, source: str = K.TWICE, name: str = "twice"
) -> EvalResult:
    r = evaluator.evaluate(
        build(source, name, arch), build(source, name, arch, candidate), spec_of(source)
    )
    print(f"{r.status}: {r.message}")
    return r


def honest(r: EvalResult) -> bool:
    """Timed as the original's work it really does (an ok within 25 % of 1x), or rejected (a
    read of memory that was freed meanwhile faults)."""
    if r.status != "ok":
        return r.status in ("stale_after_timing", "wrong_output", "unwritten_output", "fault")
    return r.speedup is not None and r.speedup < 1.25


def test_a_replay_of_saved_results_gains_nothing(evaluator: GpuEvaluator, arch: str) -> None:
    assert honest(judge(evaluator, arch, FINGERPRINT_REPLAY))


def test_the_originals_results_cannot_be_read(evaluator: GpuEvaluator, arch: str) -> None:
    assert honest(judge(evaluator, arch, ORACLE_READER))


def test_inout_restored_before_every_timed_launch(evaluator: GpuEvaluator, arch: str) -> None:
    assert honest(judge(evaluator, arch, INOUT_SKIP, ACCUMULATE, "accumulate"))


def test_writes_only_over_nan_fails_the_prefilled_run(evaluator: GpuEvaluator, arch: str) -> None:
    r = judge(evaluator, arch, WRITES_ONLY_OVER_NAN)
    assert r.status == "wrong_output" and "pre-filled with zeros" in r.message


def test_the_poison_is_not_the_documented_one(evaluator: GpuEvaluator, arch: str) -> None:
    r = judge(evaluator, arch, WRITES_ONLY_OVER_FIXED_POISON)
    assert r.status == "unwritten_output", r.message


def test_a_write_8k_past_a_128_mib_buffer(evaluator: GpuEvaluator, arch: str) -> None:
    r = judge(evaluator, arch, WRITES_8K_PAST_THE_END, LARGE)
    assert r.status == "out_of_bounds" and "y[33556480] past the end" in r.message


@pytest.mark.skipif(sanitizer_path() is None, reason="compute-sanitizer is not on PATH")
def test_memcheck_runs_the_timed_case(arch: str) -> None:
    binary = build(K.TWICE, "twice", arch, READS_PAST_ONLY_WHEN_LARGE)
    r = run_sanitizer(binary, spec_of(K.TWICE), tools=("memcheck",), timeout_s=200)
    print(r.message, r.sanitizer_report)
    assert r.status == "sanitizer"


@pytest.mark.parametrize(
    ("candidate", "status", "kind"),
    [
        (TAIL_OF_ONE_ONLY, ("wrong_output",), "hidden size case"),
        (CLAMPS_TO_INIT_RANGE, ("wrong_output",), "hidden range case"),
        (FLOAT4_LOADS, ("fault",), "hidden offset case"),
    ],
)
def test_hidden_generalisation_cases(
    evaluator: GpuEvaluator, arch: str, candidate: str, status: tuple[str, ...], kind: str
) -> None:
    r = judge(evaluator, arch, candidate)
    assert r.status in status and kind in r.message, r.message
    assert r.cases and r.cases[-1].sizes


def test_inputs_checked_on_sampled_timed_launches(evaluator: GpuEvaluator, arch: str) -> None:
    r = judge(evaluator, arch, MODIFIES_INPUT_WHEN_TIMED)
    assert r.status == "input_modified" and "timed launches" in r.message, r.message


def test_device_state_does_not_survive_an_unload(arch: str) -> None:
    spec = spec_of(K.TWICE)
    case = spec.cases()[1]
    counting = build(K.TWICE, "twice", arch, COUNTS_ITS_LAUNCHES)
    original = build(K.TWICE, "twice", arch)
    worker = Worker(0)
    try:

        def run(binary: KernelBinary, keep: str | None, against: tuple[str, ...]) -> RunReply:
            loaded = worker.call(LoadRequest(binary.cubin, binary.entry), LoadReply, 60)
            assert isinstance(loaded, LoadReply), loaded
            launch = case_launch(spec, case, case_sources(spec, case, 1), loaded.key)
            # the two kernels may round differently by an ulp; a surviving counter adds 1 or more
            checks = Checks(("y",), rtol=1e-6, atol=1e-6, keep=keep, against=against)
            reply = worker.call(RunRequest(launch, 5.0, checks=checks), RunReply, 60)
            assert isinstance(reply, RunReply), reply
            if binary is counting:  # (an unload drops the kept runs: the original stays)
                assert isinstance(worker.call(UnloadRequest(loaded.key), Pong, 60), Pong)
            return reply

        run(counting, None, ())
        run(original, "oracle", ())
        again = run(counting, None, ("oracle",))
        assert again.compared["oracle"]["y"].bad == 0  # launches_done was 0 again
    finally:
        worker.close()


def test_unload_leaves_the_worker_usable(evaluator: GpuEvaluator, arch: str) -> None:
    fast = build(K.TWICE, "twice", arch, K.FAST)
    base = build(K.TWICE, "twice", arch)
    for _ in range(2):  # the same candidate again: loaded afresh after its unload
        assert evaluator.evaluate(base, fast, spec_of(K.TWICE)).status == "ok"
