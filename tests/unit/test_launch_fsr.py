"""A candidate's own launch in the FSR loop ([launch]): the block read from the raw reply, the
policy (`auto` / `keep` / `free`), the prompt's rule, the evaluator given the candidate's launch
(and re-validation too), `bad_launch` fed back, the JSON contract and the history.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cuda_llm_lsp.evaluate.recorded import RecordedEvaluator
from cuda_llm_lsp.fsr.history import RunHistory
from cuda_llm_lsp.fsr.launch import (
    KEEP_REASON,
    candidate_launch,
    launch_rule,
    placed_launch_block,
)
from cuda_llm_lsp.fsr.loop import optimize
from cuda_llm_lsp.fsr.types import OptimizeConfig, OptimizeRequest, OptimizeResult, RunStarted
from cuda_llm_lsp.source.spec.launch import LaunchConfig
from tests.support.fsr_fakes import SAXPY_FILE, FakeLlm, FakeToolchain, saxpy_candidate, saxpy_spec

BLOCK = '/* @cuda-llm launch\ngrid = "cdiv(n, 1024)"\nblock = 1024\n*/\n'
OWN = LaunchConfig(("cdiv(n, 1024)",), ("1024",), "0")
MACRO_FILE = SAXPY_FILE.replace(
    "saxpy<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(x, y, 2.5f, n);",
    "LAUNCH(saxpy, x, y, 2.5f, n);",
).replace(
    "#define BLOCK 256", "#define BLOCK 256\n#define LAUNCH(k, ...) k<<<4096, 256>>>(__VA_ARGS__)"
)
NO_SITE_FILE = SAXPY_FILE.replace("saxpy<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(x, y, 2.5f, n);", "")


def reply(marker: str, block: str = BLOCK) -> str:
    return block + saxpy_candidate(marker)


async def run(llm: FakeLlm, ev: RecordedEvaluator, text: str = SAXPY_FILE,
              **config: Any) -> OptimizeResult:  # fmt: skip
    history = config.pop("history", None)
    settings = {"rounds": 1, "candidates": 2, "profile": False, "repairs": 0} | config
    return await optimize(
        OptimizeRequest(file_text=text, kernel="saxpy", seed=7), OptimizeConfig(**settings), ev,
        llm, toolchain=FakeToolchain(), history=history,
    )  # fmt: skip


def evaluator() -> RecordedEvaluator:
    return RecordedEvaluator({
        "baseline": {"ms": 1.0, "spread_pct": 0.5},
        "candidates": [{"contains": "variant: own", "status": "ok", "ms": 0.25},
                       {"contains": "variant: plain", "status": "ok", "ms": 0.8}],
    })  # fmt: skip


def test_the_policy_decides_from_the_files_launch_sites() -> None:
    spec = saxpy_spec()
    assert launch_rule("auto", SAXPY_FILE, spec).allowed
    assert launch_rule("free", MACRO_FILE, spec).allowed
    keep = launch_rule("keep", SAXPY_FILE, spec)
    assert not keep.allowed and "do not add a `@cuda-llm launch` block" in keep.prompt_text()
    macro = launch_rule("auto", MACRO_FILE, spec)
    assert not macro.allowed and "cannot be rewritten safely" in macro.reason
    assert "keep the original launch configuration" in macro.prompt_text()
    assert macro.reason in macro.prompt_text()
    none = launch_rule("auto", NO_SITE_FILE, spec)
    assert not none.allowed and "no launch site" in none.reason


def test_the_block_is_read_from_the_raw_reply() -> None:
    spec = saxpy_spec()
    assert candidate_launch(reply("own"), "saxpy", spec) == OWN
    assert candidate_launch(saxpy_candidate("plain"), "saxpy", spec) is None
    bad = candidate_launch(reply("own", BLOCK.replace("cdiv(n,", "cdiv(rows,")), "saxpy", spec)
    assert isinstance(bad, str) and "rows" in bad


async def test_a_candidate_runs_with_its_own_launch_and_wins_with_it(tmp_path: Path) -> None:
    ev = evaluator()
    llm = FakeLlm({(1, 1): reply("own"), (1, 2): saxpy_candidate("plain")})
    history = RunHistory(tmp_path / "h.sqlite3")
    result = await run(llm, ev, history=history)
    assert result.accepted and result.best_launch == OWN, result.message
    user = llm.prompts[0].messages[1]["content"]
    assert "Launch: you may choose your own grid" in user and "size names: n" in user
    # every evaluate of the launch-block candidate (judging and re-validation) had its launch
    own = [s for (_, src), s in zip(ev.calls[1:], ev.launched, strict=True) if "own" in src]
    assert len(own) == 2 and all(s.grid == OWN.grid and s.block == OWN.block for s in own)
    plain = [s for (_, src), s in zip(ev.calls[1:], ev.launched, strict=True) if "plain" in src]
    assert plain and all(s.grid == ("cdiv(n, 256)",) for s in plain)
    data = result.to_json()
    assert data["launch"] == {"grid": ["cdiv(n, 1024)"], "block": ["1024"], "smem": "0"}
    by_index = {c["index"]: c["launch"] for c in data["candidates"]}
    assert by_index == {1: data["launch"], 2: None}
    assert result.run_id is not None
    records = {c.index: c.launch for c in history.candidates(result.run_id)}
    assert records == {1: OWN.describe(), 2: None}
    assert "@cuda-llm" not in (result.best_source or "")  # the block never reaches the kernel


async def test_with_keep_a_block_is_bad_launch_and_the_prompt_forbids_it() -> None:
    """[judge]: a block is never silently dropped: the candidate was written for a launch it
    would not get, so it is not judged under the original one."""
    ev = evaluator()
    llm = FakeLlm({(1, 1): reply("own"), (1, 2): saxpy_candidate("plain")})
    result = await run(llm, ev, launch="keep")
    assert result.best_launch is None and all(c.launch is None for c in result.candidates)
    assert all(s.grid == ("cdiv(n, 256)",) for s in ev.launched)
    assert "keep the original launch configuration" in llm.prompts[0].messages[1]["content"]
    first = next(c for c in result.candidates if c.index == 1)
    assert first.status == "bad_launch" and KEEP_REASON in first.message
    assert not any("own" in src for _, src in ev.calls)  # never judged under the original
    assert result.launch_fixed == KEEP_REASON and result.to_json()["launch_fixed"] == KEEP_REASON


async def test_auto_with_no_launch_site_keeps_the_launch_and_says_so_at_the_start() -> None:
    """A file with no launch site: its launches live elsewhere, so `auto` keeps the launch;
    the run's first event says so and why, the prompt offers no block, and a candidate with a
    block is `bad_launch` with that reason, not `wrong_output` under a launch it never had."""
    ev = evaluator()
    events: list[Any] = []
    llm = FakeLlm({(1, 1): reply("own"), (1, 2): saxpy_candidate("plain")})
    result = await optimize(
        OptimizeRequest(file_text=NO_SITE_FILE, kernel="saxpy", seed=7),
        OptimizeConfig(rounds=1, candidates=2, profile=False, repairs=0), ev, llm,
        toolchain=FakeToolchain(), on_event=events.append,
    )  # fmt: skip
    started = next(e for e in events if isinstance(e, RunStarted))
    assert started.launch.startswith("launch: fixed to the original (grid=cdiv(n, 256) block=256")
    assert started.launch_fixed is not None and "no launch site" in started.launch_fixed
    assert "no launch site" in started.launch and "--launch free" in started.launch
    user = llm.prompts[0].messages[1]["content"]
    assert "keep the original launch configuration" in user and "you may choose" not in user
    first = next(c for c in result.candidates if c.index == 1)
    assert first.status == "bad_launch", first.message
    assert "the launch is fixed for this run" in first.message
    assert "no launch site" in first.message and "without a launch block" in first.message
    assert not any("own" in src for _, src in ev.calls)
    assert result.accepted and result.to_json()["launch_fixed"] == started.launch_fixed


async def test_a_free_run_says_so_and_has_no_launch_fixed() -> None:
    events: list[Any] = []
    result = await optimize(
        OptimizeRequest(file_text=SAXPY_FILE, kernel="saxpy", seed=7),
        OptimizeConfig(rounds=1, candidates=1, profile=False, repairs=0), evaluator(),
        FakeLlm({(1, 1): saxpy_candidate("plain")}), toolchain=FakeToolchain(),
        on_event=events.append,
    )  # fmt: skip
    started = next(e for e in events if isinstance(e, RunStarted))
    assert started.launch_fixed is None and "may choose their own" in started.launch
    assert result.to_json()["launch_fixed"] is None


HELPER = "__device__ __forceinline__ float twice(float v) { return v + v; }\n\n"


async def test_the_only_block_above_the_helpers_is_used() -> None:
    ev = evaluator()
    misplaced = BLOCK + HELPER + saxpy_candidate("own", "y[i] = a * x[i] + twice(y[i]) - y[i];")
    llm = FakeLlm({(1, 1): misplaced, (1, 2): saxpy_candidate("plain")})
    result = await run(llm, ev)
    first = next(c for c in result.candidates if c.index == 1)
    assert first.status == "ok" and first.launch == OWN, first.message
    own = [s for (_, src), s in zip(ev.calls[1:], ev.launched, strict=True) if "own" in src]
    assert own and all(s.grid == OWN.grid and s.block == OWN.block for s in own)


async def test_two_blocks_are_bad_launch_saying_where_one_belongs() -> None:
    ev = evaluator()
    two = BLOCK + HELPER + BLOCK.replace("1024", "512") + saxpy_candidate("own")
    llm = FakeLlm({(1, 1): two, (1, 2): saxpy_candidate("plain")})
    result = await run(llm, ev)
    first = next(c for c in result.candidates if c.index == 1)
    assert first.status == "bad_launch"
    assert "2 `@cuda-llm launch` blocks" in first.message
    assert "directly above `__global__ ... saxpy(`" in first.message
    assert not any("own" in src for _, src in ev.calls)


def test_placed_launch_block_moves_the_only_one_and_keeps_code_intact() -> None:
    code = BLOCK + HELPER + saxpy_candidate("own")
    moved, problem = placed_launch_block(code, "saxpy")
    assert problem is None
    assert moved.startswith(HELPER.rstrip("\n"))
    assert moved.index(BLOCK) == moved.index('extern "C"') - len(BLOCK)
    assert sorted(moved.replace(BLOCK, "")) == sorted(code.replace(BLOCK, ""))
    assert placed_launch_block(reply("own"), "saxpy") == (reply("own"), None)
    assert placed_launch_block(saxpy_candidate("p"), "saxpy") == (saxpy_candidate("p"), None)


async def test_an_unusable_block_is_bad_launch_and_fed_back() -> None:
    ev = evaluator()
    bad = BLOCK.replace("cdiv(n,", "cdiv(rows,")
    llm = FakeLlm({(1, 1): reply("own", bad), (2, 1): saxpy_candidate("plain")})
    result = await run(llm, ev, rounds=2, candidates=1, patience=5)
    first = next(c for c in result.candidates if c.round == 1)
    assert first.status == "bad_launch" and "rows" in first.message
    assert not any("own" in src for _, src in ev.calls)  # never evaluated
    round2 = next(p for p in llm.prompts if p.round == 2).messages[1]["content"]
    assert "bad_launch" in round2 and "rows" in round2
