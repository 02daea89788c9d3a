"""Settings from initializationOptions and workspace/configuration; bad values and secrets."""

from __future__ import annotations

import sys

from lsprotocol import types

from tests.lsp.conftest import DATA, SCRATCH, SERVERS, EditorClient, lsp_fixture

SECRET_INIT = "sk-init-secret-0123456789"
SECRET_WORKSPACE = "sk-workspace-secret-0123456789"

client = lsp_fixture(
    init_options={"cudaLlm": {"debounceMs": 0, "rounds": "many", "apiKey": SECRET_INIT}},
    configuration={"cudaLlm": {"defines": ["FACTOR=2.0f"], "apiKey": SECRET_WORKSPACE}},
)

LOG = SCRATCH / "server-debug.log"
logged = lsp_fixture(
    server_command=[
        sys.executable,
        "-m",
        "cuda_llm_lsp",
        "--log-file",
        str(LOG),
        "--log-level",
        "DEBUG",
    ],
    init_options={"cudaLlm": {"apiKey": SECRET_INIT}},
    clients=["visual-studio-code"],
)

no_nvrtc = lsp_fixture(server_command=[sys.executable, str(SERVERS / "no_nvrtc_server.py")])

SOURCE = """\
extern "C" __global__ void scale(float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] *= FACTOR;
}
"""


def _all_text(client: EditorClient) -> str:
    return "\n".join(m.message for m in client.messages) + "\n".join(
        m.message for m in client.log_messages
    )


async def test_bad_setting_is_shown_and_the_default_kept(client: EditorClient) -> None:
    await client.wait_for(lambda: any("cudaLlm.rounds" in m.message for m in client.messages))
    message = next(m for m in client.messages if "cudaLlm.rounds" in m.message)
    assert message.type == types.MessageType.Warning
    assert "using the default" in message.message


async def test_workspace_configuration_defines_reach_the_compiler(client: EditorClient) -> None:
    if not client.supports_configuration_pull:  # e.g. Neovim 0.7: settings are pushed
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings=client.get_configuration())
        )
    path = DATA / "uses_define.cu"
    uri = client.open(path, SOURCE)
    await client.wait_for(
        lambda: any(p.uri == uri and p.version == 1 and not p.diagnostics for p in client.published)
    )


async def test_api_keys_are_never_echoed(client: EditorClient) -> None:
    await client.wait_for(lambda: any("cudaLlm.rounds" in m.message for m in client.messages))
    if client.supports_configuration_pull:  # the workspace key is refused, without echoing it
        await client.wait_for(lambda: any("apiKey" in m.message for m in client.messages))
    text = _all_text(client)
    assert SECRET_INIT not in text and SECRET_WORKSPACE not in text


async def test_missing_nvrtc_is_reported_and_the_server_keeps_running(
    no_nvrtc: EditorClient,
) -> None:
    uri = no_nvrtc.open(DATA / "broken.cu")
    await no_nvrtc.wait_for(lambda: any("NVRTC" in m.message for m in no_nvrtc.messages))
    message = next(m for m in no_nvrtc.messages if "NVRTC" in m.message)
    assert message.type == types.MessageType.Error
    symbols = await no_nvrtc.text_document_document_symbol_async(
        types.DocumentSymbolParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    assert [s.name for s in symbols] == ["scale"]


async def test_api_key_stays_out_of_a_debug_log(logged: EditorClient) -> None:
    uri = logged.open(DATA / "saxpy.cu")
    await logged.diagnostics_for(uri, 1)
    text = LOG.read_text(encoding="utf-8")
    assert "initialize" in text.lower() and "<redacted>" in text  # the request was logged...
    assert SECRET_INIT not in text  # ...without the key
