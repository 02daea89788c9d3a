"""Optimize on a machine with neither a GPU nor an API key names both, each with what brings it
(was: only the GPU, issue 41)."""

from __future__ import annotations

import pytest
from lsprotocol import types

from tests.gpu.conftest import no_gpu_reason
from tests.lsp.conftest import DATA, EditorClient, lsp_fixture

pytestmark = pytest.mark.skipif(
    no_gpu_reason() is None, reason="this machine has a GPU: the no-GPU messages cannot appear"
)

client = lsp_fixture(
    init_options={"cudaLlm": {"debounceMs": 0}},
    env={"OPENAI_API_KEY": "", "OPENAI_BASE_URL": "", "CUDA_LLM_EVALUATOR": ""},
    clients=["visual-studio-code"],
)


async def test_optimize_without_a_gpu_and_a_key_names_both(client: EditorClient) -> None:
    uri = client.open(DATA / "saxpy.cu")
    await client.diagnostics_for(uri, 1)
    answer = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(
            command="cudaLlm.optimize", arguments=[{"uri": uri, "kernel": "saxpy"}]
        )
    )
    message = await client.wait_for(
        lambda: [m for m in client.messages if "no CUDA GPU" in m.message], timeout=60
    )
    said = message[0].message
    assert answer["token"] and "(1) a CUDA GPU: no CUDA GPU found" in said, said
    assert "(2) an API key for the model" in said and "Set API Key" in said, said
    assert "cudaLlm.baseUrl" in said, said
