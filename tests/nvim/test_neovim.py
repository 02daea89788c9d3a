"""Real headless Neovim 0.7+ with the README's Lua snippet (docs/neovim.lua).

1. A `.cu` file with a device-code error on line 9: the diagnostic comes back at that line.
2. On a kernel the code-action menu offers Optimize and Benchmark; after an optimize run (scripted
   LLM on 127.0.0.1, recorded GPU outcomes) Accept applies the edit to the buffer, and one undo
   restores the original. The same for a winner that brings its own launch: the kernel, the
   spec's grid/block and both launch sites change in one undo step.
3. Clicking the resources lens (`vim.lsp.codelens.run`) shows the kernel's summary.
4. `K` on a kernel's name shows the hover (the snippet maps it; Neovim's own `K` opens `man`), and
   an empty `vim.g.cuda_llm_settings` starts the server without a warning.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cuda_llm_lsp.source.kernels import find_kernels
from cuda_llm_lsp.source.spec import parse_spec
from tests.lsp.conftest import DATA, ROOT, SERVERS, server_env
from tests.lsp.test_editor_flow import FAST
from tests.support.fake_capture import SCALE
from tests.support.scripted_llm import ScriptedLlmServer, kernel_reply

NVIM = shutil.which("nvim")
HERE = Path(__file__).parent


def _nvim_version() -> tuple[int, int]:
    if NVIM is None:
        return (0, 0)
    first = subprocess.run([NVIM, "--version"], capture_output=True, text=True).stdout
    found = re.search(r"NVIM v(\d+)\.(\d+)", first)
    return (int(found[1]), int(found[2])) if found else (0, 0)


pytestmark = pytest.mark.skipif(
    _nvim_version() < (0, 7), reason="needs Neovim 0.7+ on PATH (Debian: apt-get install neovim)"
)


def run_scenario(
    tmp_path: Path,
    scenario: str,
    file: Path,
    command: list[str],
    settings: dict[str, Any] | None,
    **extra: str,
) -> dict[str, Any]:
    work = tmp_path / file.name
    shutil.copy(file, work)
    out = tmp_path / "result.json"
    env = server_env(
        CUDA_LLM_LSP_CMD=json.dumps(command),
        CUDA_LLM_REPO=str(ROOT),
        CUDA_LLM_TEST_SCENARIO=scenario,
        CUDA_LLM_TEST_OUT=str(out),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        XDG_DATA_HOME=str(tmp_path / "share"),
        XDG_STATE_HOME=str(tmp_path / "state"),
    )
    env.update(extra)
    if settings is not None:
        env["CUDA_LLM_SETTINGS"] = json.dumps(settings)
    argv = [
        NVIM or "nvim",
        "--headless",
        "-n",
        "-i",
        "NONE",
        "-u",
        str(HERE / "init.lua"),
        str(work),
        "-c",
        f"luafile {HERE / 'scenario.lua'}",
    ]
    try:
        done = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, timeout=240)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"Neovim did not finish: {exc.stderr!r}") from exc
    assert out.exists(), f"no result; stderr: {done.stderr.decode(errors='replace')[-2000:]}"
    return json.loads(out.read_text(encoding="utf-8"))


def test_device_error_comes_back_at_line_9(tmp_path: Path) -> None:
    result = run_scenario(
        tmp_path,
        "diagnostics",
        DATA / "broken.cu",
        [sys.executable, "-m", "cuda_llm_lsp"],
        {"debounceMs": 50},
    )
    assert result["attached"] is True
    errors = [d for d in result["diagnostics"] if d["severity"] == 1]
    assert len(errors) == 1, result
    assert errors[0]["lnum"] == 8  # line 9
    assert "undefined_factor" in errors[0]["message"]
    assert all(4 <= d["lnum"] <= 10 for d in result["diagnostics"])  # nothing on host lines


@pytest.mark.parametrize("trusted", [True, False], ids=["trusted", "untrusted"])
def test_the_snippet_starts_the_server_outside_the_project_and_says_its_trust(
    tmp_path: Path, trusted: bool
) -> None:
    """Issue 36: Neovim starts its server in its own cwd, the project (`cmd_cwd` unset), where
    `python -m cuda_llm_lsp` runs the repository's `cuda_llm_lsp.py`; and sent no trust."""
    mark = tmp_path.parent / f"{tmp_path.name}-imported"
    for name in ("cuda_llm_lsp", "argparse", "logging"):
        (tmp_path / f"{name}.py").write_text(f"open({str(mark)!r}, 'a').write({name!r})\n")
    outside = tmp_path.parent / f"{tmp_path.name}-include"  # outside the project root
    outside.mkdir()
    (outside / "factor.cuh").write_text("__device__ const float undefined_factor = 3.0f;\n")
    source = tmp_path.parent / f"{tmp_path.name}-k.cu"
    source.write_text(
        '#include "factor.cuh"\n'
        "__global__ void scale(float* y) { y[0] = 2.0f * undefined_factor; }\n"
        "__global__ void other(float* y) { y[0] = missing_thing; }\n"
    )
    settings = {"debounceMs": 50, "includePaths": [str(outside)]}
    result = run_scenario(
        tmp_path,
        "launch",
        source,
        [sys.executable, "-m", "cuda_llm_lsp"],
        settings,
        **({} if trusted else {"CUDA_LLM_TRUSTED": "false"}),
    )
    assert result["attached"] is True
    assert not mark.exists(), mark.read_text()
    assert result["cmd_cwd"].endswith("/cuda-llm-lsp"), result["cmd_cwd"]
    assert not result["cmd_cwd"].startswith(str(tmp_path))
    assert result["safe_path"] == "1"
    assert result["trusted"] is trusted
    errors = {d["lnum"]: d["message"] for d in result["diagnostics"] if d["severity"] == 1}
    assert "missing_thing" in errors.get(2, ""), result["diagnostics"]
    if trusted:
        assert 0 not in errors and 1 not in errors, result["diagnostics"]
    else:
        assert "cannot find include file" in errors.get(0, ""), result["diagnostics"]
        assert [m for m in result["messages"] if "not trusted" in m], result["messages"]


def test_clicking_the_resources_lens_shows_the_kernel_summary(tmp_path: Path) -> None:
    result = run_scenario(
        tmp_path,
        "lens",
        DATA / "saxpy.cu",
        [sys.executable, "-m", "cuda_llm_lsp"],
        {"debounceMs": 50},
    )
    assert result["attached"] is True
    resources = [lens for lens in result["lenses"] if lens["title"].startswith("saxpy · ")]
    assert resources and resources[0]["command"] == "cudaLlm.showResources", result["lenses"]
    assert result.get("chosen") == resources[0]["title"], result
    summary = [m for m in result["messages"] if m.startswith("cuda-llm: saxpy · ")]
    assert summary and "Test spec: " in summary[0], result["messages"]
    assert not [m for m in result["messages"] if "does not support command" in m]


@pytest.mark.parametrize("settings", [None, {}], ids=["unset", "empty"])
def test_k_shows_the_hover_and_no_settings_means_no_warning(
    tmp_path: Path, settings: dict[str, Any] | None
) -> None:
    result = run_scenario(
        tmp_path, "hover", DATA / "saxpy.cu", [sys.executable, "-m", "cuda_llm_lsp"], settings
    )
    assert result["attached"] is True
    assert "vim.lsp.buf.hover()" in result["mapping"]
    hover = "\n".join(result.get("hover") or [])
    assert "void saxpy(" in hover and "Test spec: 3 cases" in hover, result
    assert not [m for m in result["messages"] if "settings" in m], result["messages"]


def optimize_and_accept(tmp_path: Path, file: Path, reply: str) -> dict[str, Any]:
    """The `optimize` scenario: Optimize from the menu, Accept, then one `u`."""
    with ScriptedLlmServer([{"text": kernel_reply(reply), "repeat": -1}]) as llm:
        result = run_scenario(
            tmp_path,
            "optimize",
            file,
            [sys.executable, str(SERVERS / "recorded_server.py"), str(DATA / "recording.json")],
            {
                "debounceMs": 50,
                "baseUrl": llm.base_url,
                "model": "scripted-model",
                "rounds": 1,
                "candidates": 1,
                "apiKey": "sk-test-not-a-real-key",
            },
        )
        assert llm.chat_requests(), "the optimize run never reached the LLM"
    return result


def test_code_actions_and_accept_apply_the_edit_in_one_undo_step(tmp_path: Path) -> None:
    result = optimize_and_accept(tmp_path, DATA / "saxpy.cu", FAST)
    assert result["attached"] is True
    assert "Optimize saxpy" in result["actions"] and "Benchmark saxpy" in result["actions"]
    assert result["optimize"] == "Optimize saxpy"
    assert result["accept_title"] == "Accept optimized saxpy (2.00× faster, 3/3 cases)"
    after = "\n".join(result["after_accept"])
    original = "\n".join(result["original"])
    assert FAST in after
    assert "y[i] = a * x[i] + y[i];" not in after
    assert after.split(FAST)[0] == original.split('extern "C" __global__ void saxpy')[0]
    assert result["after_undo"] == result["original"]
    assert (result["accept_undo_states"], result["accept_undo_entries"]) == (1, 1)


LAUNCH_FILE = """\
#include <cstdio>
#include <cuda_runtime.h>

/* @cuda-llm
sizes.n = [1, 1000, 1048576]
grid = "cdiv(n, 256)"
block = 256
args.n = "n"
args.a = "2.5"
args.x = "float32[n]"
args.y = "inout float32[n]"
*/
extern "C" __global__ void saxpy(int n, float a, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = a * x[i] + y[i];
    }
}

void run_half(int count, const float* x, float* y, cudaStream_t stream) {
    saxpy<<<(count + 255) / 256, 256, 0, stream>>>(count, 2.5f, x, y);
}

int main() {
    int n = 1 << 20;
    float *x = nullptr, *y = nullptr;
    saxpy<<<(n + 255) / 256, 256>>>(n, 2.5f, x, y);
    run_half(n / 2, x, y, 0);
    return cudaDeviceSynchronize() != cudaSuccess;
}
"""
# The model's block-stride variant with its own launch: 1024 threads a block.
LAUNCH_REPLY = """\
/* @cuda-llm launch
grid = "cdiv(n, 1024)"
block = 1024
*/
extern "C" __global__ void saxpy(int n, float a, const float* x, float* y) {
    // variant: fast
    int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        y[i] = fmaf(a, x[i], y[i]);
    }
}"""


def test_accepting_a_launch_change_and_one_undo_restore_the_original(tmp_path: Path) -> None:
    """The kernel, the spec's grid and block and both launch sites (one with a stream, in its
    own terms) arrive as one edit: one undo state, and one `u` brings back the exact text."""
    source = tmp_path / "src" / "launch.cu"
    source.parent.mkdir()
    source.write_text(LAUNCH_FILE, encoding="utf-8")
    result = optimize_and_accept(tmp_path, source, LAUNCH_REPLY)
    assert result["attached"] is True
    assert result["accept_title"].startswith("Accept optimized saxpy (2.00× faster"), result
    assert "\n".join(result["original"]) + "\n" == LAUNCH_FILE
    after = "\n".join(result["after_accept"])
    assert "// variant: fast" in after and "y[i] = a * x[i] + y[i];" not in after
    assert "@cuda-llm launch" not in after
    assert 'grid = "cdiv(n, 1024)"\nblock = 1024\n' in after  # the spec carries the launch
    assert "saxpy<<<(count + 1023) / 1024, 1024, 0, stream>>>(count, 2.5f, x, y);" in after
    assert "saxpy<<<(n + 1023) / 1024, 1024>>>(n, 2.5f, x, y);" in after
    assert "256" not in after.split("*/")[1]  # no launch left with the old configuration
    # one change in the undo tree, and one `u` restores the original exactly
    assert (result["accept_undo_states"], result["accept_undo_entries"]) == (1, 1), result
    assert result["after_undo"] == result["original"]
    assert result["undo_seq_after_undo"] == result["undo_seq_before_accept"]


NCU = ROOT / "tests" / "data" / "ncu"


def test_profile_shows_the_same_findings_as_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Profile K from the menu (ncu's run replaced by its output captured on an H100): every
    line `cuda-llm profile --format json` reports is a diagnostic on that line (a header's on
    its #include line) with the same message; K on the #include line shows the figures."""
    recording = f"recorded:{NCU / 'recording.json'}"
    monkeypatch.setenv("CUDA_LLM_EVALUATOR", recording)
    shutil.copy(NCU / "planted_helpers.cuh", tmp_path / "planted_helpers.cuh")
    result = run_scenario(
        tmp_path,
        "profile",
        NCU / "planted.cu",
        [sys.executable, "-m", "cuda_llm_lsp"],
        {"debounceMs": 50},
    )
    assert result["attached"] is True
    assert "Profile transpose_header" in result["actions"], result["actions"]
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "cuda_llm_lsp.cli",
            "profile",
            str(tmp_path / "planted.cu"),
            "--kernel",
            "transpose_header",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        env=server_env(CUDA_LLM_EVALUATOR=recording),
    )
    assert cli.returncode == 0, cli.stderr
    lines = json.loads(cli.stdout)["lines"]
    shown = {(d["lnum"], d["message"].split("] ", 1)[-1]) for d in result["profile_diagnostics"]}
    for line in lines:
        header = line["file"].endswith(".cuh")
        row = 3 if header else line["line"] - 1
        message = (f"planted_helpers.cuh:{line['line']}: " if header else "") + line["message"]
        assert (row, message) in shown, (row, message, shown)
    assert any(d["lnum"] == result["name_line"] for d in result["profile_diagnostics"])
    hover = "\n".join(result.get("hover") or [])
    assert "global_sectors_excessive" in hover and "14,680,064" in hover, hover


DEMO_SETTINGS = {"debounceMs": 50, "demo": True}
DEMO_LABEL = "DEMO: recorded, not measured"


def run_demo(tmp_path: Path, scenario: str) -> dict[str, Any]:
    """README's demo in Neovim: the setting through `vim.g.cuda_llm_settings`, the real server
    with no endpoint (a closed port), no key and no GPU evaluator; the package's example."""
    from cuda_llm_lsp.demo import demos

    example = demos()["softmax_rows"].source
    assert example is not None
    env_keep = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": ""}
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env_keep.items():
            patch.setenv(key, value)
        patch.delenv("CUDA_LLM_EVALUATOR", raising=False)
        return run_scenario(
            tmp_path, scenario, example, [sys.executable, "-m", "cuda_llm_lsp"], DEMO_SETTINGS
        )


def test_demo_optimize_shows_progress_and_accept_applies_in_one_undo(tmp_path: Path) -> None:
    result = run_demo(tmp_path, "demo")
    assert result["attached"] is True
    assert result["optimize"] == "Optimize softmax_rows", result["actions"]
    assert result["accept_title"].startswith("Accept optimized softmax_rows ("), result
    assert DEMO_LABEL in result["accept_title"]
    # With no plugin, the command line showed the progress, each line labelled as the demo's.
    echoed = [e["text"] for e in result["echoes"]]
    running = [e["text"] for e in result["echoes"] if not e["history"]]
    assert any(t.startswith("cuda-llm: ") and "out of bounds" in t for t in running), echoed
    ends = [e["text"] for e in result["echoes"] if e["history"] and "suggestion ready" in e["text"]]
    # the end line whole, labelled, kept in :messages
    assert ends and ends[0].startswith(f"cuda-llm: Optimizing softmax_rows [{DEMO_LABEL}]: ")
    assert ends[0].count("DEMO") == 1, ends[0]  # labelled once (was three times, issue 41)
    # the result message arrives whole (the snippet's showMessage goes through vim.notify)
    said = [m for m in result["messages"] if m.startswith(f"cuda-llm [{DEMO_LABEL}]: softmax_rows")]
    assert said and said[0].endswith("'Reject suggestion for softmax_rows'."), result["messages"]
    after = "\n".join(result["after_accept"])
    assert "variant: online softmax" in after and after != "\n".join(result["original"])
    assert result["accept_undo_states"] == 1
    assert result["after_undo"] == result["original"]


def test_demo_reject_leaves_the_file_and_drops_the_suggestion(tmp_path: Path) -> None:
    result = run_demo(tmp_path, "demo_reject")
    assert result["accept_title"], result
    assert result["rejected"] == "Reject suggestion for softmax_rows"
    assert not [t for t in result["after_actions"] if t.startswith("Accept ")]
    assert result["after_reject"] == result["original"]


def test_a_kernel_without_a_spec_is_offered_only_add_test_spec(tmp_path: Path) -> None:
    """README's Neovim workflow: no Optimize or Benchmark on a kernel without a spec; its
    spec drafted, or captured from the program (docs/editors.md), in the code action menu."""
    result = run_scenario(
        tmp_path,
        "no_spec",
        DATA / "saxpy.cu",
        [sys.executable, "-m", "cuda_llm_lsp"],
        {"debounceMs": 50},
    )
    assert result["actions"] == [
        "Add test spec for scale_rows",
        "Capture test spec for scale_rows from program…",
    ], result["actions"]


def test_capture_from_the_menu_brings_the_spec_and_verify_runs(tmp_path: Path) -> None:
    """Issue 39 in Neovim: "Capture test spec for K from program…" with `captureCommand` in
    vim.g.cuda_llm_settings runs the program (the server's capture runner: the library's files
    written as on the GPU) and the spec arrives in the buffer as one edit that parses; saved,
    "Verify K" runs and its figures come back as a message and a diagnostic on K."""
    source = tmp_path / "src" / "scale.cu"
    source.parent.mkdir()
    source.write_text(SCALE, encoding="utf-8")
    result = run_scenario(
        tmp_path,
        "capture",
        source,
        [sys.executable, str(SERVERS / "capture_server.py")],
        {"debounceMs": 50, "captureCommand": ["./build/app", "--steps", "1"]},
    )
    assert result["attached"] is True
    assert "Capture test spec for scale from program…" in result["actions"], result["actions"]
    assert result["capture"] == "Capture test spec for scale from program…"
    after = "\n".join(result["after_capture"]) + "\n"
    assert after.endswith(SCALE.split("#include <cuda_runtime.h>\n", 1)[1])  # the code unchanged
    assert 'capture = ".cuda-llm/captures/scale"' in after, after
    assert result["capture_undo_states"] == 1  # one edit: one `u` takes it back
    (kernel,) = find_kernels(after)
    spec, problems = parse_spec(kernel, after)
    assert spec is not None and not problems, problems
    assert (tmp_path / ".cuda-llm" / "captures" / "scale" / "manifest.json").is_file()
    said = [m for m in result["messages"] if "captured scale(float*" in m]
    assert said, result["messages"]
    titles = result["after_actions"]
    assert "Benchmark scale" in titles and result["verify"], titles
    assert result["verify"].startswith("Verify scale in program"), result
    verified = [m for m in result["messages"] if "verify scale" in m]
    assert verified and "the outputs match the capture's" in verified[0], result["messages"]
    (diagnostic,) = result["verify_diagnostics"]
    assert diagnostic["lnum"] == result["kernel_line"] and "1.25x" in diagnostic["message"]
