"""Per-line profile findings from real ncu output (captured on an H100 with
tests/data/ncu/capture.py), mapped onto planted.cu and its header; the profiler's refusals.

Every planted problem line (`// PLANT kind`) must carry its kind and every `// CLEAN kind` line
must not: the same markers the GPU test (tests/gpu/test_profile_gpu.py) checks on a live run.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.engine import Refusal, profile_in_file
from cuda_llm_lsp.evaluate import ncu_source
from cuda_llm_lsp.evaluate.candidate import build_binary, find_kernel
from cuda_llm_lsp.evaluate.line_profile import (
    LineProfile,
    NcuProfiler,
    ProfileError,
    Profiler,
    ProfileUnavailable,
    RecordedProfiler,
    profile_lines,
)
from cuda_llm_lsp.evaluate.types import KernelBinary
from cuda_llm_lsp.source.spec import parse_spec

DATA = Path(__file__).resolve().parents[1] / "data" / "ncu"
PLANTED = DATA / "planted.cu"
HEADER = DATA / "planted_helpers.cuh"
CAPTURED = (
    "transpose_naive", "transpose_header", "transpose_unpadded", "transpose_padded",
    "pick_local", "pick_fixed", "lane_branch", "warp_branch", "strided_gather",
)  # fmt: skip
ROOT = Path(__file__).resolve().parents[2]


def profile_named(
    text: str, path: Path | None, name: str, settings: Settings, profiler: Profiler
) -> LineProfile:
    """`profile_lines` on the kernel named `name` and its spec (the engine's gate finds them)."""
    kernel = find_kernel(text, name)
    assert kernel is not None
    spec, problems = parse_spec(kernel, text)
    assert spec is not None, problems
    return profile_lines(text, path, kernel, spec, settings, profiler)


def recorded() -> RecordedProfiler:
    return RecordedProfiler(
        {k: (DATA / f"{k}.source.csv", DATA / f"{k}.raw.csv") for k in CAPTURED}
    )


def markers(path: Path, first: int, last: int) -> dict[int, tuple[str, str]]:
    """1-based line -> ("PLANT" | "CLEAN", kind) for the marked lines in [first, last]."""
    found = {}
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        match = re.search(r"// (PLANT|CLEAN) (\w+)", line)
        if match and first <= number <= last:
            found[number] = (match.group(1), match.group(2))
    return found


def kernel_lines(name: str) -> tuple[int, int]:
    kernel = find_kernel(PLANTED.read_text(), name)
    assert kernel is not None
    return kernel.span.start.line + 1, kernel.span.end.line + 1


@pytest.fixture(scope="module")
def profiles() -> dict[str, object]:
    text = PLANTED.read_text()
    return {k: profile_named(text, PLANTED, k, Settings(), recorded()) for k in CAPTURED}


@pytest.mark.parametrize("kernel", CAPTURED)
def test_planted_lines_carry_their_kind_and_clean_lines_do_not(profiles, kernel: str) -> None:
    result = profiles[kernel]
    first, last = kernel_lines(kernel)
    in_file = {f.line: f.kinds for f in result.lines if f.file == str(PLANTED)}
    expected = markers(PLANTED, first, last)
    if kernel == "transpose_header":  # its store is in the header, at the header's own line
        in_header = {f.line: f.kinds for f in result.lines if f.file == str(HEADER.resolve())}
        assert "uncoalesced" in in_header[6]
    for line, (mark, kind) in expected.items():
        if mark == "PLANT":
            assert kind in in_file.get(line, ()), (kernel, line, in_file)
        else:
            assert kind not in in_file.get(line, ()), (kernel, line, in_file)
    planted_kinds = {kind for mark, kind in expected.values() if mark == "PLANT"}
    for line, kinds in in_file.items():  # a planted kind appears nowhere else in the kernel
        if planted_kinds & set(kinds):
            assert expected.get(line, ("", ""))[0] == "PLANT", (kernel, line, kinds)


@pytest.mark.parametrize("fixed", ["transpose_padded", "pick_fixed", "warp_branch"])
def test_fixed_versions_have_no_planted_problem(profiles, fixed: str) -> None:
    kinds = {k for f in profiles[fixed].lines for k in f.kinds}
    banned = {
        "transpose_padded": "bank_conflict",
        "pick_fixed": "local_memory",
        "warp_branch": "divergent_branch",
    }[fixed]
    assert banned not in kinds


def test_uncoalesced_store_figures_are_the_sectors_ncu_counted(profiles) -> None:
    store = next(f for f in profiles["transpose_naive"].lines if f.line == 23)
    assert store.metrics["global_sectors"] == 16777216
    assert store.metrics["global_sectors_ideal"] == 2097152
    assert store.metrics["global_sectors_excessive"] == 14680064
    assert store.metrics["excessive_share"] == pytest.approx(0.7778, abs=1e-3)
    assert "8.0× the ideal" in store.message and "78%" in store.message
    assert store.text == "out[(size_t)x * rows + y] = v;  // PLANT uncoalesced"


def test_bank_conflict_is_32_way_on_the_column_read_only(profiles) -> None:
    found = {f.line: f for f in profiles["transpose_unpadded"].lines}
    assert found[69].metrics["bank_conflict_ways"] == 32
    assert (
        found[69].metrics["shared_wavefronts"] == 32 * found[69].metrics["shared_wavefronts_ideal"]
    )
    assert 61 not in found or "bank_conflict" not in found[61].kinds


def test_divergent_branch_figures(profiles) -> None:
    branch = next(f for f in profiles["lane_branch"].lines if "divergent_branch" in f.kinds)
    assert branch.line == 154
    assert branch.metrics["threads_at_branch"] == 32
    assert branch.metrics["threads_after_branch"] == 16


def test_lines_are_sorted_by_stall_share_and_hotspots_name_a_reason(profiles) -> None:
    for result in profiles.values():
        shares = [f.stall_share for f in result.lines]
        assert shares == sorted(shares, reverse=True)
        for found in result.lines:
            if "stall_hotspot" in found.kinds:
                assert found.stall_share >= ncu_source.HOTSPOT_MIN_SHARE
                assert found.metrics["main_stall"] in ncu_source.STALL_REASONS


def test_summary_occupancy_limiter_throughput_and_roofline(profiles) -> None:
    naive = profiles["transpose_naive"]
    assert naive.device == "NVIDIA H100 80GB HBM3"
    s = naive.summary
    assert s.achieved_occupancy_pct == pytest.approx(78.24)
    assert s.theoretical_occupancy_pct == 100
    assert s.occupancy_limiter == "none"  # 100% theoretical: no launch limit binds
    assert s.limits["block size (warps)"] == 8 and s.limits["registers"] == 16
    assert s.sm_throughput_pct == pytest.approx(6.78)
    assert s.dram_throughput_pct == pytest.approx(12.9)
    assert s.bound == "memory-bound (L1/L2)"  # L2 at 85% of peak, DRAM at 13%
    assert s.duration_us == pytest.approx(291.872)
    branchy = profiles["lane_branch"].summary
    assert branchy.bound == "compute-bound"
    assert branchy.arithmetic_intensity == pytest.approx(303.6, abs=0.1)  # sinf/cosf FMAs
    assert "303.63 FLOP/byte" in branchy.line()


def test_header_line_is_shown_on_its_include_line(profiles) -> None:
    found = next(f for f in profiles["transpose_header"].lines if "uncoalesced" in f.kinds)
    assert found.file == str(HEADER.resolve()) and found.line == 6
    assert found.anchor == 3  # `#include "planted_helpers.cuh"`, 0-based
    assert found.text.startswith("out[(size_t)col * rows + row] = value;")


def test_json_contract(profiles) -> None:
    data = json.loads(json.dumps(profiles["transpose_naive"].to_json()))
    assert set(data) == {"kernel", "device", "summary", "lines"}
    assert data["kernel"] == "transpose_naive"
    assert {
        "achieved_occupancy_pct",
        "occupancy_limiter",
        "sm_throughput_pct",
        "dram_throughput_pct",
        "bound",
        "text",
    } <= set(data["summary"])
    for line in data["lines"]:
        assert {"file", "line", "kinds", "stall_share", "message", "metrics"} <= set(line)


def test_a_source_page_without_line_info_is_refused() -> None:
    with pytest.raises(ncu_source.NcuOutputError):
        ncu_source.parse_source_page('"Kernel Name","k",\n"Address","Source"\n')
    text = PLANTED.read_text()
    empty = RecordedProfiler({"transpose_naive": (DATA / "capture.json", DATA / "capture.json")})
    with pytest.raises(ProfileError, match="no per-line figures"):
        profile_named(text, PLANTED, "transpose_naive", Settings(), empty)


def test_a_kernel_without_spec_is_refused_by_the_one_gate() -> None:
    text = "__global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n"
    refused = asyncio.run(profile_in_file(text, None, "k", Settings(), recorded()))
    assert isinstance(refused, Refusal) and refused.kind == "no_spec"
    assert refused.draft and "@cuda-llm" in refused.draft


def _fake_ncu(tmp_path: Path, output: str) -> Path:
    """An `ncu` that prints what the real one prints in that situation, and fails."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "ncu"
    script.write_text(f"#!/bin/sh\ncat <<'END'\n{output}\nEND\nexit 1\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return bin_dir


def _binary() -> tuple[KernelBinary, object]:
    text = PLANTED.read_text()
    kernel = find_kernel(text, "transpose_naive")
    spec, _ = parse_spec(kernel, text)
    binary = build_binary(text, PLANTED, "transpose_naive", Settings(), arch="sm_90")
    assert isinstance(binary, KernelBinary)
    return binary, spec


PERMISSION = (
    "==PROF== Connected to process 123\n==ERROR== ERR_NVGPUCTRPERM - The user does not have "
    "permission to access NVIDIA GPU Performance Counters on the target device 0."
)
UNSUPPORTED = "==ERROR== Profiling is not supported on this device"


@pytest.mark.parametrize(
    ("output", "expected"),
    [(PERMISSION, "NVreg_RestrictProfilingToAdminUsers"), (UNSUPPORTED, "does not support")],
)
def test_counter_permission_and_unsupported_gpu_are_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, output: str, expected: str
) -> None:
    monkeypatch.setenv("PATH", f"{_fake_ncu(tmp_path, output)}{os.pathsep}{os.environ['PATH']}")
    binary, spec = _binary()
    with pytest.raises(ProfileUnavailable, match=expected):
        NcuProfiler().capture(binary, spec, DATA)


def test_cancel_ends_ncu_and_what_it_runs_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cancelled profile must not keep ncu (and the kernel it profiles) running: the job
    holds the GPU gate meanwhile."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    pid_file = tmp_path / "child.pid"
    script = bin_dir / "ncu"  # a profiler that runs a long child of its own, as ncu does
    script.write_text(f"#!/bin/sh\nsleep 60 &\necho $! > {pid_file}\nwait\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    binary, spec = _binary()
    profiler = NcuProfiler()
    outcome: list[BaseException] = []

    def capture() -> None:
        try:
            profiler.capture(binary, spec, DATA)
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=capture)
    started = time.monotonic()
    worker.start()
    deadline = time.monotonic() + 20
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    profiler.cancel()
    worker.join(10)
    assert not worker.is_alive() and time.monotonic() - started < 15
    assert isinstance(outcome[0], ProfileError) and "cancelled" in str(outcome[0])
    child = Path(f"/proc/{int(pid_file.read_text())}/stat")
    time.sleep(0.2)  # killed: gone, or a zombie waiting for whoever inherited it to reap it
    assert not child.exists() or child.read_text().rsplit(")", 1)[1].split()[0] == "Z"


def test_the_loops_profile_runs_ncu_once_and_a_cancel_ends_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The FSR loop profiles through the same cancellable runner as Profile: one ncu run per
    profile (no second run for the kernel-level class), stopped by the run's token."""
    from cuda_llm_lsp.cancel import CancelToken
    from cuda_llm_lsp.fsr.toolchain import DefaultToolchain

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    runs = tmp_path / "runs"
    script = bin_dir / "ncu"  # notes each run, then profiles "for a long time"
    script.write_text(f"#!/bin/sh\necho run >> {runs}\nsleep 60 &\nwait\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    binary, spec = _binary()
    token = CancelToken()
    notes: list[str | None] = []
    worker = threading.Thread(
        target=lambda: notes.append(DefaultToolchain().profile(binary, spec, DATA, token))
    )
    started = time.monotonic()
    worker.start()
    deadline = time.monotonic() + 20
    while not runs.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    token.cancel()
    worker.join(10)
    assert not worker.is_alive() and time.monotonic() - started < 15
    assert notes == [None]  # cancelled: no profile, and no fallback run
    assert runs.read_text().splitlines() == ["run"]


def test_without_ncu_the_profiler_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ProfileUnavailable, match="ncu"):
        NcuProfiler().arch(Settings())


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cuda_llm_lsp.cli", "profile", *args],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )


@pytest.fixture
def recording(tmp_path: Path) -> Path:
    path = tmp_path / "outcomes.json"
    profiles = {
        k: {"source": str(DATA / f"{k}.source.csv"), "raw": str(DATA / f"{k}.raw.csv")}
        for k in CAPTURED
    }
    path.write_text(json.dumps({"profiles": profiles}))
    return path


def test_cli_json_from_recorded_ncu_output(recording: Path) -> None:
    done = _cli(
        str(PLANTED),
        "--kernel",
        "transpose_unpadded",
        "--format",
        "json",
        env={"CUDA_LLM_EVALUATOR": f"recorded:{recording}"},
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["kernel"] == "transpose_unpadded" and data["device"].startswith("NVIDIA H100")
    assert [line["line"] for line in data["lines"] if "bank_conflict" in line["kinds"]] == [69]


def test_cli_text_names_file_line_and_kinds(recording: Path) -> None:
    done = _cli(
        str(PLANTED), "--kernel", "pick_local", env={"CUDA_LLM_EVALUATOR": f"recorded:{recording}"}
    )
    assert done.returncode == 0, done.stderr
    assert f"{PLANTED}:119: local_memory" in done.stdout


def test_cli_without_ncu_exits_3_with_one_message(tmp_path: Path) -> None:
    done = _cli(
        str(PLANTED),
        "--kernel",
        "transpose_naive",
        "--format",
        "json",
        env={"PATH": str(tmp_path), "CUDA_LLM_EVALUATOR": ""},
    )
    assert done.returncode == 3
    data = json.loads(done.stdout)
    assert set(data) == {"error", "exit_code"} and "ncu" in data["error"]


def test_cli_unknown_kernel_is_a_usage_error() -> None:
    done = _cli(str(PLANTED), "--kernel", "nope")
    assert done.returncode == 2 and "no kernel 'nope'" in done.stderr


def test_template_instance_lines_are_the_templates_lines(profiles) -> None:
    """strided_gather<33> (mangled entry) inlines gather_at<33>: its load is the template's line."""
    found = {f.line: f.kinds for f in profiles["strided_gather"].lines}
    assert "uncoalesced" in found[184]
    assert "uncoalesced" not in found.get(199, ())


def test_the_limiter_is_named_below_full_theoretical_occupancy() -> None:
    raw = {
        "sm__maximum_warps_per_active_cycle_pct": "75",
        "launch__occupancy_limit_registers": "6",
        "launch__occupancy_limit_warps": "8",
        "launch__occupancy_limit_shared_mem": "1,024",
        "sm__warps_active.avg.pct_of_peak_sustained_active": "66.1",
    }
    s = ncu_source.summary(raw)
    assert s.occupancy_limiter == "registers"
    assert "occupancy 66% of 75% theoretical (limited by registers)" in s.line()


@pytest.mark.parametrize(("gpus", "device"), [(None, "0"), ("all", "0"), ("2,3", "2"), ("1", "1")])
def test_the_profile_runs_on_the_gpu_the_selection_names_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gpus: str | None, device: str
) -> None:
    """`cudaLlm.gpus` / `--gpus` reach ncu's one-shot worker as its `--device` (was: always GPU
    0, issue 41). A fake ncu records the command it is given."""
    from cuda_llm_lsp.engine import make_profiler

    monkeypatch.delenv("CUDA_LLM_EVALUATOR", raising=False)
    args_file = tmp_path / "args"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "ncu"
    script.write_text(f'#!/bin/sh\nfor a in "$@"; do echo "$a"; done > {args_file}\nexit 1\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    binary, spec = _binary()
    with pytest.raises(ProfileError):  # no report: the fake profiled nothing
        make_profiler(gpus).capture(binary, spec, DATA)
    argv = args_file.read_text().split("\n")
    assert argv[argv.index("--device") + 1] == device, argv


def test_a_bad_gpu_selection_is_refused_by_the_profile_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cuda_llm_lsp.cli", "profile", "tests/data/ncu/planted.cu",
         "--kernel", "transpose_naive", "--gpus", "first"],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT), "CUDA_LLM_EVALUATOR": ""},
    )  # fmt: skip
    assert done.returncode == 2 and "gpus must be 'all' or a list" in done.stderr, done.stderr
