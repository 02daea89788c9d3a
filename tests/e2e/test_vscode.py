"""The VS Code extension in a real VS Code (code-server 4.139, in Chromium driven by Playwright).

The packaged `.vsix` is installed; the language server is the real one (`python -m cuda_llm_lsp`)
in demo/test mode (the setting `cudaLlm.server.evaluator`: recorded GPU outcomes), the LLM the
scripted endpoint on 127.0.0.1 answering with a faster saxpy. As a user would, in one window, in
order:

1. a `.cu` file with a device-code error: the squiggle and the Problems entry;
2. the resources code lens above each kernel;
3. Benchmark (lens): the result in the Problems panel, labelled demo/test mode;
4. Optimize (lens): the diff opens focused, Accept (✓) and Reject (✗) in its title bar at once,
   one notification with the figures; ✓ in ONE click changes the file exactly in the kernel's
   range (no Refactor Preview); one Ctrl+Z restores it;
5. Optimize, then ✗: the file is left as it was;
6. Optimize, an edit of the kernel, then ✓: refused, with the reason and the command to see the
   suggestion again; the file keeps the edit only;
and after every decision no notification of that suggestion is left, on screen or in the
notification center; then
7. out of demo/test mode (the setting cleared: the server restarts on the GPU), where there is no
   GPU: the no-GPU warning is shown in full, not cut off after its first line;
8. README's demo: "CUDA-LLM: Try the Demo" turns `cudaLlm.demo` on and opens the package's
   example; Optimize answers from the recording (the endpoint is never asked), labelled DEMO
   once on every line, at the recording's pace: both rounds and their candidates watched on
   screen over seconds;
   ✓ applies the winner and one Ctrl+Z restores it; then Optimize and ✗ leaves the file.

`CUDA_LLM_E2E_SERVER` (a JSON list) replaces the server command. Screenshots of each step go
to `CUDA_LLM_E2E_SCREENSHOTS` (kept), else to a temp directory that is removed after a pass and
kept after a failure (its path is in the report). Profile K has its own window:
test_vscode_profile.py. Run it with `bash .ci/vscode_e2e.sh` (installs
what it needs), or `pytest -m vscode tests/e2e` once installed.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.vscode import (
    Screenshots,
    Workbench,
    copy_file,
    flow_home,
    flow_marks,
    flow_window,
    server_command,
    wait_until,
)
from tests.gpu.conftest import no_gpu_reason
from tests.lsp.conftest import DATA
from tests.lsp.test_editor_flow import FAST
from tests.support.scripted_llm import ScriptedLlmServer, kernel_reply

pytestmark = flow_marks()
# the notification, once; labelled first (a one-line toast cuts the end): recorded figures
SUGGESTION = (
    "cuda-llm [DEMO: recorded, not measured]: saxpy 2.00× faster (1.00 ms → 500 µs), 3/3 cases"
)


class Session:
    """The window and the files of the scenario."""

    def __init__(
        self,
        workbench: Workbench,
        folder: Path,
        shots: Screenshots,
        user_data: Path,
        llm: ScriptedLlmServer,
    ) -> None:
        self.wb = workbench
        self.llm = llm
        self.user_data = user_data
        self.folder = folder
        self.shots = shots
        self.saxpy = folder / "saxpy.cu"
        self.original = self.saxpy.read_text(encoding="utf-8")

    def saved_text(self) -> str:
        """Saves saxpy.cu from its editor (Ctrl+S) and reads it back from disk."""
        self.wb.focus_editor("saxpy.cu")
        self.wb.press("Control+s")
        wait_until("saxpy.cu saved", lambda: not self.wb.is_dirty("saxpy.cu"), 20)
        return self.saxpy.read_text(encoding="utf-8")

    def optimize(self) -> None:
        """Optimize from the lens above saxpy; waits for the diff and its notification."""
        self.wb.close_panel()
        self.wb.focus_editor("saxpy.cu")
        lenses = self.wb.code_lenses
        wait_until(
            "saxpy's Optimize lens",
            lambda: any(t.startswith("saxpy · ") and "Optimize" in t for t in lenses()),
        )
        self.wb.click_code_lens("saxpy", "Optimize")
        wait_until("the suggestion's diff", self.wb.diff_editor_open, 180)
        wait_until("the suggestion's notification", lambda: self.notices(), 30)

    def server_failed(self) -> str | None:
        """The error notification of a language server that did not start, if there is one."""
        said = [t for t in self.wb.toasts() if "did not start" in t or "couldn't create" in t]
        return said[0] if said else None

    def notices(self) -> list[str]:
        return [t for t in self.wb.toasts() if "faster" in t]

    def assert_no_notification_left(self) -> None:
        wait_until("the suggestion's notification to close", lambda: not self.notices(), 20)
        center = self.wb.notification_center()
        assert not [n for n in center if "faster" in n], center

    def kernel_replaced(self, text: str) -> str:
        start = self.original.index('extern "C" __global__ void saxpy')
        end = self.original.index("\n}\n", start) + len("\n}")
        return self.original[:start] + text + self.original[end:]


@pytest.fixture(scope="module")
def session(request: pytest.FixtureRequest) -> Iterator[Session]:
    home = flow_home()
    copy_file(DATA / "broken.cu", home / "workspace")
    copy_file(DATA / "saxpy.cu", home / "workspace")
    llm = ScriptedLlmServer([{"text": kernel_reply(FAST), "repeat": -1}]).start()
    settings = {
        "cudaLlm.server.command": server_command(),
        # Demo/test mode: recorded GPU outcomes (the server's CUDA_LLM_EVALUATOR).
        "cudaLlm.server.evaluator": f"recorded:{DATA / 'recording.json'}",
        "cudaLlm.baseUrl": llm.base_url,
        "cudaLlm.model": "scripted-model",
        "cudaLlm.rounds": 1,
        "cudaLlm.candidates": 1,
    }
    try:
        with flow_window(
            request,
            home,
            settings,
            OPENAI_API_KEY="sk-test-not-a-real-key",
            CUDA_LLM_DEMO_PACE="1",  # the demo at its recording's pace, as a user watches it
        ) as window:
            yield Session(window.wb, window.folder, window.shots, home / "user-data", llm)
    finally:
        llm.stop()


def test_a_device_error_shows_its_squiggle_and_problems_entry(session: Session) -> None:
    wb = session.wb
    wb.open_file("broken.cu")
    wait_until("the error squiggle", lambda: wb.error_squiggles() > 0, 90, session.server_failed)
    wb.show_problems()
    rows = wait_until(
        "the Problems entry", lambda: [r for r in wb.problems() if "undefined_factor" in r]
    )
    assert 'identifier "undefined_factor" is undefined' in rows[0], rows
    assert "Ln 9" in rows[0], rows
    session.shots.take("diagnostics")


def test_the_resources_lens_is_above_each_kernel(session: Session) -> None:
    wb = session.wb
    wb.close_panel()
    wb.open_file("saxpy.cu")
    lenses = wait_until(
        "the resources lens",
        lambda: [t for t in wb.code_lenses() if t.startswith("saxpy · ") and "regs" in t],
        90,
    )
    assert "Optimize" in lenses[0] and "Benchmark" in lenses[0], lenses
    session.shots.take("resources-lens")


def test_benchmark_ends_with_its_result_in_problems(session: Session) -> None:
    wb = session.wb
    wb.focus_editor("saxpy.cu")
    wb.click_code_lens("saxpy", "Benchmark")
    wb.show_problems()
    rows = wait_until(
        "the benchmark result", lambda: [r for r in wb.problems() if "saxpy: 1.000 ms" in r], 120
    )
    assert "3/3 cases pass" in rows[0], rows
    assert rows[0].startswith("[DEMO: recorded, not measured] saxpy: 1.000 ms"), rows
    session.shots.take("benchmark")


def test_optimize_opens_the_diff_and_accept_applies_in_one_click_and_one_undo(
    session: Session,
) -> None:
    wb = session.wb
    session.optimize()
    # Focused: ✓ and ✗ are in the diff's title bar at once, without a click into it.
    accept = wb.title_action("Accept Suggestion")
    assert accept.is_visible() and wb.title_action("Reject Suggestion").is_visible()
    assert session.notices() == [SUGGESTION], wb.toasts()
    session.shots.take("optimize-diff")

    accept.click()
    wait_until("the diff to close", lambda: not wb.diff_editor_open(), 30)
    assert not wb.refactor_preview_open(), "Accept asked again in the Refactor Preview"
    session.shots.take("accepted")
    session.assert_no_notification_left()
    assert session.saved_text() == session.kernel_replaced(FAST), "only the kernel changed"

    wb.press("Control+z")
    assert session.saved_text() == session.original, "one undo restores the file"
    session.shots.take("undone")


def test_reject_leaves_the_file(session: Session) -> None:
    wb = session.wb
    session.optimize()
    wb.title_action("Reject Suggestion").click()
    wait_until("the diff to close", lambda: not wb.diff_editor_open(), 30)
    session.assert_no_notification_left()
    assert not wb.is_dirty("saxpy.cu")
    assert session.saxpy.read_text(encoding="utf-8") == session.original
    session.shots.take("rejected")


def test_accept_after_an_edit_is_refused_with_the_reason(session: Session) -> None:
    wb = session.wb
    session.optimize()
    # The user edits the kernel, then goes back to the diff and presses ✓.
    wb.focus_editor("saxpy.cu")
    wb.go_to_line(14)
    wb.press("End")
    wb.page.keyboard.type("  // edited")
    wait_until("the edit", lambda: wb.is_dirty("saxpy.cu"), 10)
    diff_tab = wb.page.locator(".tabs-container .tab", has_text="original ↔ suggested").first
    diff_tab.click()
    wb.title_action("Accept Suggestion").click()
    refusal = wait_until(
        "the refusal",
        lambda: [t for t in wb.toasts() if "changed since the optimization started" in t],
        30,
    )
    assert "was not applied" in refusal[0], refusal
    assert '"CUDA-LLM: Show Suggestion Diff"' in refusal[0], refusal
    assert session.notices(), "the suggestion is still pending"
    session.shots.take("refused-after-edit")
    edited = session.saved_text()
    assert "  // edited" in edited and "variant: fast" not in edited

    diff_tab.click()
    wb.title_action("Reject Suggestion").click()
    wait_until("the diff to close", lambda: not wb.diff_editor_open(), 30)
    session.assert_no_notification_left()
    session.shots.take("rejected-after-edit")


@pytest.mark.skipif(no_gpu_reason() is None, reason="a GPU is here: no no-GPU warning to show")
def test_out_of_demo_mode_the_no_gpu_warning_is_shown_in_full(session: Session) -> None:
    wb = session.wb
    # The user clears cudaLlm.server.evaluator: the extension restarts the server on the GPU.
    for scope in ("User", "Machine"):
        path = session.user_data / scope / "settings.json"
        settings = json.loads(path.read_text(encoding="utf-8"))
        settings.pop("cudaLlm.server.evaluator", None)
        path.write_text(json.dumps(settings, indent=1), encoding="utf-8")
    wb.focus_editor("saxpy.cu")

    def no_gpu_warnings() -> list[str]:
        return [t for t in wb.toasts() if "no CUDA GPU found" in t]

    # The restart takes a moment, and a click meanwhile reaches the old server or none: Benchmark
    # again until the new server answers.
    deadline = time.monotonic() + 120
    while not no_gpu_warnings() and time.monotonic() < deadline:
        wait_until(
            "saxpy's lens",
            lambda: any(t.startswith("saxpy · ") and "regs" in t for t in wb.code_lenses()),
            90,
            session.server_failed,
        )
        wb.click_code_lens("saxpy", "Benchmark")
        with contextlib.suppress(AssertionError):
            wait_until("the no-GPU warning", no_gpu_warnings, 10)
    warning = wait_until("the no-GPU warning", no_gpu_warnings, 1)
    # Shown expanded, with its reason to the end, not cut off after one line.
    assert "cuda-llm: cannot benchmark saxpy: no CUDA GPU found on this machine" in warning[0]
    assert "nvidia-smi" in warning[0], warning  # the one sentence, to its end
    assert "Show Output" in warning[0], warning
    toast = ".notifications-toasts .notification-toast.notification-fade-in-done"
    box = wb.page.locator(toast, has_text="no CUDA GPU found").first
    box.wait_for(timeout=10_000)  # shown, its fade-in over
    assert (box.bounding_box() or {"height": 0})["height"] > 60, "more than one line"
    session.shots.take("no-gpu-warning")


def test_screenshots_are_kept_for_each_step(session: Session) -> None:
    taken = sorted(p.name for p in session.shots.directory.glob("*.png"))
    assert len(taken) >= 8, taken
    if os.environ.get("CUDA_LLM_E2E_README_SHOT"):
        readme_shot(session.shots.directory, Path(os.environ["CUDA_LLM_E2E_README_SHOT"]))


def readme_shot(directory: Path, target: Path) -> None:
    """The diff step, as a small PNG for the README (256 colours)."""
    from PIL import Image

    (source,) = directory.glob("*-optimize-diff.png")
    with Image.open(source) as image:
        small = image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
        target.parent.mkdir(parents=True, exist_ok=True)
        small.save(target, optimize=True)


DEMO_LABEL = "DEMO: recorded, not measured"


def _demo_example(session: Session) -> Path:
    # "Try the Demo" asks the server for the example: it writes it to the data directory
    return session.user_data.parent / "data" / "demo" / "softmax.cu"


STEP = re.compile(r"round \d+/\d+|candidate \d+\.\d+")


def _optimize_demo(session: Session) -> dict[str, float]:
    """Optimize the demo's kernel and watch it run: {each round or candidate step shown on
    screen (a toast, the status bar or the kernel's lens): seconds after the click it appeared}."""
    wb = session.wb
    wb.close_panel()
    wb.focus_editor("softmax.cu")
    wait_until(
        "softmax_rows's Optimize lens",
        lambda: any(t.startswith("softmax_rows · ") and "Optimize" in t for t in wb.code_lenses()),
        90,
    )
    wb.click_code_lens("softmax_rows", "Optimize")
    clicked = time.monotonic()
    seen: dict[str, float] = {}

    def watched() -> bool:
        for text in [*wb.toasts(), wb.status_bar(), *wb.code_lenses()]:
            for step in STEP.findall(text):
                seen.setdefault(step, time.monotonic() - clicked)
            assert text.count(DEMO_LABEL) <= 1, f"the demo label more than once: {text}"
        return wb.diff_editor_open()

    wait_until("the demo's diff", watched, 180)
    return seen


def test_try_the_demo_optimizes_the_example_and_accept_applies_in_one_undo(
    session: Session,
) -> None:
    """README's demo: the command turns `cudaLlm.demo` on and opens the example; Optimize answers
    from the package's recording (the scripted endpoint is never asked: see the assertion on its
    requests), labelled; ✓ applies the winner, one Ctrl+Z restores the file."""
    wb = session.wb
    asked_before = len(session.llm.chat_requests())
    wb.run_command("CUDA-LLM: Try the Demo")
    wb.editor_tab("softmax.cu").wait_for(timeout=60_000)
    example = _demo_example(session)
    original = example.read_text(encoding="utf-8")
    settings = json.loads((session.user_data / "User" / "settings.json").read_text("utf-8"))
    assert settings.get("cudaLlm.demo") is True, settings
    seen = _optimize_demo(session)
    # at the recording's pace (about 6 s) both rounds and their candidates can be followed on
    # screen; the DEMO label once per line is checked while watching
    print(f"demo steps seen on screen (s after the click): {seen}")
    assert sorted(step for step in seen if step.startswith("round ")) == [
        "round 1/2",
        "round 2/2",
    ], seen
    assert len(seen) >= 3 and max(seen.values()) - min(seen.values()) >= 4.0, seen
    said = wait_until(
        "the demo's notification",
        lambda: [t for t in wb.toasts() if DEMO_LABEL in t and " faster " in t],
    )
    assert said[0].startswith(f"cuda-llm [{DEMO_LABEL}]: softmax_rows "), said
    session.shots.take("demo-diff")
    assert not [t for t in wb.code_lenses() if "Candidates failed" in t], wb.code_lenses()
    wb.title_action("Accept Suggestion").click()
    wait_until("the diff to close", lambda: not wb.diff_editor_open(), 30)
    wb.focus_editor("softmax.cu")
    wb.press("Control+s")
    wait_until("softmax.cu saved", lambda: not wb.is_dirty("softmax.cu"), 20)
    accepted = example.read_text(encoding="utf-8")
    assert "variant: online softmax" in accepted and accepted != original
    wb.press("Control+z")
    wb.press("Control+s")
    wait_until("the undo saved", lambda: example.read_text(encoding="utf-8") == original, 20)
    assert len(session.llm.chat_requests()) == asked_before, "the demo asked a model"
    session.shots.take("demo-undone")


def test_the_demo_reject_leaves_the_example(session: Session) -> None:
    wb = session.wb
    example = _demo_example(session)
    original = example.read_text(encoding="utf-8")
    _optimize_demo(session)
    wb.title_action("Reject Suggestion").click()
    wait_until("the diff to close", lambda: not wb.diff_editor_open(), 30)
    assert not wb.is_dirty("softmax.cu")
    assert example.read_text(encoding="utf-8") == original
