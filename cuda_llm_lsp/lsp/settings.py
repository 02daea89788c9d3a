"""Settings: `initializationOptions`, then `workspace/configuration` (section `cudaLlm`), and
`workspace/didChangeConfiguration`.

Bad values never stop the server: they are shown once with `window/showMessage` and the
defaults stay. The API key is taken only from the environment (read by the openai SDK) or from
`initializationOptions`; it is never logged nor repeated in a message.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from lsprotocol import types

from cuda_llm_lsp.config import Settings, settings_from_mapping
from cuda_llm_lsp.lsp.state import CudaLlmServer

log = logging.getLogger(__name__)
SECTION = "cudaLlm"
_COMPILE_FIELDS = ("arch", "include_paths", "defines", "nvrtc_flags", "std", "compile_commands_dir")
_GPU_FIELDS = ("gpus", "cluster")


def register(server: CudaLlmServer) -> None:
    @server.feature(types.INITIALIZE)
    def on_initialize(ls: CudaLlmServer, params: types.InitializeParams) -> None:
        apply(ls, params.initialization_options, allow_api_key=True, source="initializationOptions")

    @server.feature(types.INITIALIZED)
    async def on_initialized(ls: CudaLlmServer, params: types.InitializedParams) -> None:
        await pull(ls)

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def on_changed(ls: CudaLlmServer, params: types.DidChangeConfigurationParams) -> None:
        if not await pull(ls):
            changed(ls, apply(ls, params.settings, allow_api_key=False, source="settings"))


def supports_pull(server: CudaLlmServer) -> bool:
    workspace = server.client_capabilities.workspace
    return bool(workspace and workspace.configuration)


async def pull(server: CudaLlmServer) -> bool:
    """Ask the client for the `cudaLlm` section; False when the client cannot answer."""
    if not supports_pull(server):
        return False
    try:
        answer = await server.workspace_configuration_async(
            types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)])
        )
    except Exception as exc:
        log.warning("workspace/configuration failed: %s", exc)
        return False
    section = answer[0] if answer else None
    changed(server, apply(server, section, allow_api_key=False, source="workspace settings"))
    return True


def apply(server: CudaLlmServer, data: Any, *, allow_api_key: bool, source: str) -> Settings:
    """Merge `data` into the server's settings; returns the settings before the change."""
    before = server.settings
    if not isinstance(data, Mapping):
        if data not in (None, [], ""):
            server.message(
                f"cuda-llm: ignoring {source}: expected an object with cudaLlm settings",
                types.MessageType.Warning,
            )
        return before
    inner = data.get(SECTION, data)
    if isinstance(inner, Mapping) and not allow_api_key and "apiKey" in inner:
        inner = {k: v for k, v in inner.items() if k != "apiKey"}
        server.message(
            "cuda-llm: cudaLlm.apiKey is ignored in workspace settings (they may be shared or "
            "committed); set OPENAI_API_KEY in the server's environment, pass apiKey in "
            "initializationOptions, or in VS Code run 'CUDA-LLM: Set API Key'",
            types.MessageType.Warning,
        )
    settings, problems = settings_from_mapping({SECTION: inner}, base=before)
    if not allow_api_key:
        settings = replace(settings, api_key=before.api_key)
    server.settings = settings
    if problems:
        server.message(f"cuda-llm ({source}): " + "; ".join(problems), types.MessageType.Warning)
    return before


def changed(server: CudaLlmServer, before: Settings) -> None:
    """Re-analyse open documents when a setting that affects compiles changed; a new evaluator
    for the next job when `cudaLlm.gpus` or `cudaLlm.cluster` changed."""
    if any(getattr(before, f) != getattr(server.settings, f) for f in _COMPILE_FIELDS):
        server.reanalyze_all()
    if any(getattr(before, f) != getattr(server.settings, f) for f in _GPU_FIELDS):
        server.retire_evaluator()
