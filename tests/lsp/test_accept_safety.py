"""Accept in the editor writes device code only, and no model text reaches the editor raw
(docs/design.md, "What an accepted winner may write").

Real server, real NVRTC, real FSR loop and openai SDK against a scripted endpoint on 127.0.0.1;
only the GPU is replaced by recorded outcomes (tests/lsp/data/recording.json: a candidate with
`variant: fast` is correct and twice as fast). Each test works on its own copy of saxpy.cu with
the kernel renamed, so that the scripted endpoint answers it by the kernel's name.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from cuda_llm_lsp.compile.nvcc import find_nvcc
from tests.lsp.conftest import CLIENTS, DATA, SCRATCH, SERVERS, EditorClient, lsp_fixture
from tests.support.scripted_llm import ScriptedLlmServer, kernel_reply

ESCAPES = "\x1b]0;owned\x07\x1b[2J\x1b[31m"


def fast(name: str, helper: str = "") -> str:
    return (
        f"{helper}"
        f'extern "C" __global__ void {name}(int n, float a, const float* x, float* y) {{\n'
        "    // variant: fast\n"
        "    int stride = gridDim.x * blockDim.x;\n"
        "    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {\n"
        "        y[i] = fmaf(a, x[i], y[i]);\n"
        "    }\n"
        "}"
    )


TIMER = (
    "#include <cstdio>\n"
    "struct Timer {\n"
    '    Timer() { std::puts("the model\'s code runs before main"); }\n'
    "};\n"
    "static Timer timer;\n\n"
)
HOST_BRANCH = (
    "__host__ __device__ inline float twice(float v) {\n"
    "#ifndef __CUDA_ARCH__\n"
    "    return host_only_twice(v);\n"
    "#endif\n"
    "    return v + v;\n"
    "}\n\n"
)

ATTACK = (
    "#include <cstdlib>\n"
    "__host__ __device__ float twice(float v) {\n"
    "#ifndef __CUDA_ARCH__\n"
    '    asm(".pushsection .init_array.00101\\n.quad 0\\n.popsection");\n'
    '    std::system("touch PWNED");\n'
    "#endif\n"
    "    return v + v;\n"
    "}\n\n"
)
HELPER = "__device__ inline float twice(float v) { return v + v; }\n\n"

LLM = ScriptedLlmServer(
    [
        {"match": "saxpy_attack", "repeat": -1, "text": kernel_reply(fast("saxpy_attack", ATTACK))},
        {
            "match": "saxpy_unproven",
            "repeat": -1,
            "text": kernel_reply(fast("saxpy_unproven", HELPER)),
        },
        {
            "match": "saxpy_defines",
            "repeat": -1,
            "text": kernel_reply(fast("saxpy_defines", HELPER)),
        },
        {
            "match": "saxpy_host",
            "repeat": -1,
            "text": kernel_reply(fast("saxpy_host", TIMER), note=f"Faster.{ESCAPES} Trust me."),
        },
        {
            "match": "saxpy_filter",
            "repeat": -1,
            "finish_reason": "content_filter",
            "text": f"I cannot{ESCAPES}\u202e continue",
        },
        {
            "match": "saxpy_nvcc",
            "repeat": -1,
            "text": kernel_reply(fast("saxpy_nvcc", HOST_BRANCH)),
        },
    ]
).start()

RECORDED = [sys.executable, str(SERVERS / "recorded_server.py"), str(DATA / "recording.json")]
OPTIONS = {
    "cudaLlm": {
        "debounceMs": 0,
        "baseUrl": LLM.base_url,
        "model": "scripted-model",
        "rounds": 1,
        "candidates": 1,
        "apiKey": "sk-test-not-a-real-key",
    }
}

client = lsp_fixture(server_command=RECORDED, init_options=OPTIONS, clients=CLIENTS[:1])
no_nvcc = lsp_fixture(
    server_command=RECORDED,
    init_options=OPTIONS,
    clients=CLIENTS[:1],
    env={"CUDA_LLM_NVCC": str(SCRATCH / "no-nvcc-here")},
)
with_defines = lsp_fixture(
    server_command=RECORDED,
    init_options={"cudaLlm": {**OPTIONS["cudaLlm"], "defines": ["BLOCK=256"]}},
    clients=CLIENTS[:1],
)


def _copy(name: str) -> Path:
    path = SCRATCH / f"{name}.cu"
    path.write_text((DATA / "saxpy.cu").read_text(encoding="utf-8").replace("saxpy", name))
    return path


async def _command(client: EditorClient, command: str, uri: str, kernel: str) -> Any:
    return await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=command, arguments=[{"uri": uri, "kernel": kernel}])
    )


async def _optimize(client: EditorClient, uri: str, kernel: str) -> list[Any]:
    token = (await _command(client, "cudaLlm.optimize", uri, kernel))["token"]
    await client.wait_for(
        lambda: any(
            isinstance(v, types.WorkDoneProgressEnd) for v in client.progress_reports.get(token, [])
        ),
        timeout=120,
    )
    return list(client.progress_reports[token])


def _shown(client: EditorClient, values: list[Any]) -> str:
    """Everything the editor was shown: messages, progress, diagnostics, suggestions."""
    parts = [m.message for m in client.messages]
    parts += [str(getattr(v, "message", "")) + str(getattr(v, "title", "")) for v in values]
    parts += [d.message for found in client.diagnostics.values() for d in found]
    parts += [str(note) for note in client.suggestion_notes]
    return "\n".join(parts)


async def test_a_reply_with_host_code_is_suggested_without_it(client: EditorClient) -> None:
    """The host object and its type are dropped before the candidate is built: the kernel is
    judged, suggested and applied; the host code never is."""
    path = _copy("saxpy_host")
    uri = client.open(path)
    values = await _optimize(client, uri, "saxpy_host")
    assert await _command(client, "cudaLlm.accept", uri, "saxpy_host") is True
    (applied,) = client.applied_edits
    new = _new_text(applied)
    assert "variant: fast" in new and "Timer" not in new and "timer" not in new
    shown = _shown(client, values)
    assert "\x1b" not in shown


async def test_no_escape_or_bidi_character_of_model_text_reaches_the_editor(
    client: EditorClient,
) -> None:
    uri = client.open(_copy("saxpy_filter"))
    values = await _optimize(client, uri, "saxpy_filter")
    shown = _shown(client, values)
    assert "content filter" in shown  # the reply's own words are shown...
    assert "\x1b" not in shown and "\u202e" not in shown and "\x07" not in shown  # ...harmless
    assert "<U+001B>" in shown


async def test_a_host_only_branch_never_becomes_a_suggestion(client: EditorClient) -> None:
    """A `__host__ __device__` helper with an `#ifndef __CUDA_ARCH__` branch (which NVRTC never
    compiles): refused where the candidate is cleaned, with what to change."""
    path = _copy("saxpy_nvcc")
    uri = client.open(path)
    values = await _optimize(client, uri, "saxpy_nvcc")
    assert await _command(client, "cudaLlm.accept", uri, "saxpy_nvcc") is False
    assert client.applied_edits == []
    assert "host-only branch" in _shown(client, values) or any(
        "compile" in str(getattr(v, "message", "")) for v in values
    )


async def test_the_reported_host_route_never_becomes_a_suggestion(client: EditorClient) -> None:
    """A `__host__ __device__` helper whose host-only branch adds a start-up entry and calls
    `system`: refused where the candidate is cleaned, so there is nothing to accept."""
    path = _copy("saxpy_attack")
    original = path.read_text()
    uri = client.open(path)
    values = await _optimize(client, uri, "saxpy_attack")
    reports = [str(v.message) for v in values if isinstance(v, types.WorkDoneProgressReport)]
    assert any("compile_error" in m or "compile error" in m for m in reports), reports
    assert await _command(client, "cudaLlm.accept", uri, "saxpy_attack") is False
    assert client.applied_edits == [] and client.text(uri) == original
    assert "PWNED" not in client.text(uri)


async def test_accept_asks_before_applying_what_no_build_proved(no_nvcc: EditorClient) -> None:
    """No nvcc: the winner adds a helper, which no build proves free of host code. Accept asks
    (window/showMessageRequest, naming why) before anything is applied: "Cancel" leaves the
    file and the suggestion, "Apply anyway" applies it."""
    client = no_nvcc
    path = _copy("saxpy_unproven")
    original = path.read_text()
    uri = client.open(path)
    await _optimize(client, uri, "saxpy_unproven")
    client.request_answer = "Cancel"
    assert await _command(client, "cudaLlm.accept", uri, "saxpy_unproven") is False
    assert client.applied_edits == [] and client.text(uri) == original
    (asked,) = client.message_requests
    assert "no build proves that it adds no host code (no nvcc here)" in asked.message
    assert [a.title for a in asked.actions or []] == ["Apply anyway", "Cancel"]
    client.request_answer = "Apply anyway"
    assert await _command(client, "cudaLlm.accept", uri, "saxpy_unproven") is True
    (applied,) = client.applied_edits
    assert "__device__ inline float twice" in _new_text(applied)


@pytest.mark.skipif(find_nvcc() is None, reason="no nvcc (the `nvcc` extra)")
async def test_accept_proves_with_the_settings_defines(with_defines: EditorClient) -> None:
    """A file that builds only with `cudaLlm.defines`: the proof is made with them, so Accept
    neither asks nor says the build check was skipped."""
    client = with_defines
    path = SCRATCH / "saxpy_defines.cu"
    text = (DATA / "saxpy.cu").read_text(encoding="utf-8").replace("saxpy", "saxpy_defines")
    path.write_text(
        text.replace(
            "#include <math.h>\n",
            "#include <math.h>\n#ifndef BLOCK\n#error BLOCK comes from the build\n#endif\n",
        )
    )
    uri = client.open(path)
    await _optimize(client, uri, "saxpy_defines")
    assert await _command(client, "cudaLlm.accept", uri, "saxpy_defines") is True
    assert client.message_requests == []
    assert not any("skipped" in m.message for m in client.messages), client.messages
    (applied,) = client.applied_edits
    assert "__device__ inline float twice" in _new_text(applied)


def _new_text(params: types.ApplyWorkspaceEditParams) -> str:
    """The text an applied edit puts in (Accept sends one edit)."""
    edit = params.edit
    if edit.document_changes:
        (change,) = edit.document_changes
        assert isinstance(change, types.TextDocumentEdit)
        return "".join(e.new_text for e in change.edits)
    return "".join(e.new_text for edits in (edit.changes or {}).values() for e in edits)
