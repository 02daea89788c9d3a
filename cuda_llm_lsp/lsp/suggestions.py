"""Suggested kernels: accept (one versioned edit), reject, show.

A suggestion remembers the kernel's text when its run started. Accept compares that with the
kernel's current text and refuses with a clear message if they differ (the suggestion stays).
Otherwise it sends one `workspace/applyEdit` replacing the changed region
(`fsr.apply.changed_region`: the kernel, and for a winner with helpers or its own launch the
helpers above the spec, the spec and the launch sites too): a versioned `TextDocumentEdit` where
the client supports `documentChanges` (annotated, needing confirmation, where it supports change
annotations), else a plain `changes` edit. One accept is
one edit, so one undo restores the original. Both decisions go to the history.

`{"uri", "kernel", "confirmed": true}` is Accept pressed in a client's own diff of the suggestion
(the VS Code extension's): the user has confirmed it there, so the edit needs no second
confirmation (VS Code would show it unticked in its Refactor Preview), and the answer is
`{"applied": true}` or `{"applied": false, "reason": ...}` for the client to show in its words,
instead of a message. The kernel is checked all the same.

Registers `cudaLlm.accept`, `cudaLlm.reject` and `cudaLlm.showSuggestion`; the `Suggestion`
record is `results`'s, stored by the state, which also sends the `cudaLlm/suggestion`
notification.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import hashlib
import logging
import os
import re
import stat
import tempfile
from pathlib import Path
from typing import Any

import platformdirs
from lsprotocol import types

from cuda_llm_lsp.engine.accept import check_write, record_decision
from cuda_llm_lsp.lsp import commands
from cuda_llm_lsp.lsp.positions import split_lines, to_range
from cuda_llm_lsp.lsp.results import Suggestion, suggestion_span
from cuda_llm_lsp.lsp.state import CudaLlmServer
from cuda_llm_lsp.redact import redact
from cuda_llm_lsp.source.kernels import Kernel
from cuda_llm_lsp.source.spec import parse_spec
from cuda_llm_lsp.source.text import offset_of
from cuda_llm_lsp.source.untrusted import neutralize

log = logging.getLogger(__name__)
ANNOTATION_ID = "cudaLlm.suggestion"


def register(server: CudaLlmServer) -> None:
    @server.command(commands.ACCEPT)
    async def do_accept(ls: CudaLlmServer, *args: Any) -> bool | dict[str, Any] | None:
        found = commands.target(ls, args)
        if found is None:
            return None
        first = args[0] if len(args) == 1 and isinstance(args[0], dict) else {}
        return await accept(ls, *found, confirmed=first.get("confirmed") is True)

    @commands.kernel_command(server, commands.REJECT)
    async def do_reject(ls: CudaLlmServer, uri: str, kernel: str) -> bool:
        return await reject(ls, uri, kernel)

    @commands.kernel_command(server, commands.SHOW)
    async def do_show(ls: CudaLlmServer, uri: str, kernel: str) -> bool:
        return await show(ls, uri, kernel)


def _capability(server: CudaLlmServer, path: str) -> Any:
    value: Any = server.client_capabilities
    for name in path.split("."):
        value = getattr(value, name, None)
        if value is None:
            return None
    return value


async def accept(
    server: CudaLlmServer, uri: str, kernel: str, *, confirmed: bool = False
) -> bool | dict[str, Any]:
    """Apply the suggestion. `confirmed`: Accept pressed in the client's own diff (no second
    confirmation; the answer is `{"applied", "reason"}` and the client says why, not us).

    Long because it is the checks an accepted edit passes, in order, each an early
    refusal with its message."""

    def refused(
        reason: str, hint: str = "", kind: types.MessageType = types.MessageType.Info
    ) -> bool | dict[str, Any]:
        if confirmed:
            return {"applied": False, "reason": reason}
        server.message(f"cuda-llm: {reason}{hint}", kind)
        return False

    suggestion = server.suggestions.get((uri, kernel))
    if suggestion is None:
        return refused(f"there is no suggestion for {kernel} to accept")
    text, current = await server.kernel(uri, kernel)
    doc = server.document(uri)
    span = suggestion_span(suggestion, text, current) if current is not None else None
    if (
        doc is None
        or doc.source != text  # edited while we looked: the version would not match the range
        or span is None
    ):
        return refused(
            f"{kernel} changed since the {suggestion.run_name} started, so the suggestion was not "
            "applied (it would not fit the new text)",
            f". Use 'Show suggested {kernel}' to see it, or optimize again.",
            types.MessageType.Warning,
        )
    start, end = offset_of(text, span.start), offset_of(text, span.end)
    edited = text[:start] + suggestion.suggested + text[end:]
    path = server.path_of(uri)
    # proof the whole file (host code, launch sites) still builds, where nvcc is installed
    # and that it adds no host code (the host objects compared) and hides nothing
    checked = await asyncio.to_thread(check_write, edited, text, path, server.settings)
    if checked.refused is not None:
        return refused(
            f"the suggestion for {kernel} was not applied: {neutralize(checked.refused)}",
            kind=types.MessageType.Error,
        )
    if checked.unproven and not await _apply_anyway(server, kernel, checked.unproven):
        return refused(
            f"the suggestion for {kernel} was not applied: {checked.unproven}",
            kind=types.MessageType.Warning,
        )
    lines = split_lines(text)
    where = to_range(lines, span, server.codec)
    label = f"{suggestion.done.capitalize()} {kernel} ({suggestion.figures})"
    if _capability(server, "workspace.workspace_edit.document_changes"):
        annotated = bool(_capability(server, "workspace.workspace_edit.change_annotation_support"))
        edit: types.TextEdit | types.AnnotatedTextEdit = (
            types.AnnotatedTextEdit(
                range=where, new_text=suggestion.suggested, annotation_id=ANNOTATION_ID
            )
            if annotated
            else types.TextEdit(range=where, new_text=suggestion.suggested)
        )
        workspace_edit = types.WorkspaceEdit(
            document_changes=[
                types.TextDocumentEdit(
                    text_document=types.OptionalVersionedTextDocumentIdentifier(
                        uri=uri, version=doc.version
                    ),
                    edits=[edit],
                )
            ],
            change_annotations=(
                {
                    ANNOTATION_ID: types.ChangeAnnotation(
                        label=label,
                        needs_confirmation=not confirmed,
                        description=suggestion.message,
                    )
                }
                if annotated
                else None
            ),
        )
    else:
        workspace_edit = types.WorkspaceEdit(
            changes={uri: [types.TextEdit(range=where, new_text=suggestion.suggested)]}
        )
    try:
        answer = await server.workspace_apply_edit_async(
            types.ApplyWorkspaceEditParams(edit=workspace_edit, label=label)
        )
    except Exception as exc:
        return refused(f"the editor did not apply the edit: {exc}", kind=types.MessageType.Error)
    if not answer.applied:
        reason = answer.failure_reason or "declined"
        return refused(f"the suggestion for {kernel} was not applied ({reason})")
    server.suggestions.pop((uri, kernel), None)
    if checked.note:
        server.message(f"cuda-llm: {kernel}: {checked.note}")
    await _record(server, suggestion, "accept")
    if current is not None:
        await _offer_verify(server, text, current)
    return {"applied": True} if confirmed else True


APPLY_ANYWAY = "Apply anyway"


async def _apply_anyway(server: CudaLlmServer, kernel: str, why: str) -> bool:
    """Ask before applying a change no build proved free of host code (`window/
    showMessageRequest`, which VS Code and Neovim answer): only "Apply anyway" applies it; no
    answer, "Cancel" or a client that cannot ask leaves the file as it is."""
    try:
        answer = await server.window_show_message_request_async(
            types.ShowMessageRequestParams(
                type=types.MessageType.Warning,
                message=neutralize(f"cuda-llm: apply the suggestion for {kernel}? {why}."),
                actions=[
                    types.MessageActionItem(title=APPLY_ANYWAY),
                    types.MessageActionItem(title="Cancel"),
                ],
            )
        )
    except Exception as exc:
        log.info("showMessageRequest failed: %s", exc)
        return False
    return answer is not None and answer.title == APPLY_ANYWAY


async def _offer_verify(server: CudaLlmServer, text: str, kernel: Kernel) -> None:
    """After an Accept: where the program is set and the spec names a capture, say how to
    confirm the speedup in the program (`cudaLlm.verify`, once the user rebuilt it)."""
    if not server.settings.capture_command or kernel.spec is None:
        return
    try:
        spec, _ = await asyncio.to_thread(parse_spec, kernel, text)
    except Exception:
        log.exception("parse_spec failed for %s", kernel.name)
        return
    if spec is not None and spec.capture:
        server.message(
            f"cuda-llm: save and rebuild your program, then run 'Verify {kernel.name} in "
            "program' (code action, or the command cudaLlm.verify) to compare its outputs and "
            "time with the capture"
        )


async def reject(server: CudaLlmServer, uri: str, kernel: str) -> bool:
    suggestion = server.suggestions.pop((uri, kernel), None)
    if suggestion is None:
        server.message(f"cuda-llm: there is no suggestion for {kernel} to reject")
        return False
    await _record(server, suggestion, "reject")
    server.clear_report(uri, kernel)
    return True


async def _record(server: CudaLlmServer, suggestion: Suggestion, decision: str) -> None:
    """Write the decision to the history (SQLite, in a thread); never fails the action."""
    if suggestion.run_id is None:
        return
    try:
        await asyncio.to_thread(record_decision, suggestion.run_id, decision)
    except Exception as exc:
        log.warning("could not record the %s decision: %s", decision, exc)


def cache_dir() -> Path:
    return Path(platformdirs.user_cache_dir("cuda-llm-lsp")) / "suggestions"


def write_files(suggestion: Suggestion, directory: Path | None = None) -> tuple[Path, Path]:
    """The suggested kernel and a unified diff in the cache directory: redacted like every file
    the product writes (a reply may repeat the key), read-only and readable by the user only
    (0400, the directory 0700)."""
    directory = directory or cache_dir()
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(directory, stat.S_IRWXU)
    digest = hashlib.sha256(
        (suggestion.uri + suggestion.original + suggestion.suggested).encode()
    ).hexdigest()[:10]
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", suggestion.kernel)[:60] + f"-{digest}"
    source = directory / f"{stem}.cu"
    diff = directory / f"{stem}.diff"
    name = suggestion.uri.rsplit("/", 1)[-1] or "kernel.cu"
    diff_text = "".join(
        difflib.unified_diff(
            suggestion.original.splitlines(keepends=True),
            suggestion.suggested.splitlines(keepends=True),
            fromfile=f"a/{name} ({suggestion.kernel})",
            tofile=f"b/{name} ({suggestion.kernel}, suggested)",
        )
    )
    header = f"// Suggested {suggestion.kernel}: {suggestion.message}\n// Read-only preview.\n"
    for path, content in ((source, header + suggestion.suggested + "\n"), (diff, diff_text)):
        _write_private(path, redact(content))
    return source, diff


def _write_private(path: Path, content: str) -> None:
    """`content` at `path` through a temporary file (created 0600) and a rename, then 0400."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(content)
        os.chmod(tmp, stat.S_IRUSR)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


async def show(server: CudaLlmServer, uri: str, kernel: str) -> bool:
    """Show the pending suggestion: only the notification for a client that renders it (a
    preview opened beside its diff would steal the focus); for other clients the notification,
    then the read-only preview with `window/showDocument`, else a message with its paths."""
    suggestion = server.suggestions.get((uri, kernel))
    if suggestion is None:
        server.message(f"cuda-llm: there is no suggestion for {kernel} to show")
        return False
    await server.notify_suggestion(suggestion)
    if server.wants_suggestion_notification():
        return True
    try:
        source, diff = await asyncio.to_thread(write_files, suggestion)
    except OSError as exc:
        server.message(f"cuda-llm: could not write the preview: {exc}", types.MessageType.Error)
        return False
    shown = False
    if _capability(server, "window.show_document.support"):
        shown = await server.show_document(source.as_uri())  # bounded
    if not shown:  # e.g. Neovim 0.7: say where the read-only preview and its diff are
        server.message(
            f"cuda-llm: suggested {kernel} ({suggestion.figures}): {source} (diff: {diff})"
        )
    return True
