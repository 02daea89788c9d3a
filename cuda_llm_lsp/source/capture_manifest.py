"""The capture directory's manifest (docs/design.md "Capture"): one kernel launch recorded from
the user's program by the capture library (`compile/capture/inject.cpp`), read here.

The library writes `manifest.json` and, per captured pointer, two raw files (`pN.before.bin`,
`pN.after.bin`: the bytes from the pointer to the end of its allocation, before and after the
launch); a struct passed by value lists the device addresses found inside it as `embedded`
(`pN_AT.*` for the address at byte AT), which a spec's `"@captured"` argument relocates. This
module is the one decoder of that JSON (the C++ side is its one encoder): typed,
frozen, versioned, and strict, so a damaged or foreign directory is a clear `CaptureError`.
Pure: no numpy, no file other than the manifest is opened here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_llm_lsp.source.brackets import outside_angles

MANIFEST = "manifest.json"
SEEN = "seen.json"  # every kernel the program launched, with counts (written at exit)
TIMES = "times.json"  # `--slowest`'s first pass: every matching launch's duration
VERSION = 1
MAX_MANIFEST_BYTES = 4 << 20  # a manifest is a few kB; refuse to parse anything huge


class CaptureError(ValueError):
    """The capture directory cannot be used: the message says why, for the user."""


@dataclass(frozen=True)
class CapturedPointer:
    """A parameter whose value points into a device (or managed) allocation."""

    base: int  # the allocation's start address
    offset: int  # the parameter's address minus `base`
    size: int  # the allocation's size in bytes
    captured: int  # bytes recorded from the pointer: `size - offset`
    before: str  # file name inside the capture directory
    after: str
    changed: bool  # the launch changed at least one of those bytes


@dataclass(frozen=True)
class EmbeddedPointer:
    """A device address inside a struct passed by value (an iterator's, a tensor view's, a
    Params block's pointer): the 8 bytes at `at` of the parameter."""

    at: int
    pointer: CapturedPointer


@dataclass(frozen=True)
class CapturedParam:
    """One kernel parameter as passed: its raw bytes; `pointer` when they are an address into
    an allocation; `embedded`, the addresses inside a larger by-value parameter."""

    index: int
    offset: int  # in the kernel's parameter buffer
    size: int
    raw: bytes
    pointer: CapturedPointer | None = None
    embedded: tuple[EmbeddedPointer, ...] = ()

    def as_int(self, signed: bool = True) -> int:
        return int.from_bytes(self.raw, "little", signed=signed)

    @property
    def regions(self) -> tuple[EmbeddedPointer, ...]:
        """Every device address the parameter's bytes hold, by byte offset (a pointer: at 0)."""
        if self.pointer is not None:
            return (EmbeddedPointer(0, self.pointer),)
        return self.embedded


@dataclass(frozen=True)
class Capture:
    """One captured launch."""

    version: int
    mangled: str
    demangled: str
    launch: int  # 1-based: the Nth launch of this kernel in the program
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem: int
    device: str
    arch: str  # "sm_90"
    duration_ms: float
    params: tuple[CapturedParam, ...]

    @property
    def function_name(self) -> str:
        """The kernel's unqualified name: `ns::k<float>(float*, int)` -> `k`."""
        return function_name(self.demangled or self.mangled)


def function_name(demangled: str) -> str:
    """The unqualified function name of a demangled signature (templates and scope removed)."""
    text = demangled
    cut = outside_angles(text, "(")  # the parameter list: the first '(' outside template args
    head = (text[:cut] if cut >= 0 else text).strip()
    # drop template arguments of the last component
    while head.endswith(">"):
        depth = 0
        for i in range(len(head) - 1, -1, -1):
            if head[i] == ">":
                depth += 1
            elif head[i] == "<":
                depth -= 1
                if depth == 0:
                    head = head[:i].rstrip()
                    break
        else:
            break
    head = head.rsplit("::", 1)[-1]
    return head.split()[-1] if head.split() else head


def read_capture(directory: Path) -> Capture:
    """The manifest of `directory`, checked; `CaptureError` with the reason otherwise."""
    path = directory / MANIFEST
    if not path.is_file():
        raise CaptureError(f"{directory} is not a capture directory (no {MANIFEST})")
    if path.stat().st_size > MAX_MANIFEST_BYTES:
        raise CaptureError(f"{path} is larger than {MAX_MANIFEST_BYTES} bytes: not a manifest")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CaptureError(f"{path} cannot be read: {exc}") from exc
    return decode_capture(doc, directory)


def decode_capture(doc: Any, directory: Path | None = None) -> Capture:
    """The typed manifest; every field checked (type, range), file names kept inside."""
    if not isinstance(doc, dict):
        raise CaptureError("the manifest is not a JSON object")
    if "error" in doc:
        raise CaptureError(f"the capture failed: {_text(doc, 'error')}")
    version = _int(doc, "version")
    if version != VERSION:
        raise CaptureError(f"capture format version {version}; this cuda-llm reads {VERSION}")
    params = doc.get("params")
    if not isinstance(params, list):
        raise CaptureError("the manifest has no params list")
    return Capture(
        version=version,
        mangled=_text(doc, "mangled"),
        demangled=_text(doc, "demangled", ""),
        launch=_int(doc, "launch"),
        grid=_dims(doc, "grid"),
        block=_dims(doc, "block"),
        smem=_int(doc, "smem"),
        device=_text(doc, "device", ""),
        arch=_text(doc, "arch", ""),
        duration_ms=float(_number(doc, "duration_ms")),
        params=tuple(_param(p, directory) for p in params),
    )


def encode_capture(capture: Capture) -> dict[str, Any]:
    """The manifest's JSON object (tests and synthetic captures; the library writes the same)."""
    return {
        "version": capture.version,
        "mangled": capture.mangled,
        "demangled": capture.demangled,
        "launch": capture.launch,
        "grid": list(capture.grid),
        "block": list(capture.block),
        "smem": capture.smem,
        "device": capture.device,
        "arch": capture.arch,
        "duration_ms": capture.duration_ms,
        "params": [
            {
                "index": p.index,
                "offset": p.offset,
                "size": p.size,
                "bytes": p.raw.hex(),
                **({"pointer": _encode_pointer(p.pointer)} if p.pointer else {}),
                **(
                    {
                        "embedded": [
                            {"at": e.at, "pointer": _encode_pointer(e.pointer)} for e in p.embedded
                        ]
                    }
                    if p.embedded
                    else {}
                ),
            }
            for p in capture.params
        ],
    }


def _encode_pointer(p: CapturedPointer) -> dict[str, Any]:
    return {
        "base": p.base,
        "offset": p.offset,
        "size": p.size,
        "captured": p.captured,
        "before": p.before,
        "after": p.after,
        "changed": p.changed,
    }


def _param(doc: Any, directory: Path | None) -> CapturedParam:
    if not isinstance(doc, dict):
        raise CaptureError("a manifest parameter is not an object")
    raw_hex = _text(doc, "bytes")
    try:
        raw = bytes.fromhex(raw_hex)
    except ValueError as exc:
        raise CaptureError(f"parameter bytes are not hex: {raw_hex[:40]!r}") from exc
    p = doc.get("pointer")
    pointer = None if p is None else _pointer(p, directory)
    embedded_docs = doc.get("embedded", [])
    if not isinstance(embedded_docs, list):
        raise CaptureError("a parameter's embedded list is not a list")
    embedded: list[EmbeddedPointer] = []
    for e in embedded_docs:
        if not isinstance(e, dict):
            raise CaptureError("an embedded pointer is not an object")
        at = _int(e, "at")
        if at % 8 or at + 8 > len(raw):
            raise CaptureError(f"an embedded pointer at byte {at} is not inside the parameter")
        embedded.append(EmbeddedPointer(at, _pointer(e.get("pointer"), directory)))
    if len({e.at for e in embedded}) != len(embedded):
        raise CaptureError("two embedded pointers at the same byte")
    return CapturedParam(
        _int(doc, "index"),
        _int(doc, "offset"),
        _int(doc, "size"),
        raw,
        pointer,
        tuple(embedded),
    )


def _pointer(p: Any, directory: Path | None) -> CapturedPointer:
    if not isinstance(p, dict):
        raise CaptureError("a parameter's pointer is not an object")
    before, after = _file(p, "before", directory), _file(p, "after", directory)
    return CapturedPointer(
        base=_int(p, "base"),
        offset=_int(p, "offset"),
        size=_int(p, "size"),
        captured=_int(p, "captured"),
        before=before,
        after=after,
        changed=bool(p.get("changed", False)),
    )


def _file(doc: dict[str, Any], key: str, directory: Path | None) -> str:
    """A file name of the capture directory: a plain name, never a path out of it."""
    name = _text(doc, key)
    if not name or "/" in name or "\\" in name or name in (".", "..") or name.startswith("."):
        raise CaptureError(f"bad file name {name!r} in the manifest")
    if directory is not None and not (directory / name).is_file():
        raise CaptureError(f"{directory / name} is missing")
    return name


def _int(doc: dict[str, Any], key: str) -> int:
    value = doc.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise CaptureError(f"manifest field {key!r} must be a non-negative integer, got {value!r}")
    return value


def _number(doc: dict[str, Any], key: str) -> float:
    value = doc.get(key, 0.0)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CaptureError(f"manifest field {key!r} must be a number, got {value!r}")
    return float(value)


def _text(doc: dict[str, Any], key: str, default: str | None = None) -> str:
    value = doc.get(key, default)
    if not isinstance(value, str):
        raise CaptureError(f"manifest field {key!r} must be a string, got {value!r}")
    return value


def _dims(doc: dict[str, Any], key: str) -> tuple[int, int, int]:
    value = doc.get(key)
    if (
        not isinstance(value, list)
        or len(value) != 3
        or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in value)
    ):
        raise CaptureError(f"manifest field {key!r} must be three positive integers")
    return (value[0], value[1], value[2])
