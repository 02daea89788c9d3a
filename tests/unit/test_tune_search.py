"""The tuner's strategies against the recorded evaluator (per-configuration outcomes matched by
the binary's -D defines): exhaustive search, random sampling plus local refinement, launches the
device cannot run, compile errors, wrong configurations, finalists re-checked, budget, cancel,
and the best values written back as defaults."""

from __future__ import annotations

import itertools
import threading
from typing import Any

import pytest

from cuda_llm_lsp.cancel import CancelToken
from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.evaluate.candidate import CandidateRejected
from cuda_llm_lsp.evaluate.recorded import RecordedEvaluator
from cuda_llm_lsp.evaluate.types import KernelBinary
from cuda_llm_lsp.source.kernels import find_kernels
from cuda_llm_lsp.source.spec import TestSpec, parse_spec
from cuda_llm_lsp.source.spec.launch import parse_launch_block
from cuda_llm_lsp.source.spec.tunables import Tunables
from cuda_llm_lsp.tune.candidate import cut_short, feedback, pinned_source
from cuda_llm_lsp.tune.edit import tuned_text
from cuda_llm_lsp.tune.search import TuneOptions, TuneRequest, tune_kernel

SOURCE = """\
#ifndef BLOCK
#define BLOCK 128
#endif
/* @cuda-llm
sizes.n = [1, 1000, 100000]
tune.BLOCK = [64, 128, 256, 512, 2048]
tune.ITEMS = [1, 2, 4]
restrict = ["BLOCK * ITEMS <= 4096"]
grid = "cdiv(n, BLOCK * ITEMS)"
block = "min(BLOCK, 2048)"
args.x = "in float32[n]"
args.y = "out float32[n]"
args.n = "n"
*/
__global__ void scale(const float* x, float* y, int n) { }
"""


def parsed(text: str = SOURCE) -> tuple[Any, TestSpec]:
    (kernel,) = find_kernels(text)
    spec, errors = parse_spec(kernel, text)
    assert spec is not None, errors
    return kernel, spec


class FakeBuild:
    """Stands for NVRTC: a binary carrying the configuration's -D (what the recording matches)."""

    def __init__(self, fail: set[tuple[int, ...]] = frozenset()) -> None:  # type: ignore[assignment]
        self.fail = fail
        self.built: list[dict[str, int]] = []
        self.lock = threading.Lock()

    def __call__(self, config: dict[str, int]) -> KernelBinary | CandidateRejected:
        with self.lock:
            self.built.append(config)
        if tuple(config.values()) in self.fail:
            return CandidateRejected("compile_error", "line 9: too many resources requested")
        return KernelBinary(
            "scale",
            "scale",
            b"",
            "sm_90",
            kernel_source=SOURCE,
            defines=Tunables.compile_defines(config),
        )


def recording(
    times: dict[tuple[int, ...], float], names: tuple[str, ...], extra: list[dict[str, Any]] = ()
) -> dict[str, Any]:  # type: ignore[assignment]
    entries = list(extra) + [
        {"defines": dict(zip(names, key, strict=True)), "status": "ok", "ms": ms}
        for key, ms in times.items()
    ]
    default = min(times, key=lambda k: abs(k[0] - 128) + sum(k[1:]))  # (128, 1) of SOURCE
    return {"baseline": {"ms": times[default]}, "candidates": entries}


def request(spec: TestSpec, text: str = SOURCE) -> TuneRequest:
    return TuneRequest(text, "scale", spec, Settings())


def small_times() -> dict[tuple[int, ...], float]:
    # fastest at BLOCK=256, ITEMS=4 (0.25 ms); the default (128, 1) takes 1.25 ms
    return {(b, i): abs(b - 256) / 512 + 1.0 / i for b in (64, 128, 256, 512) for i in (1, 2, 4)}


def test_exhaustive_measures_every_allowed_configuration_and_rechecks_finalists() -> None:
    _, spec = parsed()
    evaluator = RecordedEvaluator(recording(small_times(), ("BLOCK", "ITEMS")))
    build = FakeBuild()
    progress: list[int] = []
    result = tune_kernel(
        request(spec),
        evaluator,
        TuneOptions(max_points=50, finalists=2),
        build=build,
        on_progress=lambda p: progress.append(p.done),
        on_planned=lambda n: progress.append(-n),
    )
    assert result.strategy == "exhaustive" and result.space_size == 15
    # 2048 x 4 is restricted away; 2048 x 1 and 2048 x 2 exceed the device's 1024 threads;
    # the plan (14) is heard before anything is measured
    assert len(result.measured) == 14 and progress == [-14, *range(1, 15)]
    too_big = [m for m in result.measured if m.config["BLOCK"] == 2048]
    assert [m.status for m in too_big] == ["launch_error"] * 2
    assert "1024" in too_big[0].message
    assert all(c["BLOCK"] != 2048 for c in build.built)  # never compiled
    default = result.default_result  # measured like the others: against itself, 1x
    assert default is not None and default.config == {"BLOCK": 128, "ITEMS": 1}
    assert default.speedup == pytest.approx(1.0)
    assert result.best is not None and result.best.config == {"BLOCK": 256, "ITEMS": 4}
    assert result.best.finalist and result.best.speedup == pytest.approx(5.0)
    assert result.spread == pytest.approx((0.5 + 1.0) / 0.25)  # (512, 1) over (256, 4)
    assert sum(m.finalist for m in result.measured) == 2
    # 12 screened + 2 finalists, each with its own launch; the oracle keeps the default's
    assert len(evaluator.calls) == 14
    launched = {
        tuple(s.template_args[n] for n in ("BLOCK", "ITEMS")): s for s in evaluator.launched
    }
    assert launched[("512", "2")].cases()[-1].grid[0] == 98
    assert launched[("512", "2")].cases()[-1].block[0] == 512
    assert result.stopped is None and result.default_result is not None


def test_failing_and_uncompilable_configurations_are_reported_not_chosen() -> None:
    _, spec = parsed()
    wrong = {
        "defines": {"BLOCK": 256, "ITEMS": 4},
        "status": "wrong_output",
        "message": "case 2 (n=100000): y[99999] expected 1.0, got 0.0",
    }
    evaluator = RecordedEvaluator(recording(small_times(), ("BLOCK", "ITEMS"), [wrong]))
    result = tune_kernel(
        request(spec), evaluator, TuneOptions(max_points=50), build=FakeBuild(fail={(256, 2)})
    )
    by_config = {tuple(m.config.values()): m for m in result.measured}
    assert by_config[(256, 4)].status == "wrong_output"
    assert by_config[(256, 2)].status == "compile_error"
    assert result.best is not None and result.best.config == {"BLOCK": 128, "ITEMS": 4}


def test_a_finalist_that_fails_on_new_inputs_is_not_the_best() -> None:
    _, spec = parsed()
    flaky = {
        "defines": {"BLOCK": 256, "ITEMS": 4},
        "status": "ok",
        "ms": 0.25,
        "later": {"status": "wrong_output", "message": "case 1: new inputs"},
    }
    evaluator = RecordedEvaluator(recording(small_times(), ("BLOCK", "ITEMS"), [flaky]))
    result = tune_kernel(
        request(spec), evaluator, TuneOptions(max_points=50, finalists=3), build=FakeBuild()
    )
    rechecked = next(m for m in result.measured if m.config == {"BLOCK": 256, "ITEMS": 4})
    assert rechecked.finalist and rechecked.status == "wrong_output"
    assert result.best is not None and result.best.config != {"BLOCK": 256, "ITEMS": 4}
    assert result.best.speedup == pytest.approx(1.25 / (128 / 512 + 0.25))


BIG = """\
/* @cuda-llm
sizes.n = [1, 1000, 100000]
tune.BX = [8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120, 128]
tune.BY = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]
tune.UNROLL = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]
restrict = ["BX * BY <= 1024"]
grid = "cdiv(n, BX * BY)"
block = ["BX", "BY"]
args.x = "in float32[n]"
args.y = "out float32[n]"
args.n = "n"
*/
__global__ void scale(const float* x, float* y, int n) { }
"""


def big_times() -> dict[tuple[int, ...], float]:
    """A smooth landscape with its one optimum at (72, 6, 11), none of them a listed first."""
    return {
        (bx, by, u): 0.1 + ((bx - 72) / 64) ** 2 + ((by - 6) / 8) ** 2 + ((u - 11) / 8) ** 2
        for bx, by, u in itertools.product(range(8, 129, 8), range(1, 17), range(1, 17))
        if bx * by <= 1024
    }


def test_sampling_with_local_refinement_finds_the_optimum_of_a_large_space() -> None:
    _, spec = parsed(BIG)
    times = big_times()
    evaluator = RecordedEvaluator(recording(times, ("BX", "BY", "UNROLL")))
    build = FakeBuild()
    options = TuneOptions(max_points=120, sample_fraction=0.5, finalists=3, seed=1)
    result = tune_kernel(request(spec, BIG), evaluator, options, build=build)
    assert result.strategy == "sample" and result.space_size == 4096
    assert len(times) > 3000 and len(result.measured) <= 120
    assert len({tuple(c.values()) for c in build.built if c}) == len(result.measured)
    assert result.best is not None and result.best.config == {"BX": 72, "BY": 6, "UNROLL": 11}
    again = tune_kernel(
        request(spec, BIG),
        RecordedEvaluator(recording(times, ("BX", "BY", "UNROLL"))),
        options,
        build=FakeBuild(),
    )
    seen = sorted(tuple(m.config.values()) for m in result.measured)
    assert sorted(tuple(m.config.values()) for m in again.measured) == seen  # seeded


def test_the_budget_stops_the_search_and_keeps_what_was_measured() -> None:
    _, spec = parsed(BIG)
    evaluator = RecordedEvaluator(recording(big_times(), ("BX", "BY", "UNROLL")))
    ticks = itertools.count()
    result = tune_kernel(
        request(spec, BIG),
        evaluator,
        TuneOptions(max_points=200, budget_s=10.0, finalists=1),
        build=FakeBuild(),
        clock=lambda: float(next(ticks)),
    )
    assert result.stopped == "budget"
    assert 0 < len(result.measured) < 20
    assert result.best is not None and result.best.finalist  # finalists re-checked after it
    assert not cut_short(result)


def test_a_search_cut_off_before_measuring_anything_is_cut_short_not_failed() -> None:
    _, spec = parsed(BIG)
    evaluator = RecordedEvaluator(recording(big_times(), ("BX", "BY", "UNROLL")))
    planned: list[int] = []
    result = tune_kernel(
        request(spec, BIG),
        evaluator,
        TuneOptions(max_points=20, budget_s=0.0),
        build=FakeBuild(),
        on_planned=planned.append,
    )
    assert result.stopped == "budget" and result.measured == () and result.best is None
    assert planned == [20] and cut_short(result)
    assert feedback(result).endswith("It ranks with its default configuration, as judged.")


def test_cancel_stops_the_run_in_flight() -> None:
    _, spec = parsed()
    slow = [{"defines": {"ITEMS": 2}, "status": "ok", "ms": 0.5, "delay_s": 30}]
    evaluator = RecordedEvaluator(recording(small_times(), ("BLOCK", "ITEMS"), slow))
    cancel = CancelToken()

    def on_progress(progress: Any) -> None:
        if progress.done == 2:  # the run is under way: the user presses Ctrl-C
            cancel.cancel()
            threading.Timer(0.2, evaluator.cancel).start()

    result = tune_kernel(
        request(spec),
        evaluator,
        TuneOptions(max_points=50),
        build=FakeBuild(),
        on_progress=on_progress,
        cancel=cancel,
    )
    assert result.stopped == "cancelled"
    assert len(result.measured) < 14 and result.best is None


def test_the_best_values_become_the_defines_and_the_spec_list_order() -> None:
    text = SOURCE.replace(
        "#ifndef BLOCK\n#define BLOCK 128\n#endif\n",
        "#ifndef BLOCK\n#define BLOCK 128  // threads\n#endif\n",
    )
    kernel, spec = parsed(text)
    edit = tuned_text(text, kernel, spec, {"BLOCK": 256, "ITEMS": 4})
    assert "#define BLOCK 256  // threads\n" in edit.text
    assert "tune.ITEMS = [4, 1, 2]\n" in edit.text and edit.notes == ()
    (again,) = find_kernels(edit.text)
    spec2, errors = parse_spec(again, edit.text)
    assert spec2 is not None and spec2.tunables is not None, errors
    assert spec2.tunables.default == {"BLOCK": 256, "ITEMS": 4}
    assert tuned_text(text, kernel, spec, spec.tunables.default).text == text  # type: ignore[union-attr]


ORIGINAL = """\
/* @cuda-llm
sizes.n = [1, 1000, 100000]
grid = "cdiv(n, 256)"
block = 256
args.x = "in float32[n]"
args.y = "out float32[n]"
args.n = "n"
*/
__global__ void scale(const float* x, float* y, int n) { }
"""
CANDIDATE = """\
#ifndef TILE
#define TILE 256
#endif
/* @cuda-llm launch
tune.TILE = [128, 256, 512]
tune.ITEMS = [1, 4]
grid = "cdiv(n, TILE * ITEMS)"
block = "TILE"
*/
__global__ void scale(const float* x, float* y, int n) { /* variant: tiled */ }
"""


def test_a_candidate_is_tuned_against_the_original_and_the_model_told_the_result() -> None:
    _, spec = parsed(ORIGINAL)
    original = KernelBinary("scale", "scale", b"", "sm_90", kernel_source=ORIGINAL)
    (kernel,) = find_kernels(CANDIDATE)
    launch, errors = parse_launch_block(kernel, spec, CANDIDATE)  # as the loop reads it
    assert launch is not None and launch.tunables is not None, errors
    made = TuneRequest(
        ORIGINAL,
        "scale",
        spec,
        Settings(),
        kernel_source=CANDIDATE,
        tuned_spec=launch.applied_to(spec),
        baseline=original,
    )
    times = {(t, i): 0.2 + abs(t - 512) / 1024 + 0.1 / i for t in (128, 256, 512) for i in (1, 4)}
    outcomes = recording(times, ("TILE", "ITEMS"))
    outcomes["baseline"] = {"ms": 1.0}
    evaluator = RecordedEvaluator(outcomes)
    result = tune_kernel(made, evaluator, TuneOptions(), build=FakeBuild())
    assert result.default == {"TILE": 256, "ITEMS": 1}  # its #define, the first ITEMS
    assert result.best is not None and result.best.config == {"TILE": 512, "ITEMS": 4}
    assert result.best.speedup == pytest.approx(1 / 0.225)  # against the original's 1.0 ms
    # every configuration with its own launch, the original's spec for the oracle
    assert {s.cases()[-1].grid[0] for s in evaluator.launched} >= {782, 49, 391}
    said = feedback(result)
    assert said.startswith("Tuned 6 configuration(s) of your tunables (exhaustive search of 6)")
    assert "Best: TILE=512 ITEMS=4, 0.225 ms (4.44x the original)" in said
    assert "your default TILE=256 ITEMS=1: 0.55 ms" in said
    assert "slowest correct / fastest: 3.00x" in said  # (128, 1): 0.675 ms
    best_text = pinned_source(made, result.best.config)
    assert best_text is not None and "#define TILE 512\n" in best_text
    # no #define for ITEMS: one added (guarded) above the block, so the text compiles without -D
    assert "#ifndef ITEMS\n#define ITEMS 4\n#endif\n/* @cuda-llm launch" in best_text
    assert "tune.ITEMS = [1, 4]\n" in best_text
    (again,) = find_kernels(best_text)
    config, errors = parse_launch_block(again, spec, best_text)
    assert config is not None and config.tunables is not None, errors
    assert config.tunables.default == {"TILE": 512, "ITEMS": 4}
