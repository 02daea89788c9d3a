"""What the fast tier cannot be sure of (issue 38): its errors that nvcc may not have.

The fast tier compiles a device unit (`compile.device_unit`): the file with its host code
blanked and its headers rewritten, for NVRTC. Where an error lies in what that rewriting
touched, NVRTC judged code nvcc never sees, so the error may be the rewriting's, not the
user's. These cases each give a *warning* that says so instead of an error:

- the error's line was rewritten (part of it blanked): "the fast check rewrote this line";
- the error names something the rewriting removed from the file or a project header (a
  declaration in blanked host code: `identifier "f" is undefined` where `f` was declared in a
  blanked region);
- the error lies in a library's header (the toolkit's, a stand-in, or one NVRTC read from a
  configured include directory): those are compiled by nvcc with the host compiler's headers;
- the error lies in a header of the project that the unit rewrote (its text differs from the
  file's: host code blanked), where the error's cause may be what was blanked (a class
  deriving from a blanked one: dlib's `fatal_error : public error`);
- the error lies in a header cuda-llm wrote for the unit (the std names it gives device code
  from libcu++, a forwarding stand-in), or is an ambiguity naming a `cuda::std` name that header
  gave to `std` (CCCL 3.0's `cuda::std::move` beside NVRTC's own `std::move`): ours, not the
  user's;
- the error says a C library name is undefined (`identifier "fprintf" is undefined`): the
  unit's stand-ins for <stdio.h>, <stdlib.h> and <string.h> give NVRTC only what device code
  has;
- the error is about a `__device__` variable (`dynamic initialization is not supported for a
  __device__ variable`) whose declaration carries no execution space: the unit is compiled with
  `-default-device`, which makes every unannotated variable a device one, where nvcc makes it a
  host variable (a class's `static inline const half alpha = 1.0;` in host-only traits);
- the error says `std` lacks a name (`namespace "std" has no member "ostream"`), in the file or
  in any header: NVRTC has no C++ standard library, the unit drops the host's standard headers
  and declares only part of `std` for device code, so a name nvcc's libstdc++ has may be missing;
- the error says a namespace that a stand-in of cuda-llm's declares lacks a name (`namespace
  "at" has no member "opmath_type"`, where <ATen/OpMathType.h> was read as the PyTorch
  stand-in): a stand-in declares only what device code most often uses of the headers it
  replaces, so a name the real ones have may be missing (what follows from it on the line,
  "expected a ;" at `opmath_type<`, stays an error, as after a missing `std` name).

When the file's first error is such a one and errors are many (`UNAVAILABLE_AT`), what follows
it is most likely its consequence: the file gets one warning, "fast check unavailable", and the
errors become information notes (still listed in the editor, never red). An error in code the
rewriting left alone stays an error: planted errors are still found at their lines.

nvcc's verdict (`compile.nvcc_tier`) replaces all of these where nvcc runs: the codes are the
compile's own, so `merge_nvcc` withdraws them like any fast-tier compile diagnostic.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from cuda_llm_lsp.compile import headers, std_names
from cuda_llm_lsp.compile.device_unit import DeviceUnit
from cuda_llm_lsp.compile.nvcc import NVCC_ENV, nvcc_missing
from cuda_llm_lsp.compile.nvcc_path import find_nvcc
from cuda_llm_lsp.compile.types import Diagnostic
from cuda_llm_lsp.source.text import normalized

#: From this many errors, a first error in rewritten code makes the fast check unavailable.
UNAVAILABLE_AT = 5
#: Diagnostic.code of the one "fast check unavailable" warning.
UNAVAILABLE_CODE = "fast-unavailable"
_WORD = re.compile(r"[A-Za-z_]\w*")
# the messages in which EDG names what it could not find: the name a rewriting may have removed
_MISSING = re.compile(
    r'identifier "(?P<a>[^"\n]+)" is undefined|has no member "(?P<b>[^"\n]+)"'
    r'|no instance of (?:overloaded )?function "(?P<c>[^"\n]+)"'
    r'|"(?P<d>[^"\n]+)" is not a (?:template|type name|class or struct)'
)
_HEADER = re.compile(r'^in included file "(?P<file>[^"]*)" line (?P<line>\d+): ')
# an error about a device variable: one `-default-device` may have made of a host variable
_DEVICE_VARIABLE = re.compile(r"__device__ variable")
# what makes a declaration's variable a device one under nvcc too
_SPACE = re.compile(r"\b__(?:device|constant|shared|managed)__\b")
# `cuda::std::__4::move` in EDG's messages: a libcu++ name, its versioned namespace skipped
_CUDA_STD_NAME = re.compile(r"\bcuda::std::(?:__\w+::)*(?P<name>\w+)")
# what a using-declaration of ours beside another declaration of the name causes (a wrong call
# of `std::min` says "no instance ...": the user's, still an error)
_AMBIGUOUS = re.compile(r"more than one instance of|is ambiguous")
# a header of ours that only includes another (`<cccl/cuda/std/cstdint>` -> `<cuda/std/cstdint>`)
_FORWARDER = re.compile(r'(?:#pragma once\n)?#include [<"](?P<target>[^>"\n]+)[>"]\n?')
# the C library's names of the headers cuda-llm stands in for (<stdio.h>, <stdlib.h>,
# <string.h> and their <c...> forms: C11's 7.21-7.24), of which the stand-ins give NVRTC only
# the few device code has (printf, malloc, free, memcpy, memset): `fprintf(stderr, ...); abort();`
# in host code the unit could not tell from device code (a macro expanding to a host function)
_C_LIBRARY = headers.names(
    """
    remove rename tmpfile tmpnam fclose fflush fopen freopen setbuf setvbuf fprintf fscanf
    scanf snprintf sprintf sscanf vfprintf vfscanf vprintf vscanf vsnprintf vsprintf vsscanf
    fgetc fgets fputc fputs getc getchar putc putchar puts ungetc fread fwrite fgetpos fseek
    fsetpos ftell rewind clearerr feof ferror perror stdin stdout stderr EOF BUFSIZ
    atof atoi atol atoll strtod strtof strtold strtol strtoll strtoul strtoull rand srand
    aligned_alloc calloc realloc abort atexit at_quick_exit exit _Exit getenv quick_exit system
    bsearch qsort labs llabs div ldiv lldiv mblen mbtowc wctomb mbstowcs wcstombs EXIT_SUCCESS
    EXIT_FAILURE RAND_MAX memmove strcpy strncpy strcat strncat memcmp strcmp strcoll strncmp
    strxfrm memchr strchr strcspn strpbrk strrchr strspn strstr strtok strerror strlen
    """
)
_UNDEFINED = re.compile(r'identifier "(?P<name>\w+)" is undefined')
_NO_STD_MEMBER = re.compile(
    r'namespace "std" has no member (?:class |function )?"(?P<name>[^"\n]+)"'
)
_NO_MEMBER = re.compile(
    r'namespace "(?P<ns>\w+)(?:::[\w:]+)?" has no member (?:class |function )?"(?P<name>[^"\n]+)"'
)
# a namespace a stand-in opens at its top level (`namespace at {`, `namespace c10 {`)
_TOP_NAMESPACE = re.compile(r"^namespace\s+(\w+)\s*\{", re.MULTILINE)


@dataclass(frozen=True)
class Rewrites:
    """What the device unit changed of the user's file."""

    lines: frozenset[int]  # 1-based lines whose text the unit changed
    removed: frozenset[str]  # words the unit removed from the file and its headers (host code)
    own_headers: frozenset[str]  # names of the headers the unit rewrote (the project's)
    rewritten: frozenset[str] = frozenset()  # of those, the ones whose text the unit changed
    ours: frozenset[str] = frozenset()  # headers cuda-llm wrote (`std_names.HEADER`, forwarders)
    std_given: frozenset[str] = frozenset()  # names `std_names.HEADER` gives from libcu++
    text: str = ""  # the user's file (normalized), where a declaration's annotation is read
    headers: Mapping[str, str] = field(default_factory=dict)  # the unit's headers' texts
    # namespace -> the header its stand-in replaced (`at` -> `ATen/OpMathType.h`)
    stood_in: Mapping[str, str] = field(default_factory=dict)


def rewrites(text: str, unit: DeviceUnit) -> Rewrites:
    """Compare the file with its device unit, line by line (the unit keeps every line)."""
    removed: set[str] = set()
    lines = _removed_words(normalized(text), unit.text, removed)
    # a project's directories first (as NVRTC searches), then the toolkits' that a library's
    # header may have been read from (cuSPARSE's, blanked like a project header)
    dirs = (*unit.include_dirs, *unit.toolkit_dirs, *_toolkit_dirs())
    changed: set[str] = set()
    for name, body in unit.headers.items():
        original = _original(name, dirs)
        if original is not None and original.rstrip("\n") != body.rstrip("\n"):
            changed.add(name)
            # a host declaration blanked in a header (`int getWarpSizeCurrentDevice();`) is
            # removed as much as one in the file: what names it may be left without it
            _removed_words(original, body, removed)
    ours = frozenset(
        name
        for name, body in unit.headers.items()
        if name == std_names.HEADER or _FORWARDER.fullmatch(body.strip() + "\n")
    )
    given = std_names.given(unit.headers.get(std_names.HEADER, ""))
    stood_in: dict[str, str] = {}
    for name in sorted(ours):
        target = _FORWARDER.fullmatch(unit.headers[name].strip() + "\n")
        for namespace in _stand_in_namespaces(target.group("target") if target else ""):
            stood_in.setdefault(namespace, name)
    return Rewrites(
        frozenset(lines), frozenset(removed), frozenset(unit.headers), frozenset(changed), ours,
        given, normalized(text), unit.headers, stood_in,
    )  # fmt: skip


@functools.lru_cache(maxsize=32)
def _stand_in_namespaces(include: str) -> frozenset[str]:
    """The namespaces stand-in `include` (a name in `headers.STUB_DIR`) opens at its top level;
    none for any other header."""
    path = headers.STUB_DIR / include
    if not include or ".." in include or not path.is_file():
        return frozenset()
    return frozenset(_TOP_NAMESPACE.findall(path.read_text(encoding="utf-8", errors="replace")))


_MAX_HEADER_BYTES = 8 << 20


def _toolkit_dirs() -> tuple[str, ...]:
    """The include directories of the nvcc in use and of NVRTC's toolkit, where the unit reads
    a host library's header (`headers.find_library_header`)."""
    return (*headers.nvcc_include_dirs(find_nvcc()), *headers.toolkit_include_dirs())


def _removed_words(before: str, after: str, removed: set[str]) -> set[int]:
    """The 1-based lines where `after` (the unit's text, every line kept) differs from `before`;
    the words those lines lost are added to `removed`."""
    lines: set[int] = set()
    for n, (old, new) in enumerate(zip(before.split("\n"), after.split("\n"), strict=False), 1):
        if old != new:
            lines.add(n)
            removed.update(set(_WORD.findall(old)) - set(_WORD.findall(new)))
    return lines


def _original(name: str, dirs: tuple[str, ...]) -> str | None:
    """The text of header `name` as on disk (the first of `dirs` holding it, as NVRTC
    searches), normalized; None for one not on disk (a stand-in)."""
    for directory in dirs:
        path = Path(directory) / name
        try:
            if not path.is_file() or path.stat().st_size > _MAX_HEADER_BYTES:
                continue
            return normalized(path.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            continue
    return None


def be_honest(diagnostics: list[Diagnostic], changes: Rewrites) -> list[Diagnostic]:
    """`diagnostics` (the fast tier's compile diagnostics, 1-based, in the user's file) with the
    errors it cannot be sure of turned into warnings that say why (see the module's
    docstring)."""
    hint = _hint()
    out: list[Diagnostic] = []
    unsure: list[Diagnostic] = []
    for d in diagnostics:
        why = _doubt(d, changes) if d.severity == "error" else None
        if why is None:
            out.append(d)
            continue
        softened = replace(d, severity="warning", message=f"{d.message} ({why}; {hint})")
        unsure.append(softened)
        out.append(softened)
    errors = sorted(
        (d for d in diagnostics if d.severity == "error"), key=lambda d: (d.line, d.column)
    )
    if len(errors) < UNAVAILABLE_AT or not errors or _doubt(errors[0], changes) is None:
        return out
    first = errors[0]
    note = Diagnostic(
        1, 1, 1, 2, "warning",
        f"fast check unavailable: {len(errors)} errors from line {first.line} on, the first in "
        f"code the fast check had to rewrite for NVRTC ({_doubt(first, changes)}), so the rest "
        f"may be its consequences; {hint}",
        code=UNAVAILABLE_CODE,
    )  # fmt: skip
    demoted = [
        replace(d, severity="information") if d.severity == "error" or d in unsure else d
        for d in out
    ]
    return [note, *demoted]


def _doubt(d: Diagnostic, changes: Rewrites) -> str | None:
    """Why the fast tier cannot be sure of error `d`, or None when it can."""
    if (std := _NO_STD_MEMBER.search(d.message)) is not None:
        return (
            f'"std::{std.group("name")}" is not in the part of the C++ library the fast check '
            "gives NVRTC (nvcc compiles with the host's)"
        )
    member = _NO_MEMBER.search(d.message)
    if member is not None and member.group("ns") in changes.stood_in:
        return (
            f'"{member.group("name")}" is not in the part of namespace {member.group("ns")} '
            f"that cuda-llm's stand-in for <{changes.stood_in[member.group('ns')]}> declares "
            "(nvcc compiles with the real header)"
        )
    undefined = _UNDEFINED.search(d.message)
    if undefined is not None and undefined.group("name") in _C_LIBRARY:
        return (
            f'"{undefined.group("name")}" is in the part of the C library the fast check does '
            "not give NVRTC (nvcc compiles with the host's)"
        )
    header = _HEADER.match(d.message)
    if header is not None and header.group("file") in changes.ours:
        return f"in {header.group('file')}, which cuda-llm wrote for NVRTC (not the project's)"
    for used in _CUDA_STD_NAME.finditer(d.message if _AMBIGUOUS.search(d.message) else ""):
        if used.group("name") in changes.std_given:
            return (
                f'"std::{used.group("name")}" is libcu++\'s here, given by cuda-llm for NVRTC '
                "(nvcc compiles with the host's C++ library)"
            )
    if _DEVICE_VARIABLE.search(d.message):
        text, line = changes.text, d.line
        if header is not None:
            text, line = changes.headers.get(header.group("file"), ""), int(header.group("line"))
        if text and _unannotated(text, line):
            return (
                "the fast check compiles a variable with no execution space as __device__ "
                "(NVRTC's -default-device); nvcc makes it a host variable"
            )
    if header is not None:
        file = header.group("file")
        if file.startswith("<") or file not in changes.own_headers:
            return f"in a library header ({file}), which nvcc compiles with the host's headers"
        if file in changes.rewritten:
            return f"in {file}, which the fast check rewrote for NVRTC (host code removed)"
        return None  # a project header as it is on disk: its error is the project's
    if d.line in changes.lines:
        return "the fast check rewrote this line for NVRTC (host code removed)"
    missing = _MISSING.search(d.message)
    if missing is not None:
        name = next(g for g in missing.groups() if g is not None)
        words = _WORD.findall(name.split("<", 1)[0])
        if words and words[-1] in changes.removed:
            return f'the fast check removed host code that names "{words[-1]}"'
    return None


def _unannotated(text: str, line: int) -> bool:
    """Whether the declaration on 1-based `line` of `text` (from the last `;`, `{` or `}` before
    the line to the line's end) names no execution space: nvcc's host variable."""
    lines = text.split("\n")
    if not 1 <= line <= len(lines):
        return False
    head = "\n".join(lines[: line - 1])
    start = max(head.rfind(c) for c in ";{}") + 1
    return _SPACE.search(head[start:] + "\n" + lines[line - 1]) is None


def _hint() -> str:
    """What settles it: the nvcc check where nvcc is found, else installing it."""
    return _hint_for(os.environ.get(NVCC_ENV, ""), os.environ.get("PATH", ""))


@functools.lru_cache(maxsize=8)
def _hint_for(nvcc_env: str, path: str) -> str:
    del nvcc_env, path  # the cache key: where nvcc is looked for
    if nvcc_missing() is None:
        return "nvcc may accept it: the nvcc check (on open and save; `cuda-llm check`) decides"
    return "nvcc may accept it: install the nvcc extra (pip install 'cuda-llm-lsp[nvcc]')"
