"""The FSR loop with per-line profiles: round 1's prompt carries the original's top lines (line
text, kind, figure) from ncu output captured on an H100; the result's JSON and the history keep
them. Real NVRTC builds, recorded GPU outcomes, an in-process model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_llm_lsp.cli import main
from cuda_llm_lsp.evaluate.line_profile import RecordedProfiler
from cuda_llm_lsp.evaluate.recorded import RecordedEvaluator
from cuda_llm_lsp.evaluate.types import KernelBinary
from cuda_llm_lsp.fsr.history import RunHistory
from cuda_llm_lsp.fsr.loop import optimize
from cuda_llm_lsp.fsr.profile import line_profile_text
from cuda_llm_lsp.fsr.toolchain import DefaultToolchain
from cuda_llm_lsp.fsr.types import OptimizeConfig, OptimizeRequest
from cuda_llm_lsp.source.spec import TestSpec
from tests.support.fsr_fakes import FakeLlm

NCU = Path(__file__).resolve().parents[1] / "data" / "ncu"
PLANTED = NCU / "planted.cu"
CANDIDATE = """```cuda
extern "C" __global__ void transpose_naive(const float* in, float* out, int rows, int cols) {
  int x = blockIdx.x * 32 + threadIdx.x;  // variant: same
  int y = blockIdx.y * 8 + threadIdx.y;
  if (x < cols && y < rows) out[(size_t)x * rows + y] = in[(size_t)y * cols + x];
}
```"""


class CapturedNcu(DefaultToolchain):
    """The real toolchain, with ncu's run replaced by its output captured on the H100."""

    def profile(
        self, binary: KernelBinary, spec: TestSpec, spec_dir: Path | None, cancel: object
    ) -> str | None:
        return line_profile_text(
            binary, spec, spec_dir, RecordedProfiler.from_recording(NCU / "recording.json")
        )


async def test_round_one_prompt_carries_the_originals_top_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    llm = FakeLlm(default=CANDIDATE)
    history = RunHistory(tmp_path / "history.sqlite3")
    result = await optimize(
        OptimizeRequest(
            file_text=PLANTED.read_text(), kernel="transpose_naive", path=PLANTED, seed=3
        ),
        OptimizeConfig(rounds=1, candidates=1, profile=True, repairs=0),
        RecordedEvaluator({"baseline": {"ms": 0.29}}),
        llm,
        toolchain=CapturedNcu(),
        history=history,
    )
    first = llm.prompts[0].messages[1]["content"]
    assert "Nsight Compute on the original:\nKernel: 29" in first
    assert (
        "- kernel line 6 `out[(size_t)x * rows + y] = v;  // PLANT uncoalesced`: uncoalesced "
        "global access (16,777,216 L2 sectors, 8.0x the ideal); 31% of warp stalls, mostly long_sb"
    ) in first
    assert "bottleneck (from the roofline)" not in first  # the line figures replace it
    original = result.to_json()["profile_lines"]["original"]["lines"]
    assert original[0]["kinds"] == ["uncoalesced", "stall_hotspot"]
    assert original[0]["line"] == 23 and original[0]["kernel_line"] == 6
    assert result.run_id is not None
    kept = history.profile_lines(result.run_id)
    assert kept is not None and kept["original"]["lines"][0]["line"] == 23
    monkeypatch.setenv("CUDA_LLM_DATA_DIR", str(tmp_path))  # `cuda-llm history` reads it back
    capsys.readouterr()
    assert main(["history", "--run", str(result.run_id), "--format", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)["runs"][0]["profile_lines"]
    assert shown["original"]["lines"][0]["text"].startswith("out[(size_t)x * rows + y] = v;")
