"""Capture a test spec from the user's program in a real VS Code (code-server 4.139 in
Chromium, driven by Playwright), as a user would.

The packaged `.vsix` with the real language server, its capture runner replaced by
`tests/support/fake_capture` (no GPU here: it writes the capture directory the library would for
one launch of `scale`); the program to run is the user setting `cudaLlm.captureCommand`. In one
window, on a file whose kernel has no spec:

1. the light bulb (Ctrl+.) on the kernel's name offers "Capture test spec for scale from
   program…"; choosing it runs the program and the spec arrives in the file above the kernel,
   naming its capture directory, the code below unchanged, the capture written beside the file;
2. one Ctrl+Z takes the whole spec out again (one undoable edit).

Its own code-server window; run with `bash .ci/vscode_e2e.sh` or `pytest -m vscode tests/e2e`
once installed.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.vscode import (
    Screenshots,
    Workbench,
    flow_home,
    flow_marks,
    flow_window,
    wait_until,
)
from tests.support.fake_capture import LOG_ENV, SCALE

pytestmark = flow_marks()
ROOT = Path(__file__).resolve().parents[2]
SERVER = [sys.executable, str(ROOT / "tests" / "lsp" / "servers" / "capture_server.py")]
PROGRAM = ["./build/app", "--steps", "1"]
ACTION = "Capture test spec for scale from program…"


@dataclass
class Session:
    wb: Workbench
    folder: Path
    shots: Screenshots
    log: Path  # the capture runner's record of each request (command, cwd)

    @property
    def file(self) -> Path:
        return self.folder / "scale.cu"


@pytest.fixture(scope="module")
def session(request: pytest.FixtureRequest) -> Iterator[Session]:
    home = flow_home()
    (home / "workspace" / "scale.cu").write_text(SCALE, encoding="utf-8")
    log = home / "capture-requests.jsonl"
    settings = {"cudaLlm.server.command": SERVER, "cudaLlm.captureCommand": PROGRAM}
    with flow_window(request, home, settings, **{LOG_ENV: str(log)}) as window:
        yield Session(window.wb, window.folder, window.shots, log)


def _saved_text(session: Session) -> str:
    """The editor's text, as saved (Ctrl+S) to disk."""
    wb = session.wb
    wb.focus_editor("scale.cu")
    wb.press("Control+s")
    wait_until("scale.cu saved", lambda: not wb.is_dirty("scale.cu"), 30)
    return session.file.read_text(encoding="utf-8")


def test_capture_from_the_light_bulb_writes_the_spec_above_the_kernel(session: Session) -> None:
    wb = session.wb
    wb.open_file("scale.cu")
    line = next(i for i, t in enumerate(SCALE.splitlines(), 1) if "void scale(" in t)
    column = SCALE.splitlines()[line - 1].index("scale(") + 2

    def offered() -> object:
        # the cursor on the kernel's name, seen in the status bar (under load a Go to Line can
        # be lost while the window settles: then it is asked again)
        wb.focus_editor("scale.cu")
        wb.go_to_line(line, column)
        try:
            wait_until(
                "the cursor on scale", lambda: f"Ln {line}, Col {column}" in wb.status_bar(), 5
            )
        except AssertionError:
            return None
        wb.press("Control+.")  # Quick Fix...: the code actions at the cursor
        row = wb.page.locator(".action-widget .monaco-list-row", has_text=ACTION)
        try:
            row.first.wait_for(timeout=5_000)
        except Exception:
            wb.press("Escape")  # the server was still starting: ask again
            return None
        return row.first

    action = wait_until("the capture action in the light bulb", offered, 120)
    session.shots.take("capture-light-bulb")
    action.click()  # type: ignore[attr-defined]
    wait_until("the spec's edit", lambda: wb.is_dirty("scale.cu"), 120)
    session.shots.take("capture-spec-arrived")
    text = _saved_text(session)
    block, _, code = text.partition("*/\n")
    assert block.startswith("#include <cuda_runtime.h>\n\n/* @cuda-llm"), text
    assert 'capture = ".cuda-llm/captures/scale"' in block, block
    assert 'args.out = "inout float32[n]"' in block and 'args.in  = "in float32[n]"' in block, block
    assert code == SCALE.split("#include <cuda_runtime.h>\n\n", 1)[1], code
    assert (session.folder / ".cuda-llm" / "captures" / "scale" / "manifest.json").is_file()
    requests = session.log.read_text(encoding="utf-8")
    assert '"./build/app", "--steps", "1"' in requests, requests  # the user's program, as set


def test_one_undo_takes_the_spec_out(session: Session) -> None:
    wb = session.wb
    wb.focus_editor("scale.cu")
    wb.press("Control+z")
    wait_until("the undo", lambda: wb.is_dirty("scale.cu"), 30)
    assert _saved_text(session) == SCALE
