"""Suggested kernels: accept (one versioned edit of the kernel's range), reject, show.

A suggestion remembers the kernel's text when its run started. Accept compares that with the
kernel's current text and refuses with a clear message if they differ (the suggestion stays).
Otherwise it sends one `workspace/applyEdit` replacing exactly the kernel's range: a versioned
`TextDocumentEdit` where the client supports `documentChanges` (annotated, needing
confirmation, where it supports change annotations), else a plain `changes` edit. One accept is
one edit, so one undo restores the original. Both decisions go to the history.
"""

from __future__ import annotations

import difflib
import hashlib
import logging
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from cuda_llm_lsp.lsp.positions import split_lines, to_range

if TYPE_CHECKING:
    from cuda_llm_lsp.lsp.server import CudaLlmServer

log = logging.getLogger(__name__)
ANNOTATION_ID = "cudaLlm.suggestion"
NOTIFICATION = "cudaLlm/suggestion"
EXPERIMENTAL = "cudaLlm"  # capabilities.experimental.cudaLlm.suggestionNotification


@dataclass(frozen=True)
class Suggestion:
    uri: str
    kernel: str
    original: str  # the kernel's definition when the run started
    suggested: str  # the replacement definition
    speedup: float | None
    baseline_ms: float | None
    best_ms: float | None
    cases_passed: int
    cases_total: int
    message: str
    run_id: int | None = None

    @property
    def figures(self) -> str:
        """'2.10× faster, 4/4 cases'."""
        speed = f"{self.speedup:.2f}× faster" if self.speedup else "no speedup figure"
        return f"{speed}, {self.cases_passed}/{self.cases_total} cases"


def _capability(server: CudaLlmServer, path: str) -> Any:
    value: Any = server.client_capabilities
    for name in path.split("."):
        value = getattr(value, name, None)
        if value is None:
            return None
    return value


def wants_notification(server: CudaLlmServer) -> bool:
    """True when the client shows `cudaLlm/suggestion` itself (the VS Code extension's diff),
    declared as `capabilities.experimental.cudaLlm.suggestionNotification = true`."""
    experimental = getattr(server.client_capabilities, "experimental", None)
    return _field(_field(experimental, EXPERIMENTAL), "suggestionNotification") is True


def _field(value: Any, name: str) -> Any:
    """`value[name]` of a JSON object, whether it was left a dict or made an object."""
    if isinstance(value, Mapping):
        return value.get(name)
    return getattr(value, name, None) if value is not None else None


async def notify(server: CudaLlmServer, suggestion: Suggestion) -> None:
    """Send `cudaLlm/suggestion` for `suggestion`."""
    server.protocol.notify(NOTIFICATION, await payload(server, suggestion))


async def accept(server: CudaLlmServer, uri: str, kernel: str) -> bool:
    suggestion = server.suggestions.get((uri, kernel))
    if suggestion is None:
        server.message(f"cuda-llm: there is no suggestion for {kernel} to accept")
        return False
    text, current = await server.kernel(uri, kernel)
    doc = server.document(uri)
    if (
        doc is None
        or doc.source != text  # edited while we looked: the version would not match the range
        or current is None
        or current.span.slice(text) != suggestion.original
    ):
        server.message(
            f"cuda-llm: {kernel} changed since the optimization started, so the suggestion was "
            f"not applied (it would not fit the new text). Use 'Show suggested {kernel}' to see "
            "it, or optimize again.",
            types.MessageType.Warning,
        )
        return False
    lines = split_lines(text)
    where = to_range(lines, current.span, server.codec)
    label = f"Optimized {kernel} ({suggestion.figures})"
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
                        needs_confirmation=True,
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
        server.message(
            f"cuda-llm: the editor did not apply the edit: {exc}", types.MessageType.Error
        )
        return False
    if not answer.applied:
        reason = answer.failure_reason or "declined"
        server.message(f"cuda-llm: the suggestion for {kernel} was not applied ({reason})")
        return False
    server.suggestions.pop((uri, kernel), None)
    await _record(server, suggestion, "accept")
    return True


async def reject(server: CudaLlmServer, uri: str, kernel: str) -> bool:
    suggestion = server.suggestions.pop((uri, kernel), None)
    if suggestion is None:
        server.message(f"cuda-llm: there is no suggestion for {kernel} to reject")
        return False
    await _record(server, suggestion, "reject")
    from cuda_llm_lsp.lsp.results import clear_report

    clear_report(server, uri, kernel)
    return True


async def _record(server: CudaLlmServer, suggestion: Suggestion, decision: str) -> None:
    """Write the decision to the history (SQLite, in a thread); never fails the action."""
    import asyncio

    if suggestion.run_id is None:
        return
    from cuda_llm_lsp.fsr.history import record_decision

    try:
        await asyncio.to_thread(record_decision, suggestion.run_id, decision)
    except Exception as exc:
        log.warning("could not record the %s decision: %s", decision, exc)


async def payload(server: CudaLlmServer, suggestion: Suggestion) -> dict[str, Any]:
    """The `cudaLlm/suggestion` notification's body (for the VS Code extension's diff view)."""
    text, current = await server.kernel(suggestion.uri, suggestion.kernel)
    where = None
    if current is not None and current.span.slice(text) == suggestion.original:
        rng = to_range(split_lines(text), current.span, server.codec)
        where = {
            "start": {"line": rng.start.line, "character": rng.start.character},
            "end": {"line": rng.end.line, "character": rng.end.character},
        }
    return {
        "uri": suggestion.uri,
        "kernel": suggestion.kernel,
        "range": where,
        "original": suggestion.original,
        "suggested": suggestion.suggested,
        "speedup": suggestion.speedup,
        "baselineMs": suggestion.baseline_ms,
        "bestMs": suggestion.best_ms,
        "casesPassed": suggestion.cases_passed,
        "casesTotal": suggestion.cases_total,
        "message": suggestion.message,
    }


def cache_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_cache_dir("cuda-llm-lsp")) / "suggestions"


def write_files(suggestion: Suggestion, directory: Path | None = None) -> tuple[Path, Path]:
    """The suggested kernel and a unified diff, read-only, in the cache directory."""
    directory = directory or cache_dir()
    directory.mkdir(parents=True, exist_ok=True)
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
        if path.exists():
            os.chmod(path, stat.S_IWUSR | stat.S_IRUSR)
        path.write_text(content, encoding="utf-8")
        os.chmod(path, 0o444)
    return source, diff


async def show(server: CudaLlmServer, uri: str, kernel: str) -> bool:
    """Show the pending suggestion: only the notification for a client that renders it (a
    preview opened beside its diff would steal the focus); for other clients the notification,
    then the read-only preview with `window/showDocument`, else a message with its paths."""
    suggestion = server.suggestions.get((uri, kernel))
    if suggestion is None:
        server.message(f"cuda-llm: there is no suggestion for {kernel} to show")
        return False
    await notify(server, suggestion)
    if wants_notification(server):
        return True
    import asyncio

    try:
        source, diff = await asyncio.to_thread(write_files, suggestion)
    except OSError as exc:
        server.message(f"cuda-llm: could not write the preview: {exc}", types.MessageType.Error)
        return False
    shown = False
    if _capability(server, "window.show_document.support"):
        try:
            answer = await server.window_show_document_async(
                types.ShowDocumentParams(uri=source.as_uri(), take_focus=True)
            )
            shown = bool(answer and answer.success)
        except Exception as exc:
            log.info("showDocument failed: %s", exc)
    if not shown:  # e.g. Neovim 0.7: say where the read-only preview and its diff are
        server.message(
            f"cuda-llm: suggested {kernel} ({suggestion.figures}): {source} (diff: {diff})"
        )
    return True
