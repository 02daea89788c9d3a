"""Compile results cached in memory (LRU) and on disk, keyed by everything that shapes them.

The key hashes the unit text, its in-memory headers, the size and time of headers NVRTC reads
from configured include paths, the options (arch, -I, -D, flags), the name
expressions, the NVRTC version and the stand-in headers. Disk entries are JSON (never pickle:
the cache directory is not trusted to hold code) written atomically; a corrupt or unreadable
entry, or one with a field of the wrong type, is a miss, never an error. Results are redacted
(`redact`) before they are kept or returned: no secret reaches the disk or the editor.
`CUDA_LLM_CACHE_DIR` overrides the platformdirs location.

A miss compiles in a compile process (`compile.isolated`); a hit is served here, without the
round trip. A compile that crashed its process is cached like any result (memory and disk), so
the same text is not retried on every keystroke nor after a restart; one that ran past its time
limit is remembered in memory only, for that limit (a larger limit or a new session retries);
one whose process was killed from outside (SIGKILL) is not remembered at all.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import Any

from cuda_llm_lsp import __version__
from cuda_llm_lsp.cachefiles import cache_base, write_json_atomic
from cuda_llm_lsp.compile import headers as std_headers
from cuda_llm_lsp.compile import nvrtc
from cuda_llm_lsp.compile.device_unit import DeviceUnit
from cuda_llm_lsp.compile.isolated import (
    DEFAULT_TIMEOUT_S,
    INTERRUPTED_CODE,
    TIMEOUT_CODE,
    shared_pool,
)
from cuda_llm_lsp.compile.nvrtc import build_flags, nvrtc_version
from cuda_llm_lsp.compile.types import CompileOptions, CompileResult, Diagnostic, Resources
from cuda_llm_lsp.redact import redact

MEMORY_ENTRIES = 256
_FORMAT = 1


def cache_dir() -> Path:
    return cache_base() / "compile"


def cache_key(
    unit: DeviceUnit,
    options: CompileOptions,
    name_expressions: Sequence[str],
    *,
    syntax_only: bool = False,
) -> str:
    digest = hashlib.sha256()
    parts: list[Any] = [
        _FORMAT,
        __version__,
        nvrtc_version(),
        std_headers.stub_fingerprint(),
        _code_fingerprint(),
        unit.name,
        unit.text,
        sorted(unit.headers.items()),
        sorted(unit.include_lines.items()),
        sorted(unit.external_headers.items()),
        build_flags(unit, options, syntax_only=syntax_only),
        list(name_expressions),
    ]
    digest.update(json.dumps(parts, default=str).encode("utf-8", errors="surrogatepass"))
    return digest.hexdigest()


@functools.lru_cache(maxsize=1)
def _code_fingerprint() -> str:
    """The log parser's source: a changed parser must not serve diagnostics parsed by the old."""
    return hashlib.sha256(Path(nvrtc.__file__).read_bytes()).hexdigest()[:16]


class CompileCache:
    """Thread-safe two-level cache; one shared instance serves the CLI and the server."""

    def __init__(self, memory_entries: int = MEMORY_ENTRIES, use_disk: bool = True) -> None:
        self._memory: OrderedDict[str, CompileResult] = OrderedDict()
        self._limit = memory_entries
        self._use_disk = use_disk
        self._lock = threading.Lock()
        self._timed_out: dict[str, tuple[float, CompileResult]] = {}  # key -> (limit, result)

    def compile(
        self,
        unit: DeviceUnit,
        options: CompileOptions,
        name_expressions: Sequence[str],
        *,
        syntax_only: bool = False,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> CompileResult:
        key = cache_key(unit, options, name_expressions, syntax_only=syntax_only)
        hit = self.get(key)
        if hit is not None:
            return hit
        with self._lock:
            slow = self._timed_out.get(key)
        if slow is not None and slow[0] >= timeout_s:
            return replace(slow[1], from_cache=True)
        result = redacted(
            shared_pool().compile(
                unit, options, name_expressions, syntax_only=syntax_only, timeout_s=timeout_s
            )
        )
        if any(d.code == INTERRUPTED_CODE for d in result.diagnostics):
            pass  # killed from outside: nothing learnt about this text
        elif any(d.code == TIMEOUT_CODE for d in result.diagnostics):
            with self._lock:
                self._timed_out[key] = (timeout_s, result)
                while len(self._timed_out) > self._limit:
                    self._timed_out.pop(next(iter(self._timed_out)))
        else:
            self.put(key, result)
        return result

    def get(self, key: str) -> CompileResult | None:
        with self._lock:
            found = self._memory.get(key)
            if found is not None:
                self._memory.move_to_end(key)
                return replace(found, from_cache=True)
        if not self._use_disk:
            return None
        loaded = _read(cache_dir() / key[:2] / f"{key}.json")
        if loaded is None:
            return None
        self._remember(key, loaded)
        return replace(loaded, from_cache=True)

    def put(self, key: str, result: CompileResult) -> None:
        self._remember(key, result)
        if self._use_disk:
            _write(cache_dir() / key[:2] / f"{key}.json", result)

    def _remember(self, key: str, result: CompileResult) -> None:
        with self._lock:
            self._memory[key] = replace(result, from_cache=False)
            self._memory.move_to_end(key)
            while len(self._memory) > self._limit:
                self._memory.popitem(last=False)


_shared = CompileCache()


def compile_cached(
    unit: DeviceUnit,
    options: CompileOptions,
    name_expressions: Sequence[str],
    *,
    syntax_only: bool = False,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> CompileResult:
    """`compile_unit` in a compile process, through the process-wide cache (`from_cache` tells
    whether it hit)."""
    return _shared.compile(
        unit, options, name_expressions, syntax_only=syntax_only, timeout_s=timeout_s
    )


def _write(path: Path, result: CompileResult) -> None:
    data = asdict(result)
    data["cubin"] = base64.b64encode(result.cubin).decode() if result.cubin else None
    data.pop("from_cache", None)
    write_json_atomic(path, {"format": _FORMAT, "result": data})


def _read(path: Path) -> CompileResult | None:
    """The entry at `path`, or None: missing, unreadable, or any field not of its type (a hit
    that raised later would fail every analysis of the text, after every restart)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(raw, dict) or raw.get("format") != _FORMAT:
            return None
        return _decode(raw["result"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None


def _decode(data: Any) -> CompileResult:
    """A stored result, every field checked for its type; raises ValueError otherwise."""
    if not isinstance(data, dict):
        raise ValueError("not an object")
    cubin = data.get("cubin")
    lowered = data["lowered_names"]
    resources = data["resources"]
    if not isinstance(lowered, dict) or not isinstance(resources, dict):
        raise ValueError("lowered_names and resources must be objects")
    if cubin is not None and not isinstance(cubin, str):
        raise ValueError("cubin must be base64 text")
    return CompileResult(
        ok=_typed(data["ok"], bool),
        arch=_typed(data["arch"], str),
        diagnostics=tuple(_diagnostic(d) for d in _typed(data["diagnostics"], list)),
        log=_typed(data["log"], str),
        cubin=base64.b64decode(cubin, validate=True) if cubin else None,
        lowered_names={_typed(k, str): _typed(v, str) for k, v in lowered.items()},
        resources={_typed(k, str): _resources(v) for k, v in resources.items()},
    )


def _typed(value: Any, kind: type) -> Any:
    # bool is an int in Python: an int field must not take True, nor a bool field 1
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValueError(f"expected {kind.__name__}, got {type(value).__name__}")
    return value


def _diagnostic(data: Any) -> Diagnostic:
    if not isinstance(data, dict) or set(data) - _DIAGNOSTIC_FIELDS:
        raise ValueError("not a diagnostic")
    severity = _typed(data["severity"], str)
    if severity not in ("error", "warning", "information"):
        raise ValueError(f"unknown severity {severity!r}")
    code, file = data.get("code"), data.get("file")
    return Diagnostic(
        line=_typed(data["line"], int),
        column=_typed(data["column"], int),
        end_line=_typed(data["end_line"], int),
        end_column=_typed(data["end_column"], int),
        severity=severity,
        message=_typed(data["message"], str),
        code=None if code is None else _typed(code, str),
        file=None if file is None else _typed(file, str),
    )


def _resources(data: Any) -> Resources:
    if not isinstance(data, dict) or set(data) - _RESOURCE_FIELDS:
        raise ValueError("not resources")
    return Resources(**{k: _typed(v, int) for k, v in data.items()})


_DIAGNOSTIC_FIELDS = frozenset(f.name for f in fields(Diagnostic))
_RESOURCE_FIELDS = frozenset(f.name for f in fields(Resources))


def redacted(result: CompileResult) -> CompileResult:
    """`result` without any secret in its log or messages (NVRTC echoes source lines: an
    included file's text, `/proc/self/environ` once, reaches both)."""
    log = redact(result.log)
    messages = [redact(d.message) for d in result.diagnostics]
    if log == result.log and all(
        m == d.message for m, d in zip(messages, result.diagnostics, strict=True)
    ):
        return result
    diagnostics = tuple(
        replace(d, message=m) for d, m in zip(result.diagnostics, messages, strict=True)
    )
    return replace(result, log=log, diagnostics=diagnostics)
