"""Without a GPU, Benchmark and Optimize end with a clear message (and the server carries on)."""

from __future__ import annotations

import pytest
from lsprotocol import types

from tests.gpu.conftest import no_gpu_reason
from tests.lsp.conftest import DATA, EditorClient, lsp_fixture

pytestmark = pytest.mark.skipif(
    no_gpu_reason() is None, reason="this machine has a GPU: the no-GPU messages cannot appear"
)

client = lsp_fixture(
    init_options={"cudaLlm": {"debounceMs": 0, "baseUrl": "http://127.0.0.1:9/v1"}},
    clients=["visual-studio-code"],
)


@pytest.mark.parametrize("command", ["cudaLlm.benchmark", "cudaLlm.optimize"])
async def test_no_gpu_gives_a_clear_message(client: EditorClient, command: str) -> None:
    uri = client.open(DATA / "saxpy.cu")
    await client.diagnostics_for(uri, 1)
    answer = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=command, arguments=[{"uri": uri, "kernel": "saxpy"}])
    )
    token = answer["token"]
    await client.wait_for(
        lambda: any(
            isinstance(v, types.WorkDoneProgressEnd) for v in client.progress_reports.get(token, [])
        ),
        timeout=60,
    )
    message = await client.wait_for(
        lambda: [m for m in client.messages if "no CUDA GPU" in m.message], timeout=10
    )
    said = message[0].message  # one sentence: what is missing, what works anyway, where to look
    assert said.startswith("cuda-llm: ") and "saxpy: no CUDA GPU found on this machine" in said
    assert "system search" not in said, said  # not a library's wording
    assert "cudaLlm.demo" in said and "nvidia-smi" in message[0].message
    assert message[0].type == types.MessageType.Warning
    symbols = await client.text_document_document_symbol_async(
        types.DocumentSymbolParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    assert [s.name for s in symbols] == ["saxpy", "scale_rows"]
