"""The stdio read loop: LSP's `Content-Length` framing with bounds, replacing pygls's loop.

pygls reads a body with `stdin.read(Content-Length)`, which allocates the announced length up
front: `Content-Length: 99999999999` raised MemoryError and ended the server. `MessageReader`
frames bodies out of the byte stream as they arrive: a header block over `MAX_HEADER_BYTES`, a
missing or unreadable length, or a length over `MAX_BODY_BYTES` is logged and skipped, and
reading resumes at the next `Content-Length` header (the bytes between are discarded as they
come, never held). A body that is not UTF-8 or not JSON is logged and dropped; nothing here
ends the server but the end of its input (or `exit`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
from concurrent.futures import Executor
from typing import Any, BinaryIO

from pygls.io_ import StdoutWriter
from pygls.server import JsonRPCServer

log = logging.getLogger(__name__)

#: The largest body read (a document is capped well below: 20 MB of text, JSON-escaped).
MAX_BODY_BYTES = 256 * 2**20
#: The largest header block (LSP sends two short headers).
MAX_HEADER_BYTES = 16 * 1024
_HEADER_END = b"\r\n\r\n"
_RESYNC = b"Content-Length"
_LENGTH = re.compile(rb"(?im)^content-length[ \t]*:[ \t]*([0-9]{1,20})[ \t]*\r?$")
_CHUNK = 64 * 1024


class MessageReader:
    """Turns chunks of the input stream into message bodies, within the bounds above."""

    def __init__(self, max_body: int = MAX_BODY_BYTES, max_header: int = MAX_HEADER_BYTES):
        self.max_body = max_body
        self.max_header = max_header
        self._buffer = bytearray()
        self._length: int | None = None  # the body being read
        self._skipping = False  # after a refused header: discard up to the next header

    def feed(self, data: bytes) -> list[bytes]:
        """The bodies completed by `data`."""
        self._buffer += data
        bodies: list[bytes] = []
        while True:
            if self._skipping and not self._resync():
                return bodies
            if self._length is None and not self._read_header():
                return bodies
            if self._length is None:
                continue  # a refused header: skipping now
            if len(self._buffer) < self._length:
                return bodies
            bodies.append(bytes(self._buffer[: self._length]))
            del self._buffer[: self._length]
            self._length = None

    def _resync(self) -> bool:
        """Drop input up to the next `Content-Length`; False while none has come."""
        at = self._buffer.find(_RESYNC)
        if at < 0:
            keep = len(_RESYNC) - 1  # a header split across two chunks
            del self._buffer[: max(len(self._buffer) - keep, 0)]
            return False
        del self._buffer[:at]
        self._skipping = False
        return True

    def _read_header(self) -> bool:
        """Consume one header block; False while it is incomplete."""
        end = self._buffer.find(_HEADER_END, 0, self.max_header + len(_HEADER_END))
        if end < 0:
            if len(self._buffer) > self.max_header:
                log.error(
                    "ignoring input: a message header over %d bytes; reading on at the next "
                    "Content-Length",
                    self.max_header,
                )
                self._skip(len(self._buffer))
            return False
        header = bytes(self._buffer[:end])
        found = _LENGTH.search(header)
        if found is None:
            log.error("ignoring a message without a valid Content-Length: %.120r", header)
            self._skip(end + len(_HEADER_END))
            return True
        length = int(found.group(1))
        if length > self.max_body:
            log.error(
                "refusing a message of Content-Length %d (the limit is %d bytes); reading on at "
                "the next Content-Length",
                length,
                self.max_body,
            )
            self._skip(end + len(_HEADER_END))
            return True
        del self._buffer[: end + len(_HEADER_END)]
        self._length = length
        return True

    def _skip(self, count: int) -> None:
        del self._buffer[:count]
        self._skipping = True


def handle_body(body: bytes, protocol: Any) -> None:
    """Decode one body and hand it to the protocol; an unreadable one is logged and dropped."""
    try:
        text = body.decode("utf-8", errors="surrogatepass")  # as pygls's json.loads(bytes)
    except UnicodeDecodeError as exc:
        log.warning("ignoring a message whose body is not UTF-8: %s", exc)
        return
    try:
        message = json.loads(text, object_hook=protocol.structure_message)
    except (ValueError, RecursionError) as exc:  # not JSON; nested 100,000 deep
        log.warning("ignoring a message that is not JSON: %s", exc)
        return
    try:
        protocol.handle_message(message)
    except Exception:
        log.exception("could not handle a message")


async def read_messages(
    stdin: BinaryIO, protocol: Any, stop: threading.Event, executor: Executor | None
) -> None:
    """Read `stdin` until it ends (or `stop` is set), handing each body to `protocol`."""
    loop = asyncio.get_running_loop()
    read = getattr(stdin, "read1", stdin.read)
    reader = MessageReader()
    while not stop.is_set():
        data = await loop.run_in_executor(executor, read, _CHUNK)
        if not data:
            break
        for body in reader.feed(data):
            handle_body(body, protocol)


def serve(server: JsonRPCServer, stdin: BinaryIO, stdout: BinaryIO) -> None:
    """pygls's `start_io`, with `read_messages` as its read loop."""
    server._stop_event = stop = threading.Event()
    server.protocol.set_writer(StdoutWriter(stdout))
    try:
        asyncio.run(read_messages(stdin, server.protocol, stop, server.thread_pool))
    except BrokenPipeError:
        log.error("the connection to the client is lost; shutting down")
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.shutdown()
