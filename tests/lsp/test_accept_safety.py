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

LLM = ScriptedLlmServer(
    [
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


async def test_a_reply_with_host_code_never_becomes_a_suggestion(client: EditorClient) -> None:
    path = _copy("saxpy_host")
    original = path.read_text()
    uri = client.open(path)
    values = await _optimize(client, uri, "saxpy_host")
    reports = [str(v.message) for v in values if isinstance(v, types.WorkDoneProgressReport)]
    assert any("compile_error" in m or "compile error" in m for m in reports), reports
    assert await _command(client, "cudaLlm.accept", uri, "saxpy_host") is False
    assert client.applied_edits == []
    assert client.text(uri) == original
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


@pytest.mark.skipif(find_nvcc() is None, reason="no nvcc (the `nvcc` extra)")
async def test_accept_refuses_a_suggestion_whose_file_nvcc_does_not_build(
    client: EditorClient,
) -> None:
    """A `__host__ __device__` helper is device-side, so the candidate is judged and suggested;
    its host branch (never compiled by NVRTC) breaks the whole file, which the check before
    Accept builds with nvcc: not applied, the reason shown."""
    path = _copy("saxpy_nvcc")
    uri = client.open(path)
    await _optimize(client, uri, "saxpy_nvcc")
    assert await _command(client, "cudaLlm.accept", uri, "saxpy_nvcc") is False
    assert client.applied_edits == []
    refusal = next(m for m in client.messages if "was not applied" in m.message)
    assert refusal.type == types.MessageType.Error
    assert "does not build with nvcc" in refusal.message and "host_only_twice" in refusal.message
