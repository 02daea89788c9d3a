"""Profile K in a real VS Code (code-server 4.139 in Chromium, driven by Playwright): the same
findings as `cuda-llm profile`.

The packaged `.vsix` with the real language server; only ncu's run is replaced by its output
captured on an H100 (the setting `cudaLlm.server.evaluator`: `recorded:tests/data/ncu/
recording.json`, as tests/lsp/test_profile.py and the Neovim test use it). As a user would, in
one window, on tests/data/ncu/planted.cu (its header beside it):

1. "Profile" in the lens of transpose_header: every line `cuda-llm profile --kernel
   transpose_header --format json` reports is a diagnostic of source `cuda-llm profile` on that
   line (a header's on its `#include` line, naming the header's line) with the CLI's message,
   read from the hover at that line (the Problems panel leaves Hint diagnostics out, and a
   stall-only line is a Hint); the problem findings and the kernel summary are in the Problems
   panel too; the hover shows the figures (the #include line's sectors, the name's occupancy);
2. "CUDA-LLM: Profile Kernel" from the Command Palette with the cursor in transpose_naive:
   its summary and its strided store arrive, transpose_header's stay;
3. "Profile transpose_unpadded" from the light bulb (Ctrl+.) on that kernel's name: its
   summary arrives.

Its own code-server window (test_vscode.py's runs on another recording); run with
`bash .ci/vscode_e2e.sh` or `pytest -m vscode tests/e2e` once installed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.vscode import (
    Hover,
    Screenshots,
    Workbench,
    copy_file,
    flow_home,
    flow_marks,
    flow_window,
    server_command,
    wait_until,
)
from tests.lsp.conftest import server_env

pytestmark = flow_marks()
NCU = Path(__file__).resolve().parents[1] / "data" / "ncu"
RECORDED = f"recorded:{NCU / 'recording.json'}"
LABEL = "[DEMO: recorded, not measured] "  # recorded ncu output: every finding says so
SOURCE = "cuda-llm profile"


@dataclass
class Session:
    wb: Workbench
    folder: Path
    shots: Screenshots

    @property
    def planted(self) -> Path:
        return self.folder / "planted.cu"

    def row_of(self, needle: str) -> int:
        """The 1-based line of planted.cu that holds `needle`."""
        lines = self.planted.read_text(encoding="utf-8").splitlines()
        return next(i for i, text in enumerate(lines, 1) if needle in text)

    def first_column(self, line: int) -> int:
        """The 1-based column of the line's first non-blank character (where its finding starts)."""
        text = self.planted.read_text(encoding="utf-8").splitlines()[line - 1]
        return len(text) - len(text.lstrip()) + 1

    def profile_rows(self) -> list[str]:
        """The Problems panel's rows of source `cuda-llm profile`, whitespace made single."""
        self.wb.show_problems()
        rows = [" ".join(r.split()) for r in self.wb.problems()]
        return [r for r in rows if SOURCE in r]


@pytest.fixture(scope="module")
def session(request: pytest.FixtureRequest) -> Iterator[Session]:
    home = flow_home()
    copy_file(NCU / "planted.cu", home / "workspace")
    copy_file(NCU / "planted_helpers.cuh", home / "workspace")
    settings = {"cudaLlm.server.command": server_command(), "cudaLlm.server.evaluator": RECORDED}
    with flow_window(request, home, settings) as window:
        yield Session(window.wb, window.folder, window.shots)


def cli_profile(file: Path, kernel: str) -> dict[str, Any]:
    """`cuda-llm profile FILE --kernel KERNEL --format json` on the same recording."""
    done = subprocess.run(
        [sys.executable, "-m", "cuda_llm_lsp.cli", "profile", str(file),
         "--kernel", kernel, "--format", "json"],
        capture_output=True, text=True, timeout=240, env=server_env(CUDA_LLM_EVALUATOR=RECORDED),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def shown_as(session: Session, finding: dict[str, Any]) -> tuple[int, str]:
    """Where the editor shows a CLI finding (1-based line) and the message it shows there."""
    if finding["file"].endswith(".cuh"):  # a header's finding sits on its #include line
        line = session.row_of(f'#include "{Path(finding["file"]).name}"')
        return line, f"{LABEL}{Path(finding['file']).name}:{finding['line']}: {finding['message']}"
    return finding["line"], LABEL + finding["message"]


def shows(message: str) -> Callable[[Hover], bool]:
    """A hover that shows a diagnostic with `message`."""
    return lambda hover: any(message in marker for marker in hover.markers)


def test_profile_from_the_lens_shows_the_clis_findings_on_their_lines(session: Session) -> None:
    wb = session.wb
    wb.open_file("planted.cu")
    name_line = session.row_of("void transpose_header(")
    wb.focus_editor("planted.cu")
    wb.go_to_line(name_line)  # the editor draws only the lenses in view
    wait_until(
        "transpose_header's Profile lens",
        lambda: any(
            t.startswith("transpose_header · ") and "Profile" in t for t in wb.code_lenses()
        ),
        120,
    )
    wb.click_code_lens("transpose_header", "Profile")
    summaries = wait_until(
        "transpose_header's summary in Problems",
        lambda: [r for r in session.profile_rows() if "transpose_header profile on" in r],
        120,
    )
    session.shots.take("profile-problems")
    cli = cli_profile(session.planted, "transpose_header")
    assert cli["lines"], cli
    assert f"{LABEL}transpose_header profile on {cli['device']}: " in summaries[0], summaries
    assert cli["summary"]["text"] in summaries[0], (cli["summary"], summaries)
    assert f"Ln {name_line}, Col" in summaries[0], summaries

    rows = session.profile_rows()
    for finding in cli["lines"]:
        line, message = shown_as(session, finding)
        hover = wb.hover_at(
            line,
            session.first_column(line),
            shows(message),
            f"the finding {message[:60]!r}…",
        )
        marker = next(m for m in hover.markers if message in m)
        assert f"{SOURCE}({','.join(finding['kinds'])})" in marker, marker
        if set(finding["kinds"]) - {"stall_hotspot"}:  # a problem (Information): in Problems too
            assert [r for r in rows if message in r and f"Ln {line}, Col" in r], (message, rows)
    session.shots.take("profile-finding-hover")

    # The figures: the header's store on the #include line, the summary on the kernel's name.
    include = session.row_of('#include "planted_helpers.cuh"')
    figures = wb.hover_at(
        include, 3, lambda h: "global_sectors_excessive" in h.text, "the store's figures"
    )
    assert "14,680,064" in figures.text, figures
    session.shots.take("profile-figures-hover")
    column = session.planted.read_text("utf-8").splitlines()[name_line - 1].index("transpose_h")
    name = wb.hover_at(
        name_line, column + 3, lambda h: "occupancy limiter" in h.text, "the summary's figures"
    )
    assert "NVIDIA H100" in name.text, name
    wb.press("Escape")


def test_profile_kernel_from_the_palette_adds_that_kernels_findings(session: Session) -> None:
    wb = session.wb
    store = session.row_of("out[(size_t)x * rows + y] = v;  // PLANT uncoalesced")
    wb.editor_tab("planted.cu").click()
    wb.go_to_line(store, 5)  # the cursor in transpose_naive
    wb.run_command("CUDA-LLM: Profile Kernel")
    found = wait_until(
        "transpose_naive's store in Problems",
        lambda: [
            r for r in session.profile_rows() if "uncoalesced" in r and f"Ln {store}, Col" in r
        ],
        120,
    )
    rows = session.profile_rows()
    assert any("transpose_naive profile on" in r for r in rows), rows
    assert any("transpose_header profile on" in r for r in rows), "the first profile stays"
    cli = cli_profile(session.planted, "transpose_naive")
    expected = next(f for f in cli["lines"] if f["line"] == store)
    assert LABEL + expected["message"] in found[0], (expected, found)
    session.shots.take("profile-palette")


def test_profile_from_the_light_bulb_adds_that_kernels_summary(session: Session) -> None:
    wb = session.wb
    name_line = session.row_of("void transpose_unpadded(")
    column = session.planted.read_text("utf-8").splitlines()[name_line - 1].index("transpose_u")
    wb.editor_tab("planted.cu").click()
    wb.go_to_line(name_line, column + 3)
    wb.press("Control+.")  # Quick Fix...: the code actions at the cursor
    action = wb.page.locator(
        ".action-widget .monaco-list-row", has_text="Profile transpose_unpadded"
    )
    action.first.wait_for(timeout=30_000)
    session.shots.take("profile-light-bulb")
    action.first.click()
    summary = wait_until(
        "transpose_unpadded's summary in Problems",
        lambda: [r for r in session.profile_rows() if "transpose_unpadded profile on" in r],
        120,
    )
    assert f"Ln {name_line}, Col" in summary[0], summary
    cli = cli_profile(session.planted, "transpose_unpadded")
    assert cli["summary"]["text"] in summary[0], (cli["summary"], summary)
