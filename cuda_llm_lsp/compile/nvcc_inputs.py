"""What nvcc may be given: names we chose, values proved inert, headers the fast tier would read.

nvcc runs its sub-steps (the preprocessor, cicc, ptxas, the host compiler) through `/bin/sh`
with arguments in double quotes, so `$(...)` or a backquote in a file name, a `-D` value or an
`-I` directory runs a command. Every string a repository chooses is handled here first:

- the file is compiled as `unit.cu` in a private temporary directory; its own directory, and any
  include directory whose path is not `tools.shell_inert` or holds a comma (nvcc splits a list
  option's value at commas: a repository's `a,/proc/self/k.cu` made nvcc search `/proc/self`),
  is reached through a symlink of ours in that directory (`inc0`, `inc1`...), and messages are
  mapped back to the real names; the file's own directory answers its `#include "..."` only
  (`-Xcompiler -iquote,DIR`), as where the file lies;
- a define is `NAME` or `NAME=VALUE` with `VALUE` shell-inert; any other is refused (`refused`
  says which and where it came from);
- include directories under `/proc`, `/sys` or `/dev` are refused, as the fast tier refuses them;
- the headers the file would read (its quoted and bracketed `#include`s, found in its directory
  and the include directories, and theirs in turn) pass `include_reads.check_header`: no special
  file system, no FIFO or device, no oversize file. When one does not, nvcc does not run: a
  `#include "/dev/stdin"` once made its host compiler read the LSP pipe. Nor does it run when
  the scan cannot name a file the preprocessor would open: an include directive spelled
  otherwise than plainly (`%:include`, a comment or splice in it: `compile.directives`), or, in
  the file or a header inside a workspace folder, an `#include MACRO` other than `#define NAME
  "path"` or CUTLASS's `CUDA_STD_HEADER(x)` (`#include S(/dev/zero)` with `#define S(x) #x`
  grew gcc to gigabytes). The toolkit's own computed includes (Thrust's) are not followed.
  A probe macro (`#define FMT_HAS_INCLUDE(x) __has_include(x)`: fmt, CCCL) is followed: every
  use of it in a scanned file must be a call naming its file literally, which is checked like
  a probe (`_forwarded_probe_problem`).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cuda_llm_lsp.compile import directives
from cuda_llm_lsp.compile.include_reads import (
    IncludeBudget,
    IncludeRefused,
    check_header,
    probe_refused,
    read_header,
    special_root,
)
from cuda_llm_lsp.compile.tools import inside, shell_inert, workspace_roots

UNIT_NAME = "unit.cu"  # the name nvcc compiles the file under
MAX_SCANNED_HEADERS = 20000  # headers followed (PyTorch's <torch/extension.h>: 4,990)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INCLUDE = re.compile(
    rb"^[ \t]*#[ \t]*(?:include|include_next|import)[ \t]*"
    rb'(?:"([^"\n]+)"|<([^>\n]+)>|([A-Za-z_]\w*))',
    re.M,
)
_STRING_DEFINE = re.compile(
    rb'^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+(?:"([^"\n]+)"|<([^>\n]+)>)', re.M
)
# `#define CUDA_STD_HEADER(header) <cuda/std/header>` (CUTLASS): `#include CUDA_STD_HEADER(x)`
_PATH_MACRO = re.compile(
    rb"^[ \t]*#[ \t]*define[ \t]+(\w+)\([ \t]*(\w+)[ \t]*\)[ \t]*<([\w./+-]*)>[ \t]*$", re.M
)
_CALL = re.compile(rb"(\w+)[ \t]*\([ \t]*([\w./+-]*)[ \t]*\)")
# `#define FMT_HAS_INCLUDE(x) __has_include(x)` (fmt, CCCL's `_CCCL_HAS_INCLUDE`): a probe whose
# file each call names; the calls are checked as probes (`_forwarded_probe_problem`)
_PROBE_MACRO = re.compile(
    r"^[ \t]*#[ \t]*define[ \t]+(?P<name>[A-Za-z_]\w*)\([ \t]*(?P<param>[A-Za-z_]\w*)[ \t]*\)"
    r"[ \t]*__has_include(?:_next)?[ \t]*\([ \t]*(?P=param)[ \t]*\)[ \t]*$",
    re.M,
)
# a line splice as gcc takes it: a backslash (or the `??/` trigraph, which strict -std modes
# read), blanks gcc tolerates, the line break
_SPLICE = re.compile(r"(?:\\|\?\?/)[ \t]*\r?\n")


class _Unchecked(Exception):
    """An include whose file the pre-scan cannot name: nvcc must not run."""


def nvcc_inert(path: str) -> bool:
    """Whether nvcc may be given `path` as it is: shell-inert, and no comma (nvcc splits a list
    option's value at commas: `-I /ws/a,/proc/self` searches `/proc/self`)."""
    return shell_inert(path) and "," not in path


def define_refusal(define: str) -> str | None:
    """Why nvcc may not be given `-D<define>`, or None (`NAME`, `NAME=inert value`)."""
    name, equals, value = define.strip().partition("=")
    if _IDENT.fullmatch(name) is None:
        return "nvcc is given only NAME or NAME=VALUE defines, NAME a C identifier"
    if equals and not shell_inert(value):
        return (
            "its value holds characters nvcc's shell would read (only letters, digits and "
            "_ . / + , : = @ % - are passed to nvcc)"
        )
    return None


@dataclass
class NvccInputs:
    """The arguments nvcc gets for one compile, and what was left out."""

    include_args: list[str] = field(default_factory=list)  # ["-I", dir, ...]
    define_args: list[str] = field(default_factory=list)  # ["-DNAME=1", ...]
    links: dict[str, str] = field(default_factory=dict)  # our symlink -> the real directory
    refused: list[str] = field(default_factory=list)  # one line each, for the editor
    blocked: str | None = None  # why nvcc must not run at all (a header it may not read)


def prepare(
    tmp: Path,
    path: Path | None,
    include_paths: Sequence[str],
    defines: Sequence[str],
    define_sources: dict[str, str] | None = None,
) -> NvccInputs:
    """The include and define arguments for compiling `path`'s text in `tmp` (module docstring).

    `define_sources`: where a define came from ("compile_flags.txt", "cudaLlm.defines"), named
    in its refusal."""
    inputs = NvccInputs()
    own: str | None = None
    if path is not None:
        own = os.path.dirname(os.path.abspath(path))
        if special_root(own) is not None:
            own = None
    directories: list[str] = []
    for include in include_paths:
        directory = os.path.abspath(include)
        root = special_root(directory)
        if root is not None:
            inputs.refused.append(f"include directory {include!r} left out: {root} is never read")
            continue
        directories.append(directory)
    if own is not None:
        # the file's directory answers its `#include "..."` only, as where it lies: as `-I` it
        # also answered `<math.h>` with XGBoost's `src/common/math.h` (false errors nvcc run
        # on the file itself has not); nvcc has no -iquote, its host preprocessor has
        inputs.include_args += (
            ["-I", _reachable(own, tmp, inputs)]
            if sys.platform == "win32"
            else ["-Xcompiler", f"-iquote,{_reachable(own, tmp, inputs)}"]
        )
    for directory in dict.fromkeys(directories):
        inputs.include_args += ["-I", _reachable(directory, tmp, inputs)]
    sources = define_sources or {}
    for define in defines:
        if not define.strip():
            continue
        problem = define_refusal(define)
        if problem is None:
            inputs.define_args.append(f"-D{define.strip()}")
        else:
            where = f" (from {sources[define]})" if define in sources else ""
            inputs.refused.append(f"define {define[:80]!r}{where} left out: {problem}")
    return inputs


def _reachable(directory: str, tmp: Path, inputs: NvccInputs) -> str:
    """`directory` as nvcc may be given it: itself where `nvcc_inert`, else a symlink of ours
    in `tmp` (noted in `inputs.links`)."""
    if nvcc_inert(directory):
        return directory
    link = tmp / f"inc{len(inputs.links)}"
    os.symlink(directory, link, target_is_directory=True)
    inputs.links[str(link)] = directory
    return str(link)


def check_includes(text: str, path: Path | None, include_paths: Sequence[str]) -> str | None:
    """Why nvcc may not read what `text` includes (followed through headers), or None."""
    own = os.path.dirname(os.path.abspath(path)) if path is not None else None
    # the directories `prepare` gives nvcc, the file's own one first, for `<...>` too (more than
    # nvcc searches for those since it is -iquote: a scan that errs on the side of refusing; a
    # `<pipe>` FIFO beside the file held gcc to the timeout when it was -I and not scanned)
    own_dirs = [own] if own is not None and special_root(own) is None else []
    search = list(dict.fromkeys([*own_dirs, *(os.path.abspath(p) for p in include_paths)]))
    budget = IncludeBudget.fresh()
    seen: set[str] = set()
    pending: list[tuple[bytes, str | None, str]] = [(text.encode("utf-8", "replace"), own, "")]
    calls: dict[bytes, tuple[bytes, bytes]] = {}  # CUTLASS's include macros, from any header
    forwarders: set[str] = set()  # probe macros (`_PROBE_MACRO`), from any header
    scanned: list[tuple[str, str | None, str]] = []  # every text, for their calls
    while pending:
        data, here, where = pending.pop()
        problem = _unreadable_spelling(data, where) or _refused_probe(
            data, here, search, where, forwarders
        )
        if problem is not None:
            return problem
        scanned.append((data.decode("utf-8", "replace"), here, where))
        for m in _PATH_MACRO.finditer(data):
            calls[m.group(1)] = (m.group(2), m.group(3))
        try:
            found_includes = _includes(data, calls, strict=not where or _in_workspace(here))
        except _Unchecked as exc:
            via = f" (in {where})" if where else ""
            return f"{exc}{via}: nvcc would open a file not checked first"
        for quoted, bracketed in found_includes:
            dirs = ([here] if here and quoted else []) + search
            target = quoted or bracketed or ""
            found = _resolve(target, dirs)
            if found is None:
                continue  # not found (nvcc says so) or a system header (nvcc's own dirs)
            real = os.path.realpath(found)
            if real in seen:
                continue
            try:
                check_header(found)
            except IncludeRefused as exc:
                via = f" (included from {where})" if where else ""
                return f'#include "{target}"{via}: {exc}'
            seen.add(real)
            if len(seen) > MAX_SCANNED_HEADERS:
                return f"the file includes over {MAX_SCANNED_HEADERS} headers"
            try:
                header = read_header(found, budget)
            except IncludeRefused as exc:
                return f'#include "{target}": {exc}'
            pending.append((header, os.path.dirname(found), target))
    # after every header: a call may come before the definition is scanned
    return _forwarded_probe_problem(scanned, forwarders, search)


def _in_workspace(directory: str | None) -> bool:
    """Whether a header's directory lies in a workspace folder (the repository's own text)."""
    return directory is not None and inside(directory, workspace_roots())


def _refused_probe(
    data: bytes, here: str | None, search: list[str], where: str, forwarders: set[str]
) -> str | None:
    """Why nvcc may not run for a file the host compiler would open without including it
    (`__has_include`, `#pragma GCC dependency`: a FIFO held gcc to the timeout), or None.
    A probe macro's own `__has_include(param)` is not one: its name goes to `forwarders`."""
    text = data.decode("utf-8", "replace")
    base = Path(here) if here else None
    spans = []
    if "__has_include" in text:
        for m in _PROBE_MACRO.finditer(text):
            forwarders.add(m.group("name"))
            spans.append((m.start(), m.end()))
    for probe in (*directives.has_include_probes(text), *directives.dependency_probes(text)):
        if any(start <= probe.start and probe.end <= end for start, end in spans):
            continue
        if probe_refused(probe, base, search):
            via = f" (in {where})" if where else ""
            shown = text[probe.start : probe.end][:80]
            if not shown or (probe.quoted is None and probe.bracketed is None):
                return (
                    f"a __has_include or #pragma GCC dependency{via} names its file through "
                    "macros or _Pragma: nvcc would open a file not checked first"
                )
            return f"{shown!r}{via} names a file not read"
    return None


def _forwarded_probe_problem(
    scanned: list[tuple[str, str | None, str]], forwarders: set[str], search: list[str]
) -> str | None:
    """Why nvcc may not run for a call of a probe macro (`_PROBE_MACRO`), or None: each call
    must name its file literally (`FMT_HAS_INCLUDE(<variant>)`) and that file pass the probe
    rules; any other use of the name (an argument of macros, the name passed on without
    parentheses, a call split over lines) is refused. Its definitions (as a probe or a number),
    `#ifdef`/`defined`/`#undef` tests and `//` comments are not uses."""
    if not forwarders:
        return None
    names = "|".join(sorted(map(re.escape, forwarders)))
    use = re.compile(rf"(?<![\w])(?P<name>{names})(?![\w])")
    call = re.compile(
        r"[ \t]*\([ \t]*(?:\"(?P<quoted>[^\"\n]*)\"|<(?P<bracketed>[^>\n]*)>)[ \t]*\)"
    )
    for raw, here, where in scanned:
        text = _SPLICE.sub("", raw)  # as gcc reads it: `FMT_HAS_\\<newline>INCLUDE` is one name
        if not any(name in text for name in forwarders):
            continue
        base = Path(here) if here else None
        for m in use.finditer(text):
            line_start = text.rfind("\n", 0, m.start()) + 1
            before = text[line_start : m.start()]
            name = m.group("name")
            if _not_a_use(before, text, m.end(), name):
                continue
            literal = call.match(text, m.end())
            probe = (
                directives.Probe(m.start(), literal.end(), literal["quoted"], literal["bracketed"])
                if literal is not None
                else None
            )
            if probe is None or probe_refused(probe, base, search):
                via = f" (in {where})" if where else ""
                shown = text[m.start() : (literal.end() if literal else m.end())][:80]
                return (
                    f"{shown!r}{via}: a probe macro ({name}) that names its file otherwise than "
                    "literally, or a file not read: nvcc would open a file not checked first"
                )
    return None


def _not_a_use(before: str, text: str, end: int, name: str) -> bool:
    """Whether the occurrence of probe macro `name` ending at `end`, after `before` on its
    line, is no call: its definition as a probe or a number, a `defined`/`#ifdef`/`#ifndef`/
    `#undef` test, or inside a `//` comment (no string literal open before it; a quote in a
    character literal counts as one open: a use, which errs on the side of refusing)."""
    line_end = text.find("\n", end)
    rest = text[end : len(text) if line_end < 0 else line_end]
    if re.fullmatch(r"[ \t]*#[ \t]*define[ \t]+", before):
        return bool(
            _PROBE_MACRO.fullmatch(before + name + rest)
            or re.fullmatch(r"\([ \t]*\w+[ \t]*\)[ \t]*\d+[ \t]*", rest)
        )
    if re.fullmatch(r"[ \t]*#[ \t]*(?:ifdef|ifndef|undef)[ \t]+", before):
        return re.fullmatch(r"[ \t]*(?://.*)?", rest) is not None
    if re.search(r"\bdefined[ \t]*\(?[ \t]*$", before):
        return True
    comment = before.find("//")  # not inside a string: an even count of unescaped quotes
    return comment >= 0 and len(re.findall(r'(?<!\\)"', before[:comment])) % 2 == 0


def _unreadable_spelling(data: bytes, where: str) -> str | None:
    """Why nvcc may not run on `data` for an include directive the scan would not read, spelled
    otherwise than plainly (`%:include`, a comment or splice in it), or None."""
    plain: set[int] = set()
    row, last = 0, 0
    for m in _INCLUDE.finditer(data):
        row += data.count(b"\n", last, m.start())
        last = m.start()
        plain.add(row)
    odd = directives.unresolved(data.decode("utf-8", "replace"), plain)
    if not odd:
        return None
    via = f" of {where}" if where else ""
    return (
        f"the #{odd[0].keyword} on line {odd[0].first_row + 1}{via} is spelled otherwise than "
        '#include "file" on one line: nvcc would open a file not checked first'
    )


def _includes(
    data: bytes, calls: dict[bytes, tuple[bytes, bytes]], *, strict: bool
) -> list[tuple[str | None, str | None]]:
    """The `#include`s of `data`: (quoted, bracketed); one of a macro is read through a
    `#define NAME "path"` of the same text or an include macro `calls` knows (CUTLASS's
    `CUDA_STD_HEADER(utility)`). `strict` (the file and the workspace's headers): any other
    computed include raises `_Unchecked`; elsewhere (the toolkit's Thrust) it is not followed."""
    macros: dict[bytes, tuple[bytes | None, bytes | None]] = {}
    for m in _STRING_DEFINE.finditer(data):
        macros[m.group(1)] = (m.group(2), m.group(3))
    found: list[tuple[str | None, str | None]] = []
    for m in _INCLUDE.finditer(data):
        quoted, bracketed, macro = m.group(1), m.group(2), m.group(3)
        if macro is not None:
            quoted, bracketed = macros.get(macro, (None, None))
            if quoted is None and bracketed is None:
                call = _CALL.match(data, m.start(3))
                if call is not None and call.group(1) in calls:
                    param, path = calls[call.group(1)]
                    bracketed = re.sub(rb"\b" + re.escape(param) + rb"\b", call.group(2), path)
                elif strict:
                    line = data.count(b"\n", 0, m.start()) + 1
                    raise _Unchecked(f"the #include of a macro on line {line}")
                else:
                    continue
        found.append((_text(quoted), _text(bracketed)))
    return found


def _text(value: bytes | None) -> str | None:
    return value.decode("utf-8", "replace") if value is not None else None


def _resolve(target: str | None, dirs: Sequence[str]) -> str | None:
    """Where the preprocessor would find `target`: absolute as it is, else the first of `dirs`
    holding something of that name (a FIFO or a device too: that is what is checked)."""
    if not target or "\0" in target:
        return None
    if os.path.isabs(target):
        return target if os.path.lexists(target) else None
    for directory in dirs:
        candidate = os.path.join(directory, target)
        if os.path.lexists(candidate):
            return candidate
    return None


def unmap(log: str, tmp: Path, source: Path, name: str, links: dict[str, str]) -> str:
    """nvcc's output with our names put back: the file's own, and each linked directory's."""
    log = log.replace(str(source), name)
    for link, real in links.items():
        log = log.replace(link, real)
    return log.replace(str(tmp) + "/", "")
