"""The server's copy of an open document, kept exactly as LSP defines it.

pygls's `TextDocument` splits lines with `str.splitlines`, which also breaks at form feed, `\v`,
`\x1c`-`\x1e`, `\x85` and U+2028/2029, and maps a `character` past a line's end to just before
its last character; after an incremental edit in such a file the server's text differs from the
editor's (and Accept then replaces the wrong lines). `LspDocument` applies edits by LSP's rules:
lines end at `\n`, `\r\n` or a lone `\r` only; `character` counts the negotiated encoding's code
units (UTF-8, UTF-16 or UTF-32); a `character` past the line's end means the line's end, a `line`
past the last line means the end of the text (as vscode-languageserver's `TextDocument` does).

`LspWorkspace` makes every open document an `LspDocument`, never reads a file from disk (a
document that is not open has no text: pygls would read the path, which blocks on a FIFO), and
logs a change to a document that is not open instead of raising.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote

from lsprotocol import types
from pygls.workspace import TextDocument, Workspace
from pygls.workspace.position_codec import PositionCodec, ServerTextPosition

from cuda_llm_lsp.source.text import LINE_BREAK

log = logging.getLogger(__name__)


def line_starts(text: str) -> list[int]:
    """The offset where each line of `text` starts (LSP's line breaks)."""
    return [0, *(found.end() for found in LINE_BREAK.finditer(text))]


def units_to_column(line: str, units: int, codec: PositionCodec) -> int:
    """The code-point column `units` code units into `line` (rounded up inside a character,
    clamped to the line's end)."""
    if units <= 0:
        return 0
    if codec.client_num_units(line) <= units:
        return len(line)
    counted = 0
    for index, char in enumerate(line):
        if counted >= units:
            return index
        counted += codec.client_num_units(char)
    return len(line)


def offset_at(
    text: str, starts: Sequence[int], position: types.Position, codec: PositionCodec
) -> int:
    """The character offset in `text` of a client position, by LSP's rules."""
    if position.line >= len(starts):
        return len(text)
    if position.line < 0:
        return 0
    start = starts[position.line]
    end = len(text) if position.line + 1 == len(starts) else starts[position.line + 1]
    content = text[start:end]
    content = content[: len(content) - len(_break_at_end(content))]
    return start + units_to_column(content, position.character, codec)


def _break_at_end(line: str) -> str:
    if line.endswith("\r\n"):
        return "\r\n"
    if line.endswith(("\n", "\r")):
        return line[-1]
    return ""


class LspDocument(TextDocument):
    """A `TextDocument` whose lines, positions and incremental edits follow LSP, not Python."""

    def _apply_incremental_change(self, change: types.TextDocumentContentChangePartial) -> None:
        text = self.source
        starts = line_starts(text)
        start = offset_at(text, starts, change.range.start, self._position_codec)
        end = offset_at(text, starts, change.range.end, self._position_codec)
        if end < start:  # a reversed range: LSP does not allow it; take it as written in order
            start, end = end, start
        self._source = text[:start] + change.text + text[end:]

    @property
    def lines(self) -> Sequence[str]:
        """The lines with their breaks, split where LSP splits them."""
        text = self.source
        starts = line_starts(text)
        bounds = [*starts[1:], len(text)]
        return tuple(text[a:b] for a, b in zip(starts, bounds, strict=True))

    def offset_at_position(self, client_position: types.Position) -> int:
        text = self.source
        return offset_at(text, line_starts(text), client_position, self._position_codec)

    def position_from_client_units(self, position: types.Position) -> ServerTextPosition:
        text = self.source
        starts = line_starts(text)
        offset = offset_at(text, starts, position, self._position_codec)
        line = max(i for i, s in enumerate(starts) if s <= offset)
        return ServerTextPosition(line, offset - starts[line])

    @property
    def source(self) -> str:
        return self._source or ""  # never the file on disk


class LspWorkspace(Workspace):
    """pygls's workspace with `LspDocument`s, no reads from disk, and changes to documents that
    are not open logged, not raised."""

    @classmethod
    def like(cls, other: Workspace) -> LspWorkspace:
        """A fresh workspace with `other`'s root, sync kind, folders and position encoding."""
        return cls(
            other.root_uri,
            other._sync_kind,
            list(other.folders.values()),
            other.position_encoding,
        )

    def _create_text_document(
        self,
        doc_uri: str,
        source: str | None = None,
        version: int | None = None,
        language_id: str | None = None,
    ) -> TextDocument:
        return LspDocument(
            doc_uri,
            source=source if source is not None else "",
            version=version,
            language_id=language_id,
            sync_kind=self._sync_kind,
            position_codec=self._position_codec,
        )

    def open_document(self, uri: str) -> TextDocument | None:
        """The open document `uri`, or None (never a document read from disk)."""
        return self._text_documents.get(unquote(uri))

    def update_text_document(
        self, text_doc: types.VersionedTextDocumentIdentifier, change: Any
    ) -> None:
        if unquote(text_doc.uri) not in self._text_documents:
            log.warning("ignoring a change to %.200s: it is not open", text_doc.uri)
            return
        super().update_text_document(text_doc, change)
