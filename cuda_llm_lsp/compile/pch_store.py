"""Precompiled headers kept across editor sessions (issue 38, `cudaLlm.persistentPch`).

An NVRTC PCH records the address of NVRTC's PCH heap; compile processes started without
address-space randomization (`compile.isolated`) reserve it at the same address in every
session, so the PCH one of them writes serves the next session's first check of a file with
the same headers: 0.5 s instead of 2-3 s for `<cooperative_groups.h>` with `<cuda_bf16.h>`.

The files live in the user's cache folder (`<cache>/pch/`, 0700, ours alone; never the
workspace: NVRTC trusts what a PCH file holds), named after everything the PCH depends on
(`file_name`). Each is written under a temporary name and renamed into place, so two servers
racing on one prefix leave one whole file. A file NVRTC turns down is deleted by the caller,
one whose headers changed is never looked up again (another name), and the oldest used go
past `MAX_FILES` or `MAX_BYTES` (a PCH of the heavy headers is ~300 MB).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import platform
import stat
import sys
import tempfile
import time
from pathlib import Path

from cuda_llm_lsp import __version__
from cuda_llm_lsp.cachefiles import cache_base
from cuda_llm_lsp.compile import headers as std_headers
from cuda_llm_lsp.compile.nvrtc import nvrtc_version

log = logging.getLogger(__name__)

MAX_FILES = 4  # header sets kept: a few projects' (one PCH: ~300 MB with cooperative_groups)
MAX_BYTES = 1536 << 20  # and 1.5 GB at most in all; the newest file is always kept
_TEMP_SUFFIX = ".tmp"
_TEMP_MAX_AGE_S = 3600.0  # a temporary file this old was left by a process that died writing


def store_dir() -> Path | None:
    """`<cache>/pch`, created 0700; None where it cannot be ours alone (not a folder of ours,
    a read-only disk): then nothing is kept, and nothing is read from it."""
    folder = cache_base() / "pch"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.lstat(folder)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            log.warning("%s is not a folder of this user's: no PCH is kept across sessions", folder)
            return None
        if stat.S_IMODE(info.st_mode) & 0o077:
            os.chmod(folder, 0o700)
    except OSError as exc:
        log.warning("no PCH is kept across sessions: %s", exc)
        return None
    return folder


def file_name(key: str, heap_mb: int) -> str:
    """The file of the PCH of `key` (`isolated.pch_key`: the header prefix, the options, the
    headers' texts and times) made by this NVRTC, this package (its stand-in headers too), this
    Python and a heap of `heap_mb`: any of them changed, another name."""
    parts = [
        key,
        nvrtc_version(),
        __version__,
        heap_mb,
        std_headers.stub_fingerprint(),
        sys.version,
        sys.executable,
        platform.machine(),
    ]
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:40] + ".pch"


def stored(folder: Path, name: str) -> Path | None:
    """The kept PCH `name`, if it is there: a file of ours, not a link."""
    path = folder / name
    try:
        info = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_size == 0:
        return None
    return path


def temp_path(folder: Path, name: str) -> Path:
    """A new empty file of ours in `folder` that NVRTC writes the PCH `name` to."""
    fd, path = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=_TEMP_SUFFIX)
    os.close(fd)
    return Path(path)


def commit(temp: Path, final: Path) -> bool:
    """Rename `temp` to `final` (one whole file, whoever wins a race), then evict the oldest."""
    try:
        os.replace(temp, final)
    except OSError as exc:
        log.warning("could not keep the PCH %s: %s", final.name, exc)
        discard(temp)
        return False
    evict(final.parent, keep=final)
    return True


def touch(path: Path) -> None:
    """Mark `path` used now: eviction goes by the time of last use."""
    with contextlib.suppress(OSError):
        os.utime(path)


def discard(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


def evict(folder: Path, keep: Path | None = None) -> None:
    """Delete the least recently used PCHs past `MAX_FILES` or `MAX_BYTES` (never `keep`), and
    temporary files that a process which died writing left."""
    now = time.time()
    found: list[tuple[float, int, Path]] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        path = Path(entry.path)
        if entry.name.endswith(_TEMP_SUFFIX):
            if now - info.st_mtime > _TEMP_MAX_AGE_S:
                discard(path)
        elif entry.name.endswith(".pch") and stat.S_ISREG(info.st_mode):
            found.append((info.st_mtime, info.st_size, path))
    found.sort(key=lambda item: item[0], reverse=True)  # newest use first
    if keep is not None:
        found.sort(key=lambda item: item[2] != keep)  # stable: `keep` first, then by use
    total = 0
    for count, (_, size, path) in enumerate(found, start=1):
        total += size
        if count > 1 and (count > MAX_FILES or total > MAX_BYTES):
            discard(path)
            total -= size
