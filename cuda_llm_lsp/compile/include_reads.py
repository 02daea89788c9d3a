"""What an `#include` may make the server (or NVRTC) read: regular files, of bounded size.

A file opened in the editor names what it includes, and the server resolves quoted includes
itself. So `#include "/proc/self/environ"` once put the server's environment (the API key) in
NVRTC's log, and `#include "blob.bin"` of 48 MB took gigabytes and minutes. The rules, for every
header the server reads and every header found on an include path for NVRTC:

- the path, symlinks resolved, is not under `/proc`, `/sys` or `/dev` (`SPECIAL_ROOTS`): their
  files claim to be regular and hold process state;
- the opened file (`O_NONBLOCK | O_NOFOLLOW`, so a FIFO never blocks the open) is a regular
  file by `fstat` of the descriptor: no FIFO, socket, device or directory;
- it is at most `max_header_bytes()` (4 MiB: CUTLASS's and CuTe's largest single headers are
  under 300 kB, a generated table of a few MB still passes) and all headers one file includes
  together at most `max_include_bytes()` (64 MiB: a CuTe tutorial reads about 10 MB, a CUTLASS
  Hopper example about 22 MB).
  `CUDA_LLM_MAX_HEADER_BYTES` and `CUDA_LLM_MAX_INCLUDE_BYTES` raise them.

In an untrusted workspace (`limit_reads`, set by the server from the client's word), a header is
read only inside the workspace folders, the CUDA toolkit, our stand-ins and the host compiler's
system directories: a project `-I` or an absolute `#include` naming a file elsewhere (a 0600
secret of the user's) is refused like the rest, and its text never reaches a diagnostic or the
compile cache. nvcc's pre-scan (`compile.nvcc_inputs`) and the project configuration's reads
(`compile.project_config`) go through the same checks.

A refused header is reported on its `#include` line and its line left out of the unit, so
NVRTC never reads it either. Issue [realworld]'s project configuration (compile_commands.json)
reads headers through here too.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cuda_llm_lsp.compile.directives import Probe

_allowed: tuple[str, ...] | None = None  # `limit_reads`: None, anywhere
_repository: tuple[str, ...] = ()  # `limit_reads`: the untrusted workspace's folders
DEFAULT_MAX_HEADER_BYTES = 4 * 1024 * 1024
DEFAULT_MAX_INCLUDE_BYTES = 64 * 1024 * 1024
SPECIAL_ROOTS = ("/proc", "/sys", "/dev")
_CHUNK = 1 << 20


class IncludeRefused(Exception):
    """A header that may not be read; the message says why (shown on the `#include` line)."""


def _limit(name: str, default: int) -> int:
    try:
        value = int(os.environ.get(name, ""))
    except ValueError:
        return default
    return value if value > 0 else default


def max_header_bytes() -> int:
    return _limit("CUDA_LLM_MAX_HEADER_BYTES", DEFAULT_MAX_HEADER_BYTES)


def max_include_bytes() -> int:
    return _limit("CUDA_LLM_MAX_INCLUDE_BYTES", DEFAULT_MAX_INCLUDE_BYTES)


def special_root(path: str | Path) -> str | None:
    """The special file system (`/proc`, `/sys`, `/dev`) `path` lies in once resolved, or None."""
    try:
        real = os.path.realpath(path)
    except (OSError, ValueError):
        return "/"  # unresolvable (a NUL in the name): treated as special
    for root in SPECIAL_ROOTS:
        if real == root or real.startswith(root + "/"):
            return root
    return None


def limit_reads(roots: Iterable[str] | None, repository: Iterable[str] = ()) -> None:
    """Read headers only under `roots` from now on (an untrusted workspace); None: anywhere.
    `repository`: the untrusted workspace folders among them (`disk_search_dirs`)."""
    global _allowed, _repository
    _allowed = None if roots is None else tuple(os.path.realpath(r) for r in roots if r)
    _repository = () if roots is None else tuple(os.path.realpath(r) for r in repository if r)


def disk_search_dirs(directories: Iterable[str]) -> tuple[str, ...]:
    """The include directories NVRTC may search on disk itself: in an untrusted workspace none
    inside its folders. A header NVRTC opens itself is not checked, nor is what it includes:
    a repository's `cuda/std/cstdint` beside the file, found before the toolkit's, included a
    0600 file outside. The server's own reads of those directories (`read_header`) are checked
    and handed to NVRTC in memory."""
    kept = tuple(directories)
    allowed, repository = _allowed, _repository
    if allowed is None:
        return kept
    # only the toolkit's, our stand-ins' and the system's: a file opened with no folder at all
    # (an untrusted window on a downloaded file) has its directory left out too
    trusted = tuple(a for a in allowed if a not in repository)

    def under(real: str, roots: tuple[str, ...]) -> bool:
        return any(real == r or real.startswith(r.rstrip("/") + "/") for r in roots)

    return tuple(
        d
        for d in kept
        if under(real := os.path.realpath(d), trusted) and not under(real, repository)
    )


def outside_problem(path: str | Path) -> str | None:
    """Why `path` may not be read in this (untrusted) workspace, or None."""
    allowed = _allowed
    if allowed is None:
        return None
    real = os.path.realpath(path)
    if any(real == r or real.startswith(r.rstrip("/") + "/") for r in allowed):
        return None
    return (
        "outside the workspace folders and the CUDA toolkit, and the workspace is not trusted "
        "(trust it to read this file)"
    )


def _refusal(path: str | Path) -> str | None:
    root = special_root(path)
    if root is not None:
        return f"{root} is never read (a special file system)"
    return outside_problem(path)


def _megabytes(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MiB"


def check_header(path: str | Path, max_bytes: int | None = None) -> int:
    """The size of the regular file at `path` if it may be included, else IncludeRefused.

    For headers NVRTC reads itself from an include path: the same rules, by `stat`.
    """
    limit = max_header_bytes() if max_bytes is None else max_bytes
    problem = _refusal(path)
    if problem is not None:
        raise IncludeRefused(problem)
    try:
        info = os.stat(path)
    except (OSError, ValueError) as exc:
        raise IncludeRefused(f"cannot read it: {_reason(exc)}") from exc
    if not stat.S_ISREG(info.st_mode):
        raise IncludeRefused("not a regular file (a FIFO, socket, device or directory)")
    if info.st_size > limit:
        raise IncludeRefused(
            f"{_megabytes(info.st_size)} is over the {_megabytes(limit)} limit for one header "
            "(CUDA_LLM_MAX_HEADER_BYTES raises it)"
        )
    return info.st_size


@dataclass
class IncludeBudget:
    """What one file's includes may still read in total (`max_include_bytes`)."""

    left: int
    limit: int

    @classmethod
    def fresh(cls) -> IncludeBudget:
        limit = max_include_bytes()
        return cls(limit, limit)


def read_header(
    path: str | Path, budget: IncludeBudget | None = None, max_bytes: int | None = None
) -> bytes:
    """The bytes of the header at `path`, under the rules above; IncludeRefused otherwise.

    Never blocks on a FIFO (non-blocking open, then fstat), never reads past the caps; takes
    what it read from `budget`. `max_bytes`: another cap than one header's (a project's
    compile_commands.json).
    """
    problem = _refusal(path)
    if problem is not None:
        raise IncludeRefused(problem)
    real = os.path.realpath(path)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(real, flags)
    except (OSError, ValueError) as exc:
        raise IncludeRefused(f"cannot read it: {_reason(exc)}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise IncludeRefused("not a regular file (a FIFO, socket, device or directory)")
        limit = max_header_bytes() if max_bytes is None else max_bytes
        if info.st_size > limit:
            raise IncludeRefused(
                f"{_megabytes(info.st_size)} is over the {_megabytes(limit)} limit for one "
                "header (CUDA_LLM_MAX_HEADER_BYTES raises it)"
            )
        if budget is not None and info.st_size > budget.left:
            raise IncludeRefused(_total_message(budget))
        cap = min(limit, budget.left if budget is not None else limit)
        chunks: list[bytes] = []
        size = 0
        while size <= cap:  # a file that grows while read is still cut at the cap
            chunk = os.read(fd, min(_CHUNK, cap + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > cap:
            raise IncludeRefused(
                _total_message(budget)
                if budget is not None and cap < limit
                else f"over the {_megabytes(limit)} limit for one header"
            )
    except OSError as exc:
        raise IncludeRefused(f"cannot read it: {_reason(exc)}") from exc
    finally:
        os.close(fd)
    if budget is not None:
        budget.left -= size
    return b"".join(chunks)


def _total_message(budget: IncludeBudget) -> str:
    return (
        f"the headers this file includes would pass the {_megabytes(budget.limit)} limit for "
        "all included text (CUDA_LLM_MAX_INCLUDE_BYTES raises it)"
    )


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        if exc.errno == errno.ELOOP:
            return "a symbolic link loop"
        return exc.strerror or str(exc)
    return str(exc)


def probe_refused(probe: Probe, base: Path | None, configured: Sequence[str]) -> bool:
    """Whether the file `probe` names, found as the preprocessor would find it in `base` (quoted)
    and `configured`, may not be opened (the rules above); True when macros spell it."""
    name = probe.quoted if probe.quoted is not None else probe.bracketed
    if name is None:
        return True
    if not name or "\0" in name:
        return False
    if os.path.isabs(name):
        found: str | None = name if os.path.lexists(name) else None
    else:
        dirs = ([str(base)] if base is not None and probe.quoted is not None else []) + list(
            configured
        )
        found = next(
            (os.path.join(d, name) for d in dirs if os.path.lexists(os.path.join(d, name))), None
        )
    if found is None:
        return False  # not in the workspace's directories: NVRTC looks in the toolkit's
    try:
        check_header(found)
    except IncludeRefused:
        return True
    return False
