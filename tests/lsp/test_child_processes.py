"""What a repository can make the server's children do (issue 36), on the real server over stdio
with the real nvcc: nothing it names reaches nvcc's shell, no program of its own runs, nvcc never
reads the LSP pipe, and a settings change checks the open files with nvcc again.
"""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cuda_llm_lsp.compile.nvcc import find_nvcc
from tests.lsp.hardening import initialize
from tests.support.raw_lsp import RawServer, server_env

needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="needs nvcc (the nvcc extra)")

HOSTILE = "$(touch $CUDA_LLM_MARK)`touch $CUDA_LLM_MARK.bq`"
TEXT = (
    "__global__ void scale(float* x) { x[threadIdx.x] *= 2.0f; }\n"
    "int main() { scale<<<1, 32>>>(nullptr); return no_such_host_function(); }\n"
)
NVCC_S = 240.0  # nvcc on two shared cores


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    return root


def _server(tmp_path: Path, path: str | None = None) -> RawServer:
    env = server_env(tmp_path, CUDA_LLM_MARK=str(tmp_path / "PWNED"))
    if path is not None:
        env["PATH"] = path
    return RawServer(env)


def _published(server: RawServer, uri: str, test: Any, timeout: float) -> list[dict[str, Any]]:
    message = server.wait_for(
        lambda m: (
            m.get("method") == "textDocument/publishDiagnostics"
            and m["params"]["uri"] == uri
            and test([d["message"] for d in m["params"]["diagnostics"]])
        ),
        timeout=timeout,
    )
    return list(message["params"]["diagnostics"])


def _nvcc_ran(messages: list[str]) -> bool:
    return any("no_such_host_function" in m for m in messages)


@pytest.fixture
def cleanup() -> Iterator[list[RawServer]]:
    servers: list[RawServer] = []
    yield servers
    for server in servers:
        server.close()


@needs_nvcc
def test_hostile_names_defines_and_include_dirs_run_nothing(
    tmp_path: Path, workspace: Path, cleanup: list[RawServer]
) -> None:
    source = workspace / f"src{HOSTILE}"
    include = workspace / f"inc{HOSTILE}"
    source.mkdir()
    include.mkdir()
    (include / "far.h").write_text("#define FAR 2.0f\n")
    (workspace / "compile_flags.txt").write_text(
        f"-DEVIL={HOSTILE}\n-DGOOD=1\n-I{include}\n-Iinc{HOSTILE}\n"
    )
    server = _server(tmp_path)
    cleanup.append(server)
    initialize(server, {"cudaLlm": {"debounceMs": 0, "nvccCheck": "save"}}, workspace)
    path = source / f"k{HOSTILE}.cu"
    text = '#include "far.h"\n' + TEXT
    path.write_text(text)
    uri = server.open(path, text)
    shown = _published(server, uri, _nvcc_ran, NVCC_S)
    time.sleep(1)
    assert not list(tmp_path.glob("PWNED*"))
    refused = [d["message"] for d in shown if "EVIL" in d["message"]]
    assert refused and "compile_flags.txt" in refused[0], shown
    (host,) = [d for d in shown if "no_such_host_function" in d["message"]]
    assert host["range"]["start"]["line"] == 2  # on the user's file, found through our link


@needs_nvcc
def test_nvcc_never_reads_the_lsp_pipe(
    tmp_path: Path, workspace: Path, cleanup: list[RawServer]
) -> None:
    server = _server(tmp_path)
    cleanup.append(server)
    initialize(server, {"cudaLlm": {"debounceMs": 0, "nvccCheck": "save"}}, workspace)
    text = '#include "/dev/stdin"\n' + TEXT
    uri = server.open(workspace / "k.cu", text)
    shown = _published(server, uri, lambda ms: any("nvcc not run" in m for m in ms), NVCC_S)
    assert any("/dev/stdin" in d["message"] for d in shown), shown
    for _ in range(10):  # every request still answered: nothing else reads the channel
        hover = server.request(
            "textDocument/hover",
            {"textDocument": {"uri": uri}, "position": {"line": 1, "character": 18}},
        )
        assert "result" in server.response(hover, timeout=30)


@needs_nvcc
def test_no_program_runs_from_the_workspace_or_a_relative_path_entry(
    tmp_path: Path, workspace: Path, cleanup: list[RawServer]
) -> None:
    marker = tmp_path / "PWNED"
    tools = workspace / "bin"
    tools.mkdir()
    for name in ("cu++filt", "c++filt", "g++", "gcc", "nvcc", "nm", "readelf"):
        for where in (tools, workspace):
            script = where / name
            script.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
            script.chmod(script.stat().st_mode | stat.S_IXUSR)
    search = os.pathsep.join(["", ".", str(tools), "bin", os.environ["PATH"]])
    server = _server(tmp_path, path=search)
    cleanup.append(server)
    initialize(server, {"cudaLlm": {"debounceMs": 0, "nvccCheck": "save"}}, workspace)
    template = (
        "template <int B> __global__ void fill(float* o) { o[threadIdx.x] = B; }\n"
        "int main() { fill<4><<<1, 32>>>(nullptr); return no_such_host_function(); }\n"
    )
    uri = server.open(workspace / "k.cu", template)
    _published(server, uri, _nvcc_ran, NVCC_S)  # nvcc, g++ and the demangler ran
    time.sleep(1)
    assert not marker.exists()


@needs_nvcc
def test_a_settings_change_checks_the_open_files_with_nvcc_again(
    tmp_path: Path, workspace: Path, cleanup: list[RawServer]
) -> None:
    server = _server(tmp_path)
    cleanup.append(server)
    initialize(server, {"cudaLlm": {"debounceMs": 0, "nvccCheck": "save"}}, workspace)
    text = "#ifndef FLAG\n#define no_such_host_function() 0\n#endif\n" + TEXT
    uri = server.open(workspace / "k.cu", text)
    _published(server, uri, lambda ms: ms == [] or not _nvcc_ran(ms), 60)
    settings = {"cudaLlm": {"debounceMs": 0, "nvccCheck": "save", "defines": ["FLAG"]}}
    server.notify("workspace/didChangeConfiguration", {"settings": settings})
    # no save: the new define reaches nvcc, whose verdict (a host error) is shown
    _published(server, uri, _nvcc_ran, NVCC_S)


SECRET = "tok_4f1c9e_outside_secret"


def test_an_untrusted_workspace_reads_nothing_outside_it(
    tmp_path: Path, workspace: Path, cleanup: list[RawServer]
) -> None:
    """A project -I and an absolute #include naming a 0600 file outside: refused on the line,
    the file's tokens nowhere (diagnostics, compile cache); a compile_commands.json entry naming
    a device never blocks the analysis."""
    outside = tmp_path / "home"
    outside.mkdir()
    secret = outside / "secret.h"
    secret.write_text(f"{SECRET} {SECRET}\n")
    secret.chmod(0o600)
    (workspace / "compile_flags.txt").write_text(f"-I{outside}\n")
    (tmp_path / "compile_flags.txt").write_text("-DFROM_ABOVE_THE_WORKSPACE=1\n")
    built = workspace / "built"
    built.mkdir()
    database = [{"directory": str(built), "file": "/dev/ptmx", "arguments": ["nvcc", "-c"]}]
    (built / "compile_commands.json").write_text(json.dumps(database))
    server = _server(tmp_path)
    cleanup.append(server)
    options = {"cudaLlm": {"debounceMs": 0}, "workspaceTrusted": False}
    initialize(server, options, workspace)
    kernel = "__global__ void k(float* x) { x[0] = 1.0f; }\n"
    for i, include in enumerate(('"secret.h"', f'"{secret}"')):
        uri = server.open(workspace / f"k{i}.cu", f"#include {include}\n" + kernel)
        shown = server.diagnostics(uri, 1, 60)
        on_include = [d for d in shown if d["range"]["start"]["line"] == 0]
        assert on_include and on_include[0]["severity"] == 1, shown
        assert SECRET not in str(shown)
    # a database whose entry is a device: the file is analysed (not blocked for good)
    uri = server.open(built / "x.cu", "__global__ void bad(float* x) { x[0] = ; }\n")
    assert server.diagnostics(uri, 1, 60)
    cache = tmp_path / "cache"
    for path in cache.rglob("*") if cache.exists() else ():
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_an_added_folder_may_be_read_at_once(
    tmp_path: Path, workspace: Path, cleanup: list[RawServer]
) -> None:
    """Untrusted: a header in a folder added to the workspace is read without a settings change
    (the reading limit follows the folders)."""
    second = tmp_path / "second"
    second.mkdir()
    header = second / "factor.cuh"
    header.write_text("__device__ const float factor = 2.0f;\n")
    server = _server(tmp_path)
    cleanup.append(server)
    initialize(server, {"cudaLlm": {"debounceMs": 0}, "workspaceTrusted": False}, workspace)
    folder = {"uri": second.resolve().as_uri(), "name": "second"}
    server.notify(
        "workspace/didChangeWorkspaceFolders", {"event": {"added": [folder], "removed": []}}
    )
    text = f'#include "{header}"\n__global__ void k(float* x) {{ x[0] = factor; }}\n'
    uri = server.open(workspace / "k.cu", text)
    shown = server.diagnostics(uri, 1, 60)
    assert not [d for d in shown if d["severity"] == 1], shown


def test_trusting_the_workspace_reads_what_was_refused_at_once(
    tmp_path: Path, workspace: Path, cleanup: list[RawServer]
) -> None:
    """What may be read changed, not a setting: the open files are analysed again."""
    outside = tmp_path / "home"
    outside.mkdir()
    header = outside / "factor.cuh"
    header.write_text("__device__ const float factor = 2.0f;\n")
    server = _server(tmp_path)
    cleanup.append(server)
    settings = {"debounceMs": 0}
    initialize(server, {"cudaLlm": settings, "workspaceTrusted": False}, workspace)
    text = f'#include "{header}"\n__global__ void k(float* x) {{ x[0] = factor; }}\n'
    uri = server.open(workspace / "k.cu", text)
    refused = server.diagnostics(uri, 1, 60)
    assert [d for d in refused if d["severity"] == 1], refused
    start = len(server.messages)
    change = {"settings": {"cudaLlm": settings, "workspaceTrusted": True}}
    server.notify("workspace/didChangeConfiguration", change)
    server.wait_for(
        lambda m: (
            m.get("method") == "textDocument/publishDiagnostics"
            and m["params"]["uri"] == uri
            and not [d for d in m["params"]["diagnostics"] if d["severity"] == 1]
        ),
        timeout=60,
    )
    assert len(server.messages) > start
