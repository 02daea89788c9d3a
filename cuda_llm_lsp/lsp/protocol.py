"""The JSON-RPC edge of the server: every request gets an answer, however malformed.

pygls 2 turns a message into its lsprotocol type inside `json.loads` (`structure_message`, the
object hook) and raises when the params do not fit; the read loop then logs a traceback and the
request is never answered. `CudaLlmProtocol` structures the message itself and hands a request
that does not fit to `handle_message` as a `Malformed`, answered with `InvalidParams` (-32602);
a notification that does not fit is logged in one line. Integers are strict (cattrs would take
`1.5` or `true` for a line number). After `shutdown` a request gets `InvalidRequest` (-32600),
and `exit` records the exit code LSP asks for: 0 after `shutdown`, 1 without.

Before `initialize`, a request gets `ServerNotInitialized` (-32002) and a notification other than
`exit` is logged and dropped (LSP). `exit` that comes while `shutdown` is still being answered
waits for that answer, then ends with status 0. The workspace is an `LspWorkspace` (documents
kept by LSP's line rules, never read from disk). Handler futures are forgotten once done (pygls
keeps every notification's future, and every builtin's inner step, for the server's lifetime).

A body that is not JSON at all never reaches the protocol (it fails in the read loop,
`transport`): `quiet_parse_errors` makes pygls's own loop log one line instead of a traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Generator
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import cattrs
from lsprotocol import types
from pygls.exceptions import (
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcServerNotInitialized,
)
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.json_rpc import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
)
from pygls.protocol.language_server import lsp_method

from cuda_llm_lsp.lsp.document import LspWorkspace

log = logging.getLogger(__name__)

#: How much of a bad message's explanation goes into the error reply and the log.
_MAX_DETAIL = 300


@dataclass(frozen=True)
class Malformed:
    """A message whose params do not fit its method's type (what `handle_message` answers)."""

    id: int | str | None  # None: a notification
    method: str
    problem: str
    jsonrpc: str = "2.0"


def _strict_int(value: Any, _: type) -> int:
    """JSON integers only: cattrs's default `int(value)` makes 1.5 a line 1 and true a 1."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected an integer, got {value!r}")
    if isinstance(value, float) and not value.is_integer():
        raise TypeError(f"expected an integer, got {value!r}")
    return int(value)


def _explain(exc: BaseException) -> str:
    """cattrs's error tree as short `what @ $.path` lines."""

    def leaf(error: BaseException, kind: type | None) -> str:
        if isinstance(error, KeyError):
            return "required field missing"
        if isinstance(error, ValueError | TypeError):
            return f"invalid value ({error})"
        return f"invalid value ({type(error).__name__})"

    try:
        lines = cattrs.transform_error(exc, format_exception=leaf)
    except Exception:  # not a cattrs error tree: its own text
        lines = [str(exc) or type(exc).__name__]
    text = "; ".join(lines)
    return text if len(text) <= _MAX_DETAIL else text[: _MAX_DETAIL - 3] + "..."


def _valid_id(value: Any) -> bool:
    return isinstance(value, int | str) and not isinstance(value, bool)


class CudaLlmProtocol(LanguageServerProtocol):
    """pygls's LSP protocol that answers malformed requests and requests after shutdown."""

    def __init__(self, server: Any, converter: cattrs.Converter) -> None:
        as_bool = converter.get_structure_hook(bool)  # bool is an int: keep its own hook
        converter.register_structure_hook(int, _strict_int)
        converter.register_structure_hook(bool, as_bool)
        super().__init__(server, converter)
        self.exit_code: int | None = None  # set by `exit`: 0 after shutdown, 1 without
        self.initialize_received = False
        self._shutdown_answer: Future[Any] | None = None  # `shutdown` being answered

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams) -> Generator[Any, Any, Any]:
        """pygls's initialize, with its workspace replaced by an `LspWorkspace` before any
        handler sees it."""
        inner = super().lsp_initialize(params)
        try:
            step = next(inner)
        except StopIteration as done:
            self._workspace = LspWorkspace.like(self.workspace)
            return done.value
        self._workspace = LspWorkspace.like(self.workspace)
        while True:
            sent = yield step
            try:
                step = inner.send(sent)
            except StopIteration as done:
                return done.value

    @lsp_method(types.SHUTDOWN)
    def lsp_shutdown(self, *args: Any) -> Generator[Any, Any, None]:
        """pygls's shutdown, cancelling the other pending futures over a copy of the table:
        cancelling a request's future runs its callback at once, which pops it from the table
        (pygls iterated the table itself: `dictionary changed size during iteration`, answered
        as an internal error, whenever a request waited on the client, e.g. `showDocument`)."""
        current_id = self.msg_id  # before the handler's await: other messages change it
        if (user_handler := self.fm.features.get(types.SHUTDOWN)) is not None:
            yield user_handler, args, None
        for msg_id, future in list(self._request_futures.items()):
            if msg_id != current_id and not future.done():
                future.cancel()
        self._shutdown = True

    def _execute_handler(
        self,
        msg_id: Any,
        handler: Any,
        callback: Any,
        args: tuple[Any, ...] | None = None,
        kwargs: dict[str, Any] | None = None,
    ) -> None:
        # pygls stores the future of every handler it runs under `msg_id` (a fresh uuid for a
        # notification and for each step of a builtin) and pops only answered requests'.
        def done(future: Future[Any]) -> None:
            # A cancelled one is already popped, or being cancelled by `shutdown`'s loop over
            # the futures (which a deletion here would break).
            if not future.cancelled() and self._request_futures.get(msg_id) is future:
                del self._request_futures[msg_id]
            callback(future)

        super()._execute_handler(msg_id, handler, done, args, kwargs)

    def structure_message(self, data: dict[str, Any]) -> Any:
        if "jsonrpc" not in data:
            return data  # a nested object (or a message without "jsonrpc": ignored)
        method = data.get("method")
        if "id" in data and not _valid_id(data["id"]):
            return Malformed(None, str(method)[:80], f"the id {data['id']!r} is not valid")
        if "method" not in data:
            return self._structure_response(data)
        if "id" in data and "error" in data:
            return Malformed(None, str(method)[:80], "a request that carries an error")
        if not isinstance(method, str):
            return Malformed(data.get("id"), repr(method)[:80], "the method is not a string")
        message_type = self.get_message_type(method)
        if message_type is None:  # not an LSP method: pygls answers MethodNotFound
            jsonrpc, params = data["jsonrpc"], data.get("params")
            if "id" in data:
                return JsonRPCRequestMessage(data["id"], method, jsonrpc, params)
            return JsonRPCNotification(method, jsonrpc, params)
        try:
            return self._converter.structure(data, message_type)
        except Exception as exc:
            return Malformed(data.get("id"), method, _explain(exc))

    def _handle_response(
        self, msg_id: Any, result: Any | None = None, error: Any | None = None
    ) -> None:
        """A client's answer; one to a request given up meanwhile (no answer in time, or
        cancelled by `shutdown`) is dropped: pygls would set the result of a cancelled future
        and raise."""
        future = self._request_futures.get(msg_id)
        if future is not None and future.cancelled():
            del self._request_futures[msg_id]
            log.info("ignoring the late answer to %r: its request was given up", msg_id)
            return
        super()._handle_response(msg_id, result, error)

    def _structure_response(self, data: dict[str, Any]) -> Any:
        """A client's answer to one of our requests (as pygls does it, minus the traceback)."""
        if "id" not in data:
            return Malformed(None, "a message", "neither a method nor an id")
        if "error" in data:
            message_type: Any = types.ResponseErrorMessage
        else:
            message_type = self._result_types.pop(data["id"], None) or JsonRPCResponseMessage
        try:
            return self._converter.structure(data, message_type)
        except Exception as exc:
            return Malformed(None, f"the response to {data['id']!r}", _explain(exc))

    def handle_message(self, message: Any) -> None:
        if not hasattr(message, "jsonrpc"):  # `[]`, `7`, `null`, an object with no "jsonrpc"
            log.warning("ignoring a message that is not a JSON-RPC object: %.80r", message)
            return
        method = getattr(message, "method", None)
        if not self.initialize_received and not self._before_initialize(message, method):
            return
        if method == types.EXIT and self._shutdown_answer is not None and not self._shutdown:
            # `shutdown` is still being answered (its handler waits for the evaluator): answer
            # it first, then exit as after a completed shutdown.
            self._shutdown_answer.add_done_callback(lambda _: self._exit_after_shutdown(message))
            return
        if self._shutdown and method != types.EXIT:
            if isinstance(method, str) and _valid_id(getattr(message, "id", None)):
                refused = JsonRpcInvalidRequest(f"{method}: the server is shut down; send exit")
                self._send_response(message.id, error=refused.to_response_error())
            else:
                log.info("ignoring %s after shutdown", method)
            return
        if isinstance(message, Malformed):
            self._answer_malformed(message)
            return
        if method == types.EXIT:
            self.exit_code = 0 if self._shutdown else 1
        if method == types.CANCEL_REQUEST and not _valid_id(message.params.id):
            log.warning("ignoring $/cancelRequest for the id %.80r", message.params.id)
            return
        if isinstance(message, types.ExecuteCommandRequest):
            command = message.params.command
            if command not in self.fm.commands:  # pygls would answer too, with a traceback
                known = ", ".join(sorted(self.fm.commands))
                unknown = JsonRpcInvalidParams(f"unknown command {command!r} (known: {known})")
                self._send_response(message.id, error=unknown.to_response_error())
                return
        super().handle_message(message)
        if method == types.SHUTDOWN and self._shutdown_answer is None:
            self._shutdown_answer = self._request_futures.get(message.id)

    def _before_initialize(self, message: Any, method: Any) -> bool:
        """Whether a message that came before `initialize` is handled: `initialize` and `exit`
        are; another request is answered -32002; a notification is logged and dropped."""
        if method == types.INITIALIZE:
            self.initialize_received = not isinstance(message, Malformed)
            return True
        if method == types.EXIT or method is None:  # exit; a response to a request of ours
            return True
        request_id: Any = getattr(message, "id", None)
        if _valid_id(request_id):
            refused = JsonRpcServerNotInitialized(f"{method}: the server is not initialized")
            self._send_response(request_id, error=refused.to_response_error())
        else:
            log.warning("ignoring %.80s before initialize", method)
        return False

    def _exit_after_shutdown(self, message: Any) -> None:
        self._shutdown = True
        self.exit_code = 0
        try:
            super().handle_message(message)
        except SystemExit:
            raise
        except Exception:
            log.exception("exit failed")

    def _answer_malformed(self, message: Malformed) -> None:
        if message.id is None and message.problem.startswith("the id "):
            refused = JsonRpcInvalidRequest(f"{message.method}: {message.problem}")
            self._send_response(None, error=refused.to_response_error())  # type: ignore[arg-type]
        if message.id is None:
            log.warning("ignoring %s: %s", message.method, message.problem)
            return
        log.warning(
            "invalid params for %s (id %r): %s", message.method, message.id, message.problem
        )
        invalid = JsonRpcInvalidParams(f"invalid params for {message.method}: {message.problem}")
        self._send_response(message.id, error=invalid.to_response_error())


class _ParseErrorsInOneLine(logging.Filter):
    """pygls's read loop logs a body that is not JSON with a traceback: one line is enough."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        unreadable = isinstance(error, ValueError | RecursionError)  # not JSON; nested 100,000 deep
        if unreadable and record.getMessage() == "Unable to handle message":
            record.msg, record.args = "ignoring a message that is not JSON: %s", (error,)
            record.exc_info, record.exc_text = None, None
        return True


def quiet_parse_errors() -> None:
    """Install the one-line logging of unparsable bodies (idempotent)."""
    logger = logging.getLogger("pygls.server")
    if not any(isinstance(f, _ParseErrorsInOneLine) for f in logger.filters):
        logger.addFilter(_ParseErrorsInOneLine())
