"""pytest-lsp plumbing shared by the LSP end-to-end tests.

`lsp_fixture(...)` makes a client fixture parametrised over the `visual-studio-code` and
`neovim` capability sets, talking to the real server over stdio. The client records every
`publishDiagnostics` (with its version), every `workspace/applyEdit` and every
`cudaLlm/suggestion` notification, and keeps the documents it opened so tests can apply edits
the way an editor would.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Union

import pytest_lsp
from lsprotocol import types
from pygls.protocol import default_converter
from pygls.workspace import TextDocument
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data"
SERVERS = Path(__file__).parent / "servers"
CLIENTS = ["visual-studio-code", "neovim", "neovim@v0.7.0"]
SERVER = [sys.executable, "-m", "cuda_llm_lsp"]

# History and previews go to a scratch directory, never the user's.
SCRATCH = Path(tempfile.mkdtemp(prefix="cuda-llm-lsp-tests-"))


def server_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        CUDA_LLM_DATA_DIR=str(SCRATCH / "data"),
        XDG_CACHE_HOME=str(SCRATCH / "cache"),
        PYTHONPATH=str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""),
    )
    env.update(extra)
    return env


class ProgressRefused(Exception):
    """Raised by the test client to answer window/workDoneProgress/create with an error."""


class EditorClient(LanguageClient):
    """A pytest-lsp client that also records what an editor would see and keeps its texts."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.published: list[types.PublishDiagnosticsParams] = []
        self.applied_edits: list[types.ApplyWorkspaceEditParams] = []
        self.suggestion_notes: list[dict[str, Any]] = []
        self.apply_answer = True
        self.message_requests: list[types.ShowMessageRequestParams] = []
        self.request_answer: str | None = None  # the action window/showMessageRequest picks
        self.lens_refreshes = 0  # workspace/codeLens/refresh requests received
        self.refuse_progress = False  # answer window/workDoneProgress/create with an error
        self.docs: dict[str, TextDocument] = {}
        self.kind = ""  # the capability set this client was initialized with
        self.init_result: types.InitializeResult | None = None

    def report_server_error(self, error: Exception, source: Any) -> None:
        if isinstance(sys.exc_info()[1], ProgressRefused):
            return  # a refusal the test asked for, answered to the server as an error
        super().report_server_error(error, source)

    def units(self, text: str) -> int:
        """Length of `text` in the negotiated position encoding's code units."""
        encoding = self.init_result.capabilities.position_encoding if self.init_result else None
        if encoding == types.PositionEncodingKind.Utf8:
            return len(text.encode("utf-8"))
        if encoding == types.PositionEncodingKind.Utf32:
            return len(text)
        return len(text.encode("utf-16-le")) // 2

    @property
    def supports_configuration_pull(self) -> bool:
        workspace = self.capabilities.workspace if self.capabilities else None
        return bool(workspace and workspace.configuration)

    # --- documents the way an editor keeps them -------------------------------------------

    def open(self, path: Path, text: str | None = None) -> str:
        uri = path.resolve().as_uri()
        text = path.read_text(encoding="utf-8") if text is None else text
        self.docs[uri] = TextDocument(uri, text, version=1)
        self.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(
                    uri=uri, language_id="cuda-cpp", version=1, text=text
                )
            )
        )
        return uri

    def change(self, uri: str, edits: list[types.TextEdit] | str) -> int:
        """Apply `edits` (or replace the whole text) and send didChange; returns the version."""
        doc = self.docs[uri]
        if isinstance(edits, str):
            changes: list[types.TextDocumentContentChangeEvent] = [
                types.TextDocumentContentChangeWholeDocument(text=edits)
            ]
        else:
            ordered = sorted(
                edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True
            )
            changes = [
                types.TextDocumentContentChangePartial(range=e.range, text=e.new_text)
                for e in ordered
            ]
        for change in changes:
            doc.apply_change(change)
        doc.version = (doc.version or 0) + 1
        self.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=doc.version),
                content_changes=changes,
            )
        )
        return doc.version

    def text(self, uri: str) -> str:
        return self.docs[uri].source

    def doc_version(self, uri: str) -> int:
        return self.docs[uri].version or 0

    async def wait_for(self, predicate: Callable[[], Any], timeout: float = 30.0) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            await asyncio.sleep(0.02)
        raise AssertionError(f"timed out after {timeout} s waiting for {predicate}")

    async def diagnostics_for(self, uri: str, version: int, timeout: float = 60.0) -> list[Any]:
        """The diagnostics published for exactly `version` of `uri` (waits for them)."""

        def found() -> Any:
            for params in reversed(self.published):
                if params.uri == uri and params.version == version:
                    return params
            return None

        params = await self.wait_for(found, timeout)
        return list(params.diagnostics)


def _publish(client: EditorClient, params: types.PublishDiagnosticsParams) -> None:
    client.diagnostics[params.uri] = params.diagnostics
    client.published.append(params)


def _apply_edit(
    client: EditorClient, params: types.ApplyWorkspaceEditParams
) -> types.ApplyWorkspaceEditResult:
    client.applied_edits.append(params)
    if not client.apply_answer:
        return types.ApplyWorkspaceEditResult(applied=False, failure_reason="declined by test")
    return types.ApplyWorkspaceEditResult(applied=True)


def _message_request(
    client: EditorClient, params: types.ShowMessageRequestParams
) -> types.MessageActionItem | None:
    client.message_requests.append(params)
    if client.request_answer is None:
        return None
    return types.MessageActionItem(title=client.request_answer)


def _plain(value: Any) -> Any:
    """pygls hands custom notifications over as named tuples: back to plain JSON values."""
    if hasattr(value, "_asdict"):
        return {k: _plain(v) for k, v in value._asdict().items()}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _suggestion(client: EditorClient, params: Any) -> None:
    client.suggestion_notes.append(_plain(params))


def _create_progress(client: EditorClient, params: types.WorkDoneProgressCreateParams) -> None:
    if client.refuse_progress:
        raise ProgressRefused("this editor refuses server-initiated progress")
    client.progress_reports.setdefault(params.token, [])


def _code_lens_refresh(client: EditorClient, params: None) -> None:
    client.lens_refreshes += 1


def make_client() -> EditorClient:
    client = EditorClient(converter_factory=default_converter)
    features = dict(DEFAULT_CLIENT_FEATURES)
    features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = _publish
    features[types.WORKSPACE_APPLY_EDIT] = _apply_edit
    features[types.WINDOW_SHOW_MESSAGE_REQUEST] = _message_request
    features["cudaLlm/suggestion"] = _suggestion
    features[types.WORKSPACE_CODE_LENS_REFRESH] = _code_lens_refresh
    features[types.WINDOW_WORK_DONE_PROGRESS_CREATE] = _create_progress
    register_lsp_features(client, features)
    _fix_code_action_hook(client)
    return client


def _fix_code_action_hook(client: EditorClient) -> None:
    """lsprotocol reads every code action that carries a command as a bare `Command`; a
    `CodeAction` has a command *object*. Tell them apart properly on the test client."""
    converter = client.protocol._converter

    def hook(value: Any, _: type) -> types.Command | types.CodeAction:
        if isinstance(value.get("command"), str):
            return converter.structure(value, types.Command)
        return converter.structure(value, types.CodeAction)

    converter.register_structure_hook(types.Command | types.CodeAction, hook)
    converter.register_structure_hook(Union[types.Command, types.CodeAction], hook)  # noqa: UP007


def lsp_fixture(
    *,
    init_options: dict[str, Any] | None = None,
    configuration: dict[str, Any] | None = None,
    server_command: list[str] | None = None,
    env: dict[str, str] | None = None,
    clients: list[str] | None = None,
    experimental: dict[str, Any] | None = None,
) -> Any:
    """A client fixture for the real server, one test per capability set (with `experimental`
    as its `capabilities.experimental`, e.g. the VS Code extension's `cudaLlm` block)."""

    @pytest_lsp.fixture(
        params=clients or CLIENTS,
        config=ClientServerConfig(
            server_command=server_command or SERVER,
            client_factory=make_client,
            server_env=server_env(**(env or {})),
        ),
    )
    async def client(request: Any, lsp_client: EditorClient):  # type: ignore[no-untyped-def]
        lsp_client.kind = request.param
        if configuration is not None:
            lsp_client.set_configuration(configuration)
        capabilities = client_capabilities(request.param)
        if experimental is not None:
            capabilities.experimental = experimental
        lsp_client.init_result = await lsp_client.initialize_session(
            types.InitializeParams(
                capabilities=capabilities,
                initialization_options=init_options or {"cudaLlm": {"debounceMs": 50}},
                root_uri=DATA.as_uri(),
                workspace_folders=[types.WorkspaceFolder(uri=DATA.as_uri(), name="data")],
            )
        )
        yield
        await lsp_client.shutdown_session()

    return client
