"""The compile flow as an editor sees it (issues 17 and 20), on the real server over stdio.

Diagnostics come from NVRTC's front end; the figures of an edited kernel follow within a second
from code generation in the background; ptxas-only errors still arrive, at the kernel; a document
that hangs NVRTC costs one compile, not the server; `exit` ends the process at once, whatever is
compiling.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.generated_cuda import generate
from tests.support.load import slack
from tests.support.raw_lsp import RawServer, server_env

DOUBLING = (
    "#define A0(x) x x\n"
    + "".join(f"#define A{i}(x) A{i - 1}(A{i - 1}(x))\n" for i in range(1, 31))
    + "__global__ void k(float* x) { x[0] = A30(1); }\n"
)
GOOD = "__global__ void fine(float* x) { x[threadIdx.x] = 1.0f; }\n"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RawServer]:
    running = RawServer(server_env(tmp_path))
    yield running
    running.close()


def lenses(server: RawServer, uri: str) -> list[str]:
    reply = server.response(
        server.request("textDocument/codeLens", {"textDocument": {"uri": uri}}), timeout=10
    )
    return [lens["command"]["title"] for lens in reply.get("result") or [] if lens.get("command")]


def lens_of(server: RawServer, uri: str, kernel: str) -> str:
    return next(t for t in lenses(server, uri) if t.startswith(f"{kernel} · "))


def publishes(server: RawServer, uri: str, version: int) -> list[dict[str, Any]]:
    return [
        m["params"]
        for m in list(server.messages)
        if m.get("method") == "textDocument/publishDiagnostics"
        and m["params"]["uri"] == uri
        and m["params"].get("version") == version
    ]


def test_an_edited_kernels_figures_follow_its_diagnostics_within_a_second(
    server: RawServer, tmp_path: Path
) -> None:
    server.initialize('{"cudaLlm": {"debounceMs": 0}}')
    first = generate(3000)
    uri = server.open(tmp_path / "big.cu", first.text)
    server.diagnostics(uri, 1, timeout=120)
    deadline = time.monotonic() + 60
    while "regs" not in lens_of(server, uri, first.edited):  # the first figures: one compile
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert "1024 B smem" in lens_of(server, uri, first.edited)
    others = [t for t in lenses(server, uri) if " regs · " in t]

    edited = generate(3000, edit=1, tile=512)
    sent = time.monotonic()
    server.change(uri, edited.text, 2)
    assert server.diagnostics(uri, 2, timeout=30) == []
    diagnosed = time.monotonic()
    seen: list[str] = []
    while "2048 B smem" not in (title := lens_of(server, uri, edited.edited)):
        seen.append(title)
        assert time.monotonic() - diagnosed < 1.0 * slack(), (seen[:3], time.monotonic() - sent)
        time.sleep(0.02)
    assert all(("regs" in t) or ("updating" in t) for t in seen), seen  # never stale figures
    assert [t for t in lenses(server, uri) if " regs · " in t and "2048" not in t] == [
        t for t in others if not t.startswith(f"{edited.edited} · ")
    ]


def test_a_ptxas_only_error_arrives_from_code_generation_at_the_kernel(
    server: RawServer, tmp_path: Path
) -> None:
    server.initialize('{"cudaLlm": {"debounceMs": 0}}')
    text = (
        "__global__ void fine(float* x) { x[0] = 1; }\n"
        "__global__ void greedy(float* x) {\n"
        "  __shared__ float s[100000];  // 400 kB: only ptxas sees it\n"
        "  s[threadIdx.x] = x[threadIdx.x]; __syncthreads(); x[threadIdx.x] = s[threadIdx.x + 1];\n"
        "}\n"
    )
    uri = server.open(tmp_path / "greedy.cu", text)
    message = server.wait_for(
        lambda m: (
            m.get("method") == "textDocument/publishDiagnostics"
            and m["params"].get("version") == 1
            and any("too much shared data" in d["message"] for d in m["params"]["diagnostics"])
        ),
        timeout=60,
    )
    (problem,) = message["params"]["diagnostics"]
    assert problem["range"]["start"] == {
        "line": 1,
        "character": text.split("\n")[1].index("greedy"),
    }
    assert publishes(server, uri, 1)[0]["diagnostics"] == []  # the front end's, first


def test_a_document_that_hangs_nvrtc_costs_one_compile_not_the_server(
    server: RawServer, tmp_path: Path
) -> None:
    server.initialize('{"cudaLlm": {"debounceMs": 0, "compileTimeoutS": 2}}')
    hanging = server.open(tmp_path / "macros.cu", DOUBLING)
    good = server.open(tmp_path / "good.cu", GOOD)
    assert server.diagnostics(good, 1, timeout=30) == []  # not behind the hanging compile
    (stopped,) = server.diagnostics(hanging, 1, timeout=30)
    # a warning, not an error: a file is not red because the machine was busy (issue 28)
    assert "took longer than 2 s" in stopped["message"] and stopped["severity"] == 2
    server.change(good, GOOD.replace("1.0f", "y"), 2)
    (error,) = server.diagnostics(good, 2, timeout=10)
    assert '"y"' in error["message"]
    assert server.alive() and "Traceback" not in server.stderr()


def test_exit_ends_the_server_within_a_second_while_a_compile_hangs(
    server: RawServer, tmp_path: Path
) -> None:
    server.initialize('{"cudaLlm": {"debounceMs": 0, "compileTimeoutS": 60}}')
    server.open(tmp_path / "macros.cu", DOUBLING)
    time.sleep(1.5)  # NVRTC is now expanding the macros
    server.response(server.request("shutdown"), timeout=10)
    started = time.monotonic()
    server.notify("exit")
    assert server.exit_status(timeout=5) == 0
    assert time.monotonic() - started < 1.0 * slack()


def test_exit_without_shutdown_ends_the_server_within_a_second_too(
    server: RawServer, tmp_path: Path
) -> None:
    server.initialize('{"cudaLlm": {"debounceMs": 0, "compileTimeoutS": 60}}')
    server.open(tmp_path / "macros.cu", DOUBLING)
    time.sleep(1.5)  # NVRTC is now expanding the macros, in a thread's compile process
    started = time.monotonic()
    server.notify("exit")
    assert server.exit_status(timeout=5) == 1  # LSP: exit without shutdown
    assert time.monotonic() - started < 1.0 * slack()


DYNAMIC_INIT = (
    "__device__ int seed() { return 7; }\n"
    "__device__ int state = seed();\n"  # an error only the end of the unit reports
    "__global__ void k(int* p) { p[0] = state; }\n"
)


def test_the_first_answer_comes_first_and_the_end_of_the_units_errors_follow_a_pause(
    server: RawServer, tmp_path: Path
) -> None:
    """The editor's first answer stops NVRTC's front end before the end of the unit (a
    quarter of the time on heavy headers); once typing pauses, the rest of the check follows
    for the same version: here the one error that only the end of the unit reports."""
    server.initialize('{"cudaLlm": {"debounceMs": 0}}')
    uri = server.open(tmp_path / "late.cu", DYNAMIC_INIT)
    assert server.diagnostics(uri, 1, timeout=120) == []  # the first answer: nothing yet
    deadline = time.monotonic() + 30 * slack()
    while not any(p["diagnostics"] for p in publishes(server, uri, 1)):
        assert time.monotonic() < deadline, publishes(server, uri, 1)
        time.sleep(0.05)
    (error,) = next(p["diagnostics"] for p in publishes(server, uri, 1) if p["diagnostics"])
    assert "dynamic initialization" in error["message"] and error["range"]["start"]["line"] == 1
    typo = DYNAMIC_INIT.replace("p[0] = state", "p[0] = stat")
    server.change(uri, typo, 2)  # an error of the file's own: its first answer is all of it
    shown = server.diagnostics(uri, 2, timeout=60)
    assert [d["range"]["start"]["line"] for d in shown] == [2], shown
    assert 'identifier "stat" is undefined' in shown[0]["message"]


def test_an_edit_after_a_pause_is_checked_at_once_and_a_burst_after_the_debounce(
    server: RawServer, tmp_path: Path
) -> None:
    """`debounceMs` coalesces keystrokes closer together than it; a lone edit after a pause
    does not wait for keystrokes that are not coming."""
    server.initialize('{"cudaLlm": {"debounceMs": 3000}}')
    uri = server.open(tmp_path / "k.cu", GOOD)
    server.diagnostics(uri, 1, timeout=120)
    time.sleep(0.5)  # no change yet: the first one is after a pause
    sent = time.monotonic()
    server.change(uri, GOOD.replace("1.0f", "2.0f"), 2)
    assert server.diagnostics(uri, 2, timeout=60) == []
    assert time.monotonic() - sent < 3.0, "the lone edit waited for the debounce"
    sent = time.monotonic()
    server.change(uri, GOOD.replace("1.0f", "3.0f"), 3)  # within 3 s of the last: typing
    assert server.diagnostics(uri, 3, timeout=60) == []
    assert time.monotonic() - sent >= 3.0, "a keystroke in a burst did not wait"
