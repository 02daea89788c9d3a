"""Secrets never reach the disk: every writer of the server and the CLI redacts at its boundary.

What counts as a secret: the API key (`register_secret`, from `initializationOptions` or
settings), and the value of every environment variable whose name looks like a credential
(`KEY`, `TOKEN`, `SECRET`, `PASSWORD`, `CREDENTIAL`, `AUTH`, ...). A value can reach a written
file through paths no one foresaw: NVRTC echoes source lines (an `#include` of the process's
environment) in a log the compile cache stores, a model may repeat its prompt, a traceback quotes
a request. So the writers (`cachefiles.write_json_atomic`, the history database, the replay
recorder, the log handlers, the compile cache) pass what they write through `redact`, whatever
it holds. Values shorter than `MIN_SECRET` characters are left alone: `AUTH=1` must not turn
every `1` of a log into `<redacted>`.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

MARK = "<redacted>"
MIN_SECRET = 8  # characters; shorter values are switches, not credentials
#: Names of environment variables whose values are secrets (as `compile.child_env` drops them).
SECRET_NAME = re.compile(
    r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE", re.IGNORECASE
)
# `"apiKey": "..."`, `api_key=...`, `Authorization: Bearer ...` in text that quotes a request
_KEY_FIELD = re.compile(
    r"""((?:api[_-]?key|authorization)["']?\s*[:=]\s*["']?(?:bearer\s+)?)[^"',)}\s]+""",
    re.IGNORECASE,
)

_registered: set[str] = set()
_lock = threading.Lock()
_cache: tuple[frozenset[str], re.Pattern[str] | None] = (frozenset(), None)


def register_secret(value: str | None) -> None:
    """Treat `value` (an API key given in settings) as a secret from now on."""
    if value and len(value.strip()) >= MIN_SECRET:
        with _lock:
            _registered.add(value.strip())


def secret_values(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """The values to hide: registered keys and the environment's secret-looking variables."""
    source = os.environ if environ is None else environ
    found = {v for n, v in source.items() if SECRET_NAME.search(n) and len(v) >= MIN_SECRET}
    with _lock:
        found.update(_registered)
    return frozenset(found)


def _pattern(values: frozenset[str]) -> re.Pattern[str] | None:
    global _cache
    if _cache[0] == values:
        return _cache[1]
    # longest first: a key that contains another is hidden whole
    ordered = sorted(values, key=len, reverse=True)
    pattern = re.compile("|".join(re.escape(v) for v in ordered)) if ordered else None
    _cache = (values, pattern)
    return pattern


def redact(text: str, extra: Iterable[str] = ()) -> str:
    """`text` with every secret value replaced by `<redacted>`."""
    if not text:
        return text
    values = secret_values()
    more = frozenset(v for v in extra if v and len(v) >= MIN_SECRET)
    pattern = _pattern(values | more if more else values)
    if pattern is not None:
        text = pattern.sub(MARK, text)
    return text


def redact_request_text(text: str) -> str:
    """`redact`, and the value of any `apiKey`/`Authorization` field (logs quoting requests)."""
    return _KEY_FIELD.sub(r"\1" + MARK, redact(text))


def redact_data(data: Any) -> Any:
    """JSON-like `data` with every string (keys included) redacted; other values as they are.
    The secrets are looked up once for the whole of `data` (a compile result has dozens of
    strings, and each lookup reads the environment)."""
    return _redact_all(data, _pattern(secret_values()))


def _redact_all(data: Any, pattern: re.Pattern[str] | None) -> Any:
    if isinstance(data, str):
        return pattern.sub(MARK, data) if pattern is not None and data else data
    if isinstance(data, Mapping):
        return {_redact_all(k, pattern): _redact_all(v, pattern) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [_redact_all(v, pattern) for v in data]
    return data


class RedactSecrets(logging.Filter):
    """A log handler's filter: the message, its arguments and any traceback, redacted.

    pygls logs the whole `initialize` request at INFO (the key in `initializationOptions`).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            text = record.getMessage()
        except Exception:  # a bad format string: logged as is, as logging would
            return True
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_request_text(record.exc_text)
        clean = redact_request_text(text)
        if clean != text:
            record.msg, record.args = clean, None
        return True
