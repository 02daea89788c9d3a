"""Settings: `initializationOptions`, then `workspace/configuration` (section `cudaLlm`), and
`workspace/didChangeConfiguration`.

Bad values never stop the server: they are shown once with `window/showMessage` and the
defaults stay. The API key is taken only from the environment (read by the openai SDK) or from
`initializationOptions`; it is never logged nor repeated in a message, and is redacted from
everything the server writes (`redact`).

Workspace trust: a repository's `.vscode/settings.json` is not the user's word. The client
says whether the workspace is trusted (`initializationOptions.workspaceTrusted`, and
`workspaceTrusted` next to `cudaLlm` in `workspace/didChangeConfiguration`). Absent: trusted, the
client having no notion of trust (its settings are the user's own config; docs/neovim.lua sends
`vim.g.cuda_llm_trusted`); a value that is not a boolean (`"false"`, `0`, `null`): untrusted,
with a warning in the log, never read as trust. Whatever the trust, NVRTC options pass
`compile.flags`'s allow-list and defines must be defines; in an untrusted workspace include
paths (`includePaths`, `-I` options) must lie inside the workspace folders or the toolkit. The
VS Code extension also sends no workspace value of a restricted setting in Restricted Mode. A
refused value is left out and said in a message, never applied silently.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from lsprotocol import types
from pygls import uris

from cuda_llm_lsp.config import BY_FIELD, Settings, settings_from_mapping
from cuda_llm_lsp.engine.analysis import (
    Trust,
    allowed_flags,
    define_problem,
    keep_pch,
    set_workspace,
)
from cuda_llm_lsp.lsp.state import CudaLlmServer
from cuda_llm_lsp.redact import register_secret

log = logging.getLogger(__name__)
SECTION = "cudaLlm"
_COMPILE_FIELDS = ("arch", "include_paths", "defines", "nvrtc_flags", "std", "compile_commands_dir")
_GPU_FIELDS = ("gpus", "cluster")
# The program the capture actions run: in an untrusted workspace, taken only from
# `initializationOptions` (the client's start, from user settings), never from a pull or a
# change, which may carry the workspace's value.
_USER_ONLY = ("capture_command", "capture_cwd")
TRUST_KEY = "workspaceTrusted"  # beside `cudaLlm` in initializationOptions and change params


def trust_flag(sent: Any) -> bool | None:
    """The client's `workspaceTrusted` beside `cudaLlm`: None when it sends none; a value that is
    not a boolean is False (fail closed: a client's bug must not read as trust), logged."""
    if not isinstance(sent, Mapping) or TRUST_KEY not in sent:
        return None
    value = sent[TRUST_KEY]
    if isinstance(value, bool):
        return value
    log.warning("%s is %.40r, not true or false: the workspace is untrusted", TRUST_KEY, value)
    return False


def register(server: CudaLlmServer) -> None:
    @server.feature(types.INITIALIZE)
    def on_initialize(ls: CudaLlmServer, params: types.InitializeParams) -> None:
        options = params.initialization_options
        ls.trust = Trust(trust_flag(options) is not False, workspace_roots(params))
        set_workspace(ls.trust)  # what is read, and no program run from the folders
        apply(ls, options, allow_api_key=True, source="initializationOptions")

    @server.feature(types.INITIALIZED)
    async def on_initialized(ls: CudaLlmServer, params: types.InitializedParams) -> None:
        ls.start_compile_processes()  # NVRTC loads while the client opens its first file
        await pull(ls)

    @server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    def on_folders(ls: CudaLlmServer, params: types.DidChangeWorkspaceFoldersParams) -> None:
        if set_workspace(_current_trust(ls)):  # pygls has updated the folders: what may be read
            ls.reanalyze_all()

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def on_changed(ls: CudaLlmServer, params: types.DidChangeConfigurationParams) -> None:
        flag = trust_flag(params.settings)
        if flag is not None:
            ls.trust = replace(ls.trust, trusted=flag)
        if not await pull(ls):
            changed(ls, apply(ls, params.settings, allow_api_key=False, source="settings"))


def workspace_roots(params: types.InitializeParams) -> tuple[str, ...]:
    """The workspace folders' paths (or the root's): where an untrusted workspace may point."""
    folders = [f.uri for f in params.workspace_folders or ()]
    if not folders and params.root_uri:
        folders = [params.root_uri]
    paths = [_path_of(u) for u in folders]
    if not folders and params.root_path:
        paths = [params.root_path]
    return tuple(p for p in paths if p)


def _current_trust(server: CudaLlmServer) -> Trust:
    """`server.trust` with the workspace's folders as they are now (folders come and go)."""
    try:
        folders = [f.uri for f in server.workspace.folders.values()]
    except Exception:  # before `initialize`: the folders it named
        return server.trust
    paths = tuple(p for p in (_path_of(u) for u in folders) if p)
    return replace(server.trust, roots=paths) if paths else server.trust


def _path_of(uri: str) -> str | None:
    try:
        return uris.to_fs_path(uri)
    except Exception:  # a malformed URI names no folder
        return None


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
    register_secret(settings.api_key)
    trust = _current_trust(server)
    settings = anchored(settings, trust.roots)
    moved = set_workspace(trust)
    settings, refused = restrict(settings, trust)
    if not trust.trusted and source != "initializationOptions":
        for name in _USER_ONLY:
            if getattr(settings, name) != getattr(before, name):
                refused.append(
                    f"cudaLlm.{BY_FIELD[name].key} left out: in an untrusted workspace it is "
                    "taken only from the user's settings when the server starts"
                )
                settings = replace(settings, **{name: getattr(before, name)})
    if refused:
        log.warning("settings left out (%s): %s", source, "; ".join(refused))
    problems.extend(refused)
    server.settings = settings
    if server.compile_processes_started:
        keep_pch(server.keeps_pch())  # on or off now: the next front-end check's process
    if problems:
        server.message(f"cuda-llm ({source}): " + "; ".join(problems), types.MessageType.Warning)
    if moved:  # trusted now, or other folders: what the open files may include changed
        server.reanalyze_all()
    return before


def anchored(settings: Settings, roots: tuple[str, ...]) -> Settings:
    """Relative `includePaths` and `compileCommandsDir` taken from the first workspace folder.
    The server never runs there (clients start it in a directory of their own, so that a
    repository's modules are not on `sys.path`); a relative path meant the project's."""
    if not roots:
        return settings

    def anchor(path: str) -> str:
        relative = path and not os.path.isabs(path) and not path.startswith("~")
        return os.path.join(roots[0], path) if relative else path

    where = settings.compile_commands_dir
    return replace(
        settings,
        include_paths=tuple(anchor(p) for p in settings.include_paths),
        compile_commands_dir=anchor(where) if where else where,
    )


def restrict(settings: Settings, trust: Trust) -> tuple[Settings, list[str]]:
    """`settings` without what `trust` does not allow: NVRTC options off the allow-list, bad
    defines, include paths outside the workspace (untrusted) or in /proc, /sys, /dev, and kept
    PCHs (untrusted: their processes would read the workspace's files without address-space
    randomization)."""
    problems: list[str] = []
    rule = trust.include_dir_problem
    paths: list[str] = []
    for path in settings.include_paths:
        problem = rule(path)
        if problem is None:
            paths.append(path)
        else:
            problems.append(f"cudaLlm.includePaths {path!r} left out: {problem}")
    defines: list[str] = []
    for define in settings.defines:
        problem = define_problem(define) if define.strip() else None
        if problem is None:
            defines.append(define)
        else:
            problems.append(f"cudaLlm.defines {define[:80]!r} left out: {problem}")
    flags, refused = allowed_flags(settings.nvrtc_flags, rule)
    problems.extend(f"cudaLlm.nvrtcFlags {r} (left out)" for r in refused)
    keep_pch = settings.persistent_pch
    if keep_pch and not trust.trusted:
        keep_pch = False
        problems.append(
            "cudaLlm.persistentPch left out: the workspace is not trusted (its files would be "
            "compiled without address-space randomization)"
        )
    if not problems:
        return settings, problems
    restricted = replace(
        settings,
        include_paths=tuple(paths),
        defines=tuple(defines),
        nvrtc_flags=flags,
        persistent_pch=keep_pch,
    )
    return restricted, problems


def changed(server: CudaLlmServer, before: Settings) -> None:
    """Re-analyse open documents when a setting that affects compiles changed; a new evaluator
    for the next job when `cudaLlm.gpus` or `cudaLlm.cluster` changed."""
    if any(getattr(before, f) != getattr(server.settings, f) for f in _COMPILE_FIELDS):
        server.reanalyze_all()
    if any(getattr(before, f) != getattr(server.settings, f) for f in _GPU_FIELDS):
        server.retire_evaluator()
