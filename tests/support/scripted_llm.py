"""A scripted OpenAI-compatible HTTP server on 127.0.0.1 for tests that use the real openai SDK.

Serves `POST /v1/chat/completions` and `GET /v1/models`. Replies come from a script: a queue of
steps, each taken by the first request it fits. A step is a dict:

- `text`: the reply's content; `finish_reason` (default "stop"); `usage` (default true: token
  counts are sent; false: the `usage` field is left out, as some servers do); `refusal`,
  `reasoning_content`: the message's fields of those names; `content_null`: content is null;
- `status`: an HTTP error code to answer instead (429, 500, 401, 404...), with `headers`
  (e.g. {"Retry-After": "0"}) and `error` (the message);
- `delay_s`: seconds to wait before answering (timeouts);
- `match`: only a request whose last user message contains this text takes the step (routes
  replies to candidates whatever order concurrent requests arrive in);
- `repeat`: how many requests the step answers (default 1; -1: every request from then on).

With no step left the server answers 400 "script exhausted" (not retried by clients). Every
request is recorded (`requests`: path, headers, JSON body) for assertions.

Use as a context manager or the `scripted_llm` pytest fixture (tests/conftest.py), or as a
script: `python -m tests.support.scripted_llm --port 8765 --script steps.json` (a JSON list of
steps, or {"steps": [...]}); it prints `listening on http://127.0.0.1:PORT/v1` and serves until
interrupted.
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
import time
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


def reply(text: str, **fields: Any) -> dict[str, Any]:
    """A step answering with `text`."""
    return {"text": text, **fields}


def error(status: int, message: str = "scripted error", **fields: Any) -> dict[str, Any]:
    """A step answering with HTTP `status`."""
    return {"status": status, "error": message, **fields}


def kernel_reply(code: str, note: str = "Here is a faster version.", lang: str = "cuda") -> str:
    """A typical model reply: a sentence, then the kernel in a fenced block."""
    return f"{note}\n\n```{lang}\n{code.strip()}\n```\n"


class ScriptedLlmServer:
    """The server; `base_url` ends in `/v1` as the openai SDK expects."""

    def __init__(
        self,
        steps: Iterable[dict[str, Any]] = (),
        *,
        port: int = 0,
        models: tuple[str, ...] = ("scripted-model",),
    ) -> None:
        self._lock = threading.Lock()
        self._steps: list[dict[str, Any]] = [dict(s) for s in steps]
        self.requests: list[dict[str, Any]] = []
        self.models = models
        self._closing = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    data = [
                        {"id": m, "object": "model", "created": 0, "owned_by": "scripted"}
                        for m in server.models
                    ]
                    self._send(200, {"object": "list", "data": data})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"_unparsed": raw.decode("utf-8", "replace")}
                record = {
                    "path": self.path,
                    "body": body,
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                    "time": time.monotonic(),
                }
                with server._lock:
                    server.requests.append(record)
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                step = server._take(body)
                if step is None:
                    self._send(
                        400,
                        {
                            "error": {
                                "message": "scripted server: script exhausted",
                                "type": "invalid_request_error",
                            }
                        },
                    )
                    return
                delay = float(step.get("delay_s", 0) or 0)
                if delay and server._closing.wait(delay):
                    return
                status = int(step.get("status", 200))
                if status != 200:
                    self._send(
                        status,
                        {
                            "error": {
                                "message": step.get("error", "scripted error"),
                                "type": "scripted",
                                "code": status,
                            }
                        },
                        step.get("headers") or {},
                    )
                    return
                self._send(200, server._completion(body, step), step.get("headers") or {})

            def _send(
                self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
            ) -> None:
                data = json.dumps(payload).encode("utf-8")
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in (headers or {}).items():
                        self.send_header(name, str(value))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout, cancel)

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    # -- script -----------------------------------------------------------------------------

    def add(self, *steps: dict[str, Any]) -> None:
        with self._lock:
            self._steps.extend(dict(s) for s in steps)

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._steps)

    def _take(self, body: dict[str, Any]) -> dict[str, Any] | None:
        messages = body.get("messages") or []
        last_user = next(
            (
                m.get("content", "")
                for m in reversed(messages)
                if isinstance(m, dict) and m.get("role") == "user"
            ),
            "",
        )
        with self._lock:
            for position, step in enumerate(self._steps):
                if "match" in step and str(step["match"]) not in str(last_user):
                    continue
                repeat = int(step.get("repeat", 1))
                if repeat == 1:
                    self._steps.pop(position)
                elif repeat > 1:
                    step["repeat"] = repeat - 1
                return dict(step)
        return None

    def _completion(self, body: dict[str, Any], step: dict[str, Any]) -> dict[str, Any]:
        text = str(step.get("text", ""))
        messages = body.get("messages") or []
        prompt_words = sum(
            len(str(m.get("content", "")).split()) for m in messages if isinstance(m, dict)
        )
        payload: dict[str, Any] = {
            "id": f"chatcmpl-scripted-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", self.models[0]),
            "choices": [
                {
                    "index": 0,
                    "message": self._message(step, text),
                    "finish_reason": step.get("finish_reason", "stop"),
                }
            ],
        }
        if step.get("usage", True):
            completion = len(text.split())
            payload["usage"] = {
                "prompt_tokens": prompt_words,
                "completion_tokens": completion,
                "total_tokens": prompt_words + completion,
            }
        return payload

    @staticmethod
    def _message(step: dict[str, Any], text: str) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if step.get("content_null"):
            message["content"] = None
        for name in ("refusal", "reasoning_content"):
            if step.get(name) is not None:
                message[name] = step[name]
        return message

    # -- lifecycle --------------------------------------------------------------------------

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def chat_requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return [r for r in self.requests if r["path"].rstrip("/").endswith("/chat/completions")]

    def start(self) -> ScriptedLlmServer:
        self._thread = threading.Thread(
            target=self._server.serve_forever, daemon=True, name="scripted-llm"
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedLlmServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _load_script(path: str) -> list[dict[str, Any]]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    steps = data.get("steps", []) if isinstance(data, dict) else data
    if not isinstance(steps, list):
        raise SystemExit(f"{path}: expected a JSON list of steps or {{'steps': [...]}}")
    return steps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Scripted OpenAI-compatible server (tests).")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--script", help="JSON file: a list of steps (see the module docstring)")
    parser.add_argument("--requests-log", help="write the received requests here on exit")
    args = parser.parse_args(argv)
    server = ScriptedLlmServer(_load_script(args.script) if args.script else [], port=args.port)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    server.start()
    print(f"listening on {server.base_url}", flush=True)
    try:
        while True:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        if args.requests_log:
            Path(args.requests_log).write_text(json.dumps(server.requests, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
