"""A raw LSP client over stdio: frames any bytes, so tests can send what no typed client would.

pytest-lsp's client only sends well-typed messages; protocol-error and fuzz tests need malformed
bodies, bad params, literal `1e400` and requests after `shutdown`, and the server's exit status
and stderr. `RawServer` starts the real server process, a reader thread collects every message
it sends, and server-to-client requests are answered with `null`.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pygls.protocol import default_converter
from pytest_lsp import client_capabilities

ROOT = Path(__file__).resolve().parents[2]


def frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class RawServer:
    """The real `python -m cuda_llm_lsp` on pipes; stderr goes to a file read by `stderr()`."""

    def __init__(
        self,
        env: dict[str, str] | None = None,
        args: tuple[str, ...] = (),
        argv: Sequence[str] | None = None,
    ) -> None:
        """`args`: the server's options; `argv`: another server to run (a script of
        `tests/lsp/servers`)."""
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        self.process = subprocess.Popen(
            list(argv or [sys.executable, "-m", "cuda_llm_lsp", *args]),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            cwd=ROOT,
            env=env,
        )
        self.messages: list[dict[str, Any]] = []
        # False: server-to-client requests are kept in `held`, unanswered (a slow client)
        self.answer_requests = True
        self.held: list[dict[str, Any]] = []
        self._lock = threading.Condition()
        self._next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    # --- sending ---------------------------------------------------------------------------

    def send_bytes(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def send(self, message: dict[str, Any] | str) -> None:
        """One message: a dict (JSON-encoded) or a str sent as the body verbatim."""
        body = message if isinstance(message, str) else json.dumps(message)
        self.send_bytes(frame(body.encode("utf-8", errors="surrogatepass")))

    def request(self, method: str, params: Any = None, *, raw_params: str | None = None) -> int:
        """Send a request; returns its id. `raw_params`: the params' JSON text verbatim."""
        self._next_id += 1
        if raw_params is not None:
            body = (
                f'{{"jsonrpc": "2.0", "id": {self._next_id}, "method": {json.dumps(method)}, '
                f'"params": {raw_params}}}'
            )
            self.send(body)
        else:
            message = {"jsonrpc": "2.0", "id": self._next_id, "method": method}
            if params is not None:
                message["params"] = params
            self.send(message)
        return self._next_id

    def notify(self, method: str, params: Any = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def initialize(
        self, init_options: str = "{}", client: str = "visual-studio-code"
    ) -> dict[str, Any]:
        """initialize with `client`'s capabilities (pytest-lsp's recorded sets) and options as
        raw JSON text (so `1e400` can be sent), then initialized."""
        capabilities = json.dumps(default_converter().unstructure(client_capabilities(client)))
        raw = (
            f'{{"processId": null, "rootUri": null, "capabilities": {capabilities}, '
            f'"initializationOptions": {init_options}}}'
        )
        reply = self.response(self.request("initialize", raw_params=raw), timeout=60)
        self.notify("initialized", {})
        return reply

    def open(self, path: Path, text: str, version: int = 1) -> str:
        uri = path.resolve().as_uri()
        item = {"uri": uri, "languageId": "cuda-cpp", "version": version, "text": text}
        self.notify("textDocument/didOpen", {"textDocument": item})
        return uri

    def change(self, uri: str, text: str, version: int) -> None:
        self.notify(
            "textDocument/didChange",
            {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]},
        )

    # --- receiving -------------------------------------------------------------------------

    def _read(self) -> None:
        out = self.process.stdout
        assert out is not None
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    return
                if line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.decode("ascii", "replace").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            if length is None:
                continue
            message = json.loads(out.read(length))
            if "method" in message and "id" in message:  # a server request: answer null
                if self.answer_requests:
                    self.send({"jsonrpc": "2.0", "id": message["id"], "result": None})
                else:
                    self.held.append(message)
            with self._lock:
                self.messages.append(message)
                self._lock.notify_all()

    def wait_for(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float, start: int = 0
    ) -> dict[str, Any]:
        """The first message from index `start` on that satisfies `predicate`."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                for message in self.messages[start:]:
                    if predicate(message):
                        return message
                left = deadline - time.monotonic()
                if left <= 0 or self.process.poll() is not None:
                    raise TimeoutError(f"no matching message within {timeout} s")
                self._lock.wait(min(left, 0.2))

    def response(self, request_id: int, timeout: float = 10) -> dict[str, Any]:
        return self.wait_for(
            lambda m: m.get("id") == request_id and "method" not in m, timeout=timeout
        )

    def diagnostics(self, uri: str, version: int, timeout: float) -> list[dict[str, Any]]:
        """The diagnostics published for `uri` at `version`."""
        message = self.wait_for(
            lambda m: (
                m.get("method") == "textDocument/publishDiagnostics"
                and m["params"]["uri"] == uri
                and m["params"].get("version") == version
            ),
            timeout=timeout,
        )
        return list(message["params"]["diagnostics"])

    # --- the process -----------------------------------------------------------------------

    def alive(self) -> bool:
        return self.process.poll() is None

    def rss_mb(self) -> float:
        """Resident memory of the server process (not its compile children), in MB."""
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        line = next(ln for ln in status.splitlines() if ln.startswith("VmRSS:"))
        return int(line.split()[1]) / 1024

    def stderr(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode("utf-8", errors="replace")

    def exit_status(self, timeout: float) -> int:
        return self.process.wait(timeout=timeout)

    def close(self) -> None:
        if self.alive():
            with contextlib.suppress(OSError):
                self.process.kill()
        self.process.wait(timeout=10)
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self._stderr.close()


def server_env(scratch: Path, **extra: str) -> dict[str, str]:
    """The environment for a test server: history and caches in `scratch`."""
    env = dict(os.environ)
    env.update(
        CUDA_LLM_DATA_DIR=str(scratch / "data"),
        XDG_CACHE_HOME=str(scratch / "cache"),
        PYTHONPATH=str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""),
    )
    env.update(extra)
    return env
