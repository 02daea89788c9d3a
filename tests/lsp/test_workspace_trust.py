"""A workspace's settings cannot make NVRTC read or write files, nor point outside the
workspace unless it is trusted (issue 25, finding 1), over real stdio."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from lsprotocol import types

from tests.lsp.conftest import DATA, SCRATCH, EditorClient, lsp_fixture
from tests.lsp.hardening import (
    DIAGNOSTICS_S,
    KERNEL,
    initialize,
    messages,
    on_line,
    published,
)
from tests.support.raw_lsp import RawServer, server_env


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    home = tmp_path / "home"  # where a hostile flag would write: the user's home
    home.mkdir()
    yield workspace, home


def test_workspace_nvrtc_flags_cannot_write_files(scratch: tuple[Path, Path]) -> None:
    workspace, home = scratch
    targets = [home / "bashrc.pch", home / "time.csv", home / "trace.json"]
    targets[0].write_text("the user's file\n")
    flags = [
        f"--create-pch={targets[0]}",
        f"--time={targets[1]}",
        f"--fdevice-time-trace={targets[2]}",
        "--use_fast_math",
    ]
    options = {"cudaLlm": {"nvrtcFlags": flags}, "workspaceTrusted": False}
    server = RawServer(env=server_env(workspace.parent))
    try:
        initialize(server, options, workspace)
        source = workspace / "k.cu"
        # no error: code generation runs too (NVRTC's --time writes at every compile)
        good = KERNEL.replace("undefined_factor", "1.0f")
        uri = server.open(source, good)
        diagnostics = server.diagnostics(uri, 1, DIAGNOSTICS_S)
        assert not [d for d in diagnostics if d["severity"] == 1], diagnostics
        time.sleep(3)  # the background code generation's compile
        assert targets[0].read_bytes() == b"the user's file\n"
        assert not targets[1].exists() and not targets[2].exists()
        shown = " ".join(messages(server))
        for flag in flags[:3]:
            assert f"'{flag.split('=')[0]}=" in shown, shown
        assert "left out" in shown and "--use_fast_math" not in shown
        assert server.alive()
    finally:
        server.close()


def test_untrusted_include_paths_stay_in_the_workspace(scratch: tuple[Path, Path]) -> None:
    workspace, home = scratch
    outside = home / "include"
    outside.mkdir()
    (outside / "factor.cuh").write_text("__device__ const float undefined_factor = 3.0f;\n")
    settings = {"includePaths": [str(outside)]}
    server = RawServer(env=server_env(workspace.parent))
    try:
        initialize(server, {"cudaLlm": settings, "workspaceTrusted": False}, workspace)
        text = '#include "factor.cuh"\n' + KERNEL
        uri = server.open(workspace / "k.cu", text)
        diagnostics = server.diagnostics(uri, 1, DIAGNOSTICS_S)
        assert any("cannot find include file" in m for m in on_line(diagnostics, 0)), diagnostics
        shown = " ".join(messages(server))
        assert "cudaLlm.includePaths" in shown and "not trusted" in shown, shown
        # the user trusts the workspace: the same path now applies
        start = len(server.messages)
        change = {"settings": {"cudaLlm": settings, "workspaceTrusted": True}}
        server.notify("workspace/didChangeConfiguration", change)
        diagnostics = published(server, uri, start, DIAGNOSTICS_S)
        assert not [d for d in diagnostics if d["severity"] == 1], diagnostics
    finally:
        server.close()


def test_include_paths_inside_an_untrusted_workspace_apply(scratch: tuple[Path, Path]) -> None:
    workspace, _ = scratch
    inside = workspace / "include"
    inside.mkdir()
    (inside / "factor.cuh").write_text("__device__ const float undefined_factor = 3.0f;\n")
    options = {"cudaLlm": {"includePaths": [str(inside)]}, "workspaceTrusted": False}
    server = RawServer(env=server_env(workspace.parent))
    try:
        initialize(server, options, workspace)
        (workspace / "src").mkdir()
        uri = server.open(workspace / "src" / "k.cu", '#include "factor.cuh"\n' + KERNEL)
        diagnostics = server.diagnostics(uri, 1, DIAGNOSTICS_S)
        assert not [d for d in diagnostics if d["severity"] == 1], diagnostics
        assert not [m for m in messages(server) if "includePaths" in m]
    finally:
        server.close()


PCH = SCRATCH / "trust-pulled.pch"
pulled = lsp_fixture(
    init_options={"cudaLlm": {"debounceMs": 0}, "workspaceTrusted": False},
    configuration={
        "cudaLlm": {"nvrtcFlags": [f"--create-pch={PCH}"], "includePaths": ["/usr/include"]}
    },
)


async def test_workspace_configuration_is_restricted_too(pulled: EditorClient) -> None:
    """The editor's own path: settings pulled with workspace/configuration (pushed for Neovim)."""
    PCH.unlink(missing_ok=True)
    if not pulled.supports_configuration_pull:
        pulled.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings=pulled.get_configuration())
        )

    def said(text: str) -> bool:
        return any(text in m.message for m in pulled.messages)

    await pulled.wait_for(lambda: said("--create-pch") and said("cudaLlm.includePaths"))
    assert said("not trusted")
    uri = pulled.open(DATA / "trust_pulled.cu", KERNEL.replace("undefined_factor", "1.0f"))
    await pulled.wait_for(lambda: any(p.uri == uri and p.version == 1 for p in pulled.published))
    await asyncio.sleep(2)  # the background code generation
    assert not PCH.exists()


def test_an_added_workspace_folder_may_hold_include_paths(scratch: tuple[Path, Path]) -> None:
    workspace, home = scratch
    second = home / "second"
    (second / "include").mkdir(parents=True)
    (second / "include" / "factor.cuh").write_text("__device__ const float undefined_factor = 2;\n")
    settings = {"cudaLlm": {"includePaths": [str(second / "include")]}, "workspaceTrusted": False}
    server = RawServer(env=server_env(workspace.parent))
    try:
        initialize(server, {"workspaceTrusted": False}, workspace)
        folder = {"uri": second.resolve().as_uri(), "name": "second"}
        server.notify(
            "workspace/didChangeWorkspaceFolders", {"event": {"added": [folder], "removed": []}}
        )
        server.notify("workspace/didChangeConfiguration", {"settings": settings})
        uri = server.open(workspace / "k.cu", '#include "factor.cuh"\n' + KERNEL)
        diagnostics = server.diagnostics(uri, 1, DIAGNOSTICS_S)
        assert not [d for d in diagnostics if d["severity"] == 1], diagnostics
        assert not [m for m in messages(server) if "includePaths" in m], messages(server)
    finally:
        server.close()


# Issue 36, item 6: what trust a client's flag means. Absent: trusted (the client has no notion
# of it: the settings are the user's own); anything but a boolean: untrusted, never trust.
TRUST_FLAGS = {
    "absent": (None, True),
    "true": (True, True),
    "false": (False, False),
    "the string false": ("false", False),
    "zero": (0, False),
    "one": (1, False),
    "null": ("null", False),
    "an object": ({"trusted": True}, False),
}


@pytest.mark.parametrize("case", sorted(TRUST_FLAGS))
def test_only_a_boolean_flag_or_none_is_read_as_trust(
    scratch: tuple[Path, Path], case: str
) -> None:
    workspace, home = scratch
    sent, trusted = TRUST_FLAGS[case]
    outside = home / "include"
    outside.mkdir()
    (outside / "factor.cuh").write_text("__device__ const float undefined_factor = 3.0f;\n")
    options: dict[str, object] = {"cudaLlm": {"includePaths": [str(outside)]}}
    if sent is not None:
        options["workspaceTrusted"] = None if sent == "null" else sent
    server = RawServer(env=server_env(workspace.parent))
    try:
        initialize(server, options, workspace)
        uri = server.open(workspace / "k.cu", '#include "factor.cuh"\n' + KERNEL)
        diagnostics = server.diagnostics(uri, 1, DIAGNOSTICS_S)
        refused = any("cannot find include file" in m for m in on_line(diagnostics, 0))
        assert refused is not trusted, diagnostics
        said_untrusted = any("not trusted" in m for m in messages(server))
        assert said_untrusted is not trusted, messages(server)
        if not isinstance(sent, bool) and sent is not None:
            assert "workspaceTrusted is" in server.stderr(), server.stderr()
    finally:
        server.close()


def test_a_non_boolean_flag_in_a_settings_change_makes_the_workspace_untrusted(
    scratch: tuple[Path, Path],
) -> None:
    workspace, home = scratch
    outside = home / "include"
    outside.mkdir()
    (outside / "factor.cuh").write_text("__device__ const float undefined_factor = 3.0f;\n")
    settings = {"includePaths": [str(outside)]}
    server = RawServer(env=server_env(workspace.parent))
    try:
        initialize(server, {"cudaLlm": settings, "workspaceTrusted": True}, workspace)
        uri = server.open(workspace / "k.cu", '#include "factor.cuh"\n' + KERNEL)
        diagnostics = server.diagnostics(uri, 1, DIAGNOSTICS_S)
        assert not [d for d in diagnostics if d["severity"] == 1], diagnostics
        start = len(server.messages)
        change = {"settings": {"cudaLlm": settings, "workspaceTrusted": "yes"}}
        server.notify("workspace/didChangeConfiguration", change)
        diagnostics = published(server, uri, start, DIAGNOSTICS_S)
        assert any("cannot find include file" in m for m in on_line(diagnostics, 0)), diagnostics
    finally:
        server.close()


@pytest.mark.parametrize("trusted", [True, False], ids=["trusted", "untrusted"])
def test_a_relative_include_path_is_the_workspace_folders(
    scratch: tuple[Path, Path], trusted: bool
) -> None:
    """The server no longer starts in the workspace folder (issue 36): `include` still means
    the project's `include`, not one of the server's working directory."""
    workspace, _ = scratch
    (workspace / "include").mkdir()
    (workspace / "include" / "factor.cuh").write_text(
        "__device__ const float undefined_factor = 3.0f;\n"
    )
    options = {"cudaLlm": {"includePaths": ["include"]}, "workspaceTrusted": trusted}
    server = RawServer(env=server_env(workspace.parent))
    try:
        initialize(server, options, workspace)
        (workspace / "src").mkdir()
        uri = server.open(workspace / "src" / "k.cu", '#include "factor.cuh"\n' + KERNEL)
        diagnostics = server.diagnostics(uri, 1, DIAGNOSTICS_S)
        assert not [d for d in diagnostics if d["severity"] == 1], diagnostics
        assert not [m for m in messages(server) if "includePaths" in m], messages(server)
    finally:
        server.close()
