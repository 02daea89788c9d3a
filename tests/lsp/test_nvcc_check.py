"""The nvcc tier in the editor (issue 28), on the real server over stdio with the real nvcc.

After a document opens and after each save, nvcc's whole-file verdict is merged over the fast
tier's view of the same text: a host-code error appears, a fast-tier error nvcc does not report
is withdrawn, and template instances only host code launches get nvcc's figures. While typing,
lines unchanged since the verdict keep it (a refuted fast-tier error never comes back) and lines
typed since show the fast tier's; `cudaLlm.nvccCheck: "off"` runs nothing; `pause` checks after
a quiet spell without a save.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cuda_llm_lsp.compile.nvcc import find_nvcc
from tests.support.raw_lsp import RawServer, server_env

pytestmark = pytest.mark.skipif(find_nvcc() is None, reason="needs nvcc (the nvcc extra)")

TEXT = (
    "#ifdef __CUDACC_RTC__\n"
    # the fast tier's error, not nvcc's (not an #error: NVRTC would stop there)
    'static_assert(sizeof(int) == 0, "only NVRTC defines __CUDACC_RTC__");\n'
    "#endif\n"
    "template <typename T, int B> __global__ void fill(T* o) {\n"
    "  __shared__ T s[B];\n"
    "  s[threadIdx.x] = o[threadIdx.x]; __syncthreads(); o[threadIdx.x] = s[B - 1 - threadIdx.x];\n"
    "}\n"
    "template <typename T> void run(T* p) {\n"  # only host code instantiates fill<T, B>
    "  fill<T, 256><<<1, 256>>>(p);\n"
    "  fill<T, 64><<<1, 64>>>(p);\n"
    "}\n"
    "int main() { run<float>(nullptr); return 0; }\n"
)
HOST_ERROR = TEXT.replace("return 0; }", "return no_such_host_function(); }")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RawServer]:
    running = RawServer(server_env(tmp_path))
    yield running
    running.close()


def save(server: RawServer, uri: str) -> None:
    server.notify("textDocument/didSave", {"textDocument": {"uri": uri}})


def lenses(server: RawServer, uri: str) -> list[str]:
    reply = server.response(
        server.request("textDocument/codeLens", {"textDocument": {"uri": uri}}), timeout=10
    )
    return [lens["command"]["title"] for lens in reply.get("result") or [] if lens.get("command")]


def published(server: RawServer, uri: str, version: int, test: Any, timeout: float) -> list[Any]:
    """The first diagnostics published for `version` of `uri` that pass `test`."""
    message = server.wait_for(
        lambda m: (
            m.get("method") == "textDocument/publishDiagnostics"
            and m["params"]["uri"] == uri
            and m["params"].get("version") == version
            and test(m["params"]["diagnostics"])
        ),
        timeout=timeout,
    )
    return list(message["params"]["diagnostics"])


def messages(diagnostics: list[Any]) -> list[str]:
    return [d["message"] for d in diagnostics]


def since(server: RawServer, uri: str, start: int) -> list[list[str]]:
    """Every diagnostics message list published for `uri` from message index `start` on."""
    return [
        messages(m["params"]["diagnostics"])
        for m in list(server.messages)[start:]
        if m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri
    ]


def test_open_and_save_merge_nvccs_verdict_and_it_stays_the_arbiter_while_typing(
    server: RawServer, tmp_path: Path
) -> None:
    server.initialize('{"cudaLlm": {"debounceMs": 0, "nvccCheck": "save"}}')
    uri = server.open(tmp_path / "main.cu", TEXT)
    fast = published(server, uri, 1, lambda d: any("__CUDACC_RTC__" in m for m in messages(d)), 60)
    assert fast[0]["range"]["start"]["line"] == 1

    # no save: opening a file checks it too, so it has nvcc's figures from the start
    clean = published(server, uri, 1, lambda d: d == [], 180)  # nvcc: no #error, no problem
    assert clean == []
    verdict = len(server.messages)
    titles = lenses(server, uri)
    fill = next(t for t in titles if t.startswith("fill · "))
    assert "regs" in fill and "2 instances" in fill, titles  # figures nvcc's ptxas gave
    hover = server.response(
        server.request(
            "textDocument/hover",
            {"textDocument": {"uri": uri}, "position": {"line": 3, "character": 46}},
        )
    )["result"]["contents"]["value"]
    assert "`fill<float, 256>`" in hover and "1024 B smem" in hover, hover
    assert "`fill<float, 64>`" in hover and "256 B smem" in hover, hover

    # typing on other lines: the fast tier's false error (line 2, unchanged since nvcc's
    # verdict) never comes back, and the unchanged kernel keeps nvcc's figures
    server.change(uri, TEXT.replace("return 0; }", "return 1; }"), 2)
    server.diagnostics(uri, 2, 60)
    fill = next(t for t in lenses(server, uri) if t.startswith("fill · "))
    assert "regs" in fill and "2 instances" in fill, fill
    # a real error typed now, in a line nvcc has not seen: the fast tier shows it there
    typo = TEXT.replace(
        "}\ntemplate <typename T> void",
        "}\n__device__ int f() { return no_such_name; }\ntemplate <typename T> void",
    )
    server.change(uri, typo, 3)
    typed = published(server, uri, 3, lambda d: d != [], 60)
    (real,) = [d for d in typed if "no_such_name" in d["message"]]
    assert real["severity"] == 1 and real["range"]["start"]["line"] == 7
    server.change(uri, HOST_ERROR, 4)  # host code: the fast tier cannot see it
    server.diagnostics(uri, 4, 60)
    time.sleep(1.0)  # any later publication of version 4 (code generation) too
    shown = since(server, uri, verdict)
    assert len(shown) >= 3, shown
    assert not any("__CUDACC_RTC__" in m for ms in shown for m in ms), shown

    save(server, uri)
    checked = published(
        server, uri, 4, lambda d: any("no_such_host_function" in m for m in messages(d)), 180
    )
    (host,) = [d for d in checked if "no_such_host_function" in d["message"]]
    assert host["severity"] == 1 and host["range"]["start"]["line"] == 11
    assert not any("__CUDACC_RTC__" in m for m in messages(checked))  # withdrawn: nvcc's verdict


def test_pause_checks_without_a_save(server: RawServer, tmp_path: Path) -> None:
    server.initialize('{"cudaLlm": {"debounceMs": 0, "nvccCheck": "pause"}}')
    uri = server.open(tmp_path / "main.cu", HOST_ERROR)
    checked = published(
        server, uri, 1, lambda d: any("no_such_host_function" in m for m in messages(d)), 180
    )
    assert checked


@pytest.mark.parametrize(
    "options",
    [
        '{"cudaLlm": {"debounceMs": 0, "nvccCheck": "off"}}',
        # an untrusted workspace: no host compiler on its files, whatever the setting
        '{"cudaLlm": {"debounceMs": 0, "nvccCheck": "save"}, "workspaceTrusted": false}',
    ],
    ids=["off", "untrusted"],
)
def test_no_nvcc_runs_when_off_or_untrusted(
    server: RawServer, tmp_path: Path, options: str
) -> None:
    server.initialize(options)
    uri = server.open(tmp_path / "main.cu", HOST_ERROR)
    published(server, uri, 1, lambda d: d != [], 60)
    fill = next(t for t in lenses(server, uri) if t.startswith("fill · "))
    assert "regs" not in fill, fill  # the fast tier cannot see what host code launches
    save(server, uri)
    time.sleep(8)  # nvcc checks this file in ~1-3 s on 2 cores
    shown = [
        m["params"]["diagnostics"]
        for m in list(server.messages)
        if m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri
    ]
    assert shown and all(
        not any("no_such_host_function" in d["message"] for d in diagnostics)
        for diagnostics in shown
    )
