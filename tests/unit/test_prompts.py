"""Prompt building: what the model is told about the task, the file, the GPU and the feedback."""

from __future__ import annotations

import pytest

from cuda_llm_lsp.compile.types import Resources
from cuda_llm_lsp.evaluate.recorded import DEFAULT_DEVICE
from cuda_llm_lsp.evaluate.types import EvalResult, Timing
from cuda_llm_lsp.fsr import prompts
from cuda_llm_lsp.fsr.toolchain import clean_candidate
from cuda_llm_lsp.fsr.types import CandidateOutcome
from cuda_llm_lsp.fsr.winner import required_speedup, top_correct
from cuda_llm_lsp.source.kernels import find_kernels
from tests.support.fsr_fakes import SAXPY_FILE, saxpy_candidate


def outcome(
    index: int,
    status: str = "ok",
    *,
    speedup: float | None = None,
    message: str = "",
    source: str = "",
    registers: int | None = None,
    round_: int = 1,
) -> CandidateOutcome:
    ms = 1.0 / speedup if speedup else None
    return CandidateOutcome(
        round_,
        index,
        status,
        ms,
        message,
        source or saxpy_candidate(str(index)),  # type: ignore[arg-type]
        speedup=speedup,
        registers=registers,
    )


def task() -> prompts.TaskContext:
    [kernel] = find_kernels(SAXPY_FILE)
    return prompts.TaskContext(
        kernel_name="saxpy",
        kernel_source=kernel.span.slice(SAXPY_FILE),
        file=prompts.file_context(SAXPY_FILE, kernel),
        spec_text=kernel.spec.toml if kernel.spec else "",
        sizes={"n": [1, 1000, 1048576]},
        device=DEFAULT_DEVICE,
        baseline_resources=Resources(12, 0, 0, 0, 0),
        baseline_ms=0.1234,
        baseline_spread_pct=0.8,
        baseline_bandwidth_gbs=1800.0,
        baseline_fraction_of_peak=0.62,
    )


def user_text(**kwargs: object) -> str:
    messages = prompts.build_messages(task(), round_=2, index=3, candidates=4, **kwargs)  # type: ignore[arg-type]
    assert [m["role"] for m in messages] == ["system", "user"]
    return messages[1]["content"]


def test_file_context_has_includes_defines_helpers_and_launch_site() -> None:
    [kernel] = find_kernels(SAXPY_FILE)
    context = prompts.file_context(SAXPY_FILE, kernel)
    assert context.includes == ("#include <cstdio>",)  # cuda_runtime.h: host-side, implicit
    assert context.defines == ("#define BLOCK 256",)
    assert context.helpers == ("__device__ float scale(float a, float x) { return a * x; }",)
    assert context.launch_sites == ("saxpy<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(x, y, 2.5f, n);",)
    assert all("__global__" not in h for h in context.helpers)


def test_multiline_defines_and_commented_code_are_handled() -> None:
    text = (
        "#define MUL(a, b) \\\n  ((a) * (b))\n// __device__ int fake() { return 0; }\n"
        "__global__ void k(int* p) { p[0] = MUL(2, 3); }\n"
    )
    [kernel] = find_kernels(text)
    context = prompts.file_context(text, kernel)
    assert context.defines == ("#define MUL(a, b) \\\n  ((a) * (b))",)
    assert context.helpers == ()


def test_prompt_states_the_task_and_the_rules() -> None:
    system = prompts.SYSTEM_PROMPT
    assert "same grid, block" in system.lower() and "```cuda" in system
    assert "__device__" in system and "no host code" in system
    # what a reply may add (docs/design.md, "What an accepted winner may write")
    assert "is dropped unjudged" in system and "`__attribute__((constructor))`" in system
    assert "not `__host__ __device__`" in system and "`#ifndef __CUDA_ARCH__`" in system
    assert "bidirectional Unicode characters." in system
    text = user_text()
    assert "round 2, candidate 3 of 4" in text
    assert "__global__ void saxpy(const float* x, float* y, float a, int n)" in text


def test_prompt_has_spec_sizes_gpu_and_baseline() -> None:
    text = user_text()
    assert 'args.y = "inout float32[n]"' in text
    assert "case 2: n=1048576 (timed)" in text
    assert "compute capability 9.0 (sm_90), 132 SMs" in text
    assert "227 KiB opt-in" in text and "L2 cache: 50 MiB" in text
    assert "2900 GB/s" in text and "65536 registers" in text
    assert "12 registers/thread" in text and "0.1234 ms (±0.8%)" in text
    assert "62% of the copy bandwidth" in text


def test_feedback_shows_best_with_figures_and_failures_with_details() -> None:
    best = [
        prompts.Attempt(
            outcome(1, speedup=2.0, source=saxpy_candidate("best")), Resources(24, 8, 4, 1024, 0)
        )
    ]
    failures = [
        prompts.Attempt(outcome(2, "compile_error", message="line 3: error: x\n" * 60)),
        prompts.Attempt(
            outcome(3, "wrong_output", message="case 1 (n=1000): y[7] expected 2.0, got 0.0")
        ),
        prompts.Attempt(outcome(4, "slower", speedup=0.5), Resources(40, 0, 0, 0, 0)),
    ]
    text = user_text(best=best, failures=failures, profile="Bottleneck: memory-bandwidth-bound")
    assert "variant: best" in text and "2.00x the original's speed" in text
    assert "24 registers/thread, spills 8 B stores / 4 B loads, 1024 B static shared" in text
    assert (
        "[... log trimmed]" in text and text.count("line 3: error: x") == prompts.COMPILE_LOG_LINES
    )
    assert "wrong_output: case 1 (n=1000): y[7] expected 2.0, got 0.0" in text
    assert "correct but slower than the original (2.0000 ms, 0.50x); 40 registers/thread" in text
    assert "Bottleneck: memory-bandwidth-bound" in text


def test_only_the_latest_failures_are_shown() -> None:
    failures = [prompts.Attempt(outcome(i, "timeout", message=f"hang {i}")) for i in range(1, 11)]
    text = user_text(failures=failures)
    assert "hang 10" in text and "hang 5" in text and "hang 4" not in text


def test_top_correct_ranks_dedupes_and_limits() -> None:
    same = saxpy_candidate("same")
    outcomes = [
        outcome(1, speedup=1.5, source=same),
        outcome(2, speedup=1.5, source=same + "\n"),
        outcome(3, speedup=3.0),
        outcome(4, "wrong_output"),
        outcome(5, "slower", speedup=0.5),
        outcome(6, speedup=3.0, registers=8),
    ]
    ranked = top_correct(outcomes, 3)
    assert [o.index for o in ranked] == [6, 3, 1]


def test_required_speedup_is_at_least_two_percent_or_the_spread() -> None:
    def result(b: float, c: float) -> EvalResult:
        return EvalResult(
            "ok",
            "",
            1,
            baseline=Timing(1, b, 1, 1, 10),
            candidate=Timing(1, c, 1, 1, 10),
            speedup=1.0,
        )

    assert required_speedup(result(0.1, 0.1)) == 1.02
    assert abs(required_speedup(result(2.0, 3.0)) - 1.05) < 1e-12


def test_clean_candidate_drops_spec_block_and_known_includes() -> None:
    code = (
        "/* @cuda-llm\nsizes.n = [1]\n*/\n#include <cstdio>\n#include <cub/cub.cuh>\n"
        + saxpy_candidate("x")
    )
    cleaned = clean_candidate(code, SAXPY_FILE)
    assert "@cuda-llm" not in cleaned and "#include <cstdio>" not in cleaned
    assert "#include <cub/cub.cuh>" in cleaned and cleaned.endswith("}\n")


# -- the ncu profile section ---------------------------------------------------------------------

_NCU_HEADER = [
    "ID",
    "Process ID",
    "Process Name",
    "Host Name",
    "Kernel Name",
    "Context",
    "Stream",
    "Block Size",
    "Grid Size",
    "Device",
    "CC",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__time_duration.sum",
    "l1tex__t_sector_hit_rate.pct",
    "lts__t_sector_hit_rate.pct",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
]
_NCU_UNITS = [""] * 11 + ["%", "%", "nsecond", "%", "%", "%", "%"]
_NCU_ROW = [
    "0",
    "4242",
    "python3",
    "host",
    "saxpy",
    "1",
    "7",
    "(256, 1, 1)",
    "(65536, 1, 1)",
    "0",
    "9.0",
    "91.52",
    "91.60",
    "1,234,567",
    "0",
    "33.3",
    "12.75",
    "84.1",
]
NCU_CSV = (
    "==PROF== Connected to process 4242\n"
    + "\n".join(",".join(f'"{v}"' for v in row) for row in (_NCU_HEADER, _NCU_UNITS, _NCU_ROW))
    + "\n"
)


def test_ncu_csv_is_parsed_and_classified() -> None:
    from cuda_llm_lsp.evaluate.ncu_source import parse_raw_page
    from cuda_llm_lsp.fsr import profile

    metrics = profile.kernel_metrics(parse_raw_page(NCU_CSV))
    assert metrics[profile.DRAM] == 91.52 and metrics[profile.SM] == 12.75
    assert metrics[profile.DURATION] == 1234567.0
    result = profile.Profile(profile.classify(metrics), metrics)
    assert result.bottleneck == "memory-bandwidth-bound"
    text = result.summary()
    assert text.startswith("Bottleneck: memory-bandwidth-bound.")
    assert "DRAM bandwidth: 91.5%" in text and "L2 hit rate: 33.3%" in text
    assert "occupancy" not in text  # only the metrics that matter for this class
    assert "1234.57 us" in text


def test_bottleneck_classes() -> None:
    from cuda_llm_lsp.fsr.profile import DRAM, MEMORY, SM, classify

    assert classify({SM: 85.0, MEMORY: 40.0, DRAM: 30.0}) == "compute-bound"
    assert classify({SM: 70.0, MEMORY: 80.0}) == "memory-bandwidth-bound"
    assert classify({SM: 20.0, MEMORY: 25.0, DRAM: 20.0}) == "memory-latency-bound"
    assert classify({}) == "memory-latency-bound"


def test_garbage_ncu_output_gives_no_metrics() -> None:
    from cuda_llm_lsp.evaluate.ncu_source import parse_raw_page
    from cuda_llm_lsp.fsr.profile import kernel_class, kernel_metrics

    assert kernel_metrics(parse_raw_page("==ERROR== ERR_NVGPUCTRPERM - no permission\n")) == {}
    assert kernel_metrics(parse_raw_page("")) == {}
    assert kernel_class({}) is None


def test_profile_is_skipped_cleanly_without_ncu(monkeypatch: pytest.MonkeyPatch) -> None:
    from cuda_llm_lsp.evaluate import line_profile
    from cuda_llm_lsp.evaluate.types import KernelBinary
    from cuda_llm_lsp.fsr import profile
    from tests.support.fsr_fakes import saxpy_spec

    monkeypatch.setattr(line_profile, "ncu_path", lambda: None)
    binary = KernelBinary("saxpy", "saxpy", b"", "sm_90")
    note = profile.line_profile_text(binary, saxpy_spec(), None, line_profile.NcuProfiler())
    assert note is None


def test_template_helpers_keep_their_template_line() -> None:
    text = (
        "template <typename T>\n__device__ T twice(T v) { return v + v; }\n\n"
        "template <typename T, int B>\n__global__ void k(T* p) { p[0] = twice(p[0]); }\n\n"
        "void launch(float* p) { k<float, 128><<<1, 128>>>(p); }\n"
    )
    [kernel] = find_kernels(text)
    context = prompts.file_context(text, kernel)
    assert context.helpers == ("template <typename T>\n__device__ T twice(T v) { return v + v; }",)
    assert context.launch_sites and "k<float, 128><<<1, 128>>>(p);" in context.launch_sites[0]


def test_clean_candidate_drops_repeated_helpers_but_keeps_new_ones() -> None:
    code = (
        "__device__ float scale(float a,  float x) { return a * x; }\n\n"
        "__device__ float twice(float v) { return v + v; }\n\n" + saxpy_candidate("x")
    )
    cleaned = clean_candidate(code, SAXPY_FILE)
    assert "scale(float a" not in cleaned  # the file's own helper: would be a redefinition
    assert "__device__ float twice(float v)" in cleaned
    assert "variant: x" in cleaned
