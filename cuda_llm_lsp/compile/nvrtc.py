"""Compile a device unit with NVRTC (cuda.bindings.nvrtc): cubin, diagnostics, ptxas resources.

The log is EDG's: `FILE(LINE): error|warning #NNN-D: MESSAGE`, optional continuation lines,
the source line echoed with two spaces of indent, a caret line, then `detected during ...`
context. Errors in an included header are attached to that header's `#include` line in the
user's file. `-Xptxas -v` output gives registers, spills, shared memory and stack per entry
function; mangled names are mapped back to the name expressions with `nvrtcGetLoweredName`.
NVRTC calls block (tens of milliseconds to seconds) and can crash or hang on hostile input: the
CLI and the server call us in a compile process (`compile.isolated`), never in their own.
`syntax_only` runs the front end alone (`-fdevice-syntax-only`): the same diagnostics at the
same positions in a fraction of the time, and no code (no resources, no cubin).
"""

from __future__ import annotations

import logging
import re
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from cuda_llm_lsp.compile import headers as std_headers
from cuda_llm_lsp.compile import std_names
from cuda_llm_lsp.compile.flags import NVCC_ONLY, allowed_flags
from cuda_llm_lsp.compile.types import (
    CompileOptions,
    CompileResult,
    DeviceUnit,
    Diagnostic,
    NvrtcUnavailable,
    Resources,
    Severity,
)

log = logging.getLogger(__name__)
NAME_MAP_FILE = "__nv_name_map"  # where NVRTC reports bad name expressions
MAX_PER_INCLUDE = 10  # header warnings and notes shown on one #include line (errors: all)
BASE_FLAGS = (
    "-Xptxas=-v",  # per-kernel registers, spills, shared memory, stack
    "-lineinfo",  # source lines in the cubin for profilers; costs nothing measurable
    # NVRTC rejects every unannotated function and namespace-scope variable ("not allowed in
    # JIT mode"). Host ones are blanked from the unit; what remains unannotated is what device
    # code may use: constexpr helpers (nvcc --expt-relaxed-constexpr style) and constants.
    "-default-device",
    # a narrowing brace initialiser (`coord c = {blockIdx.z, ...}` with a constructor taking
    # ints: ThunderKittens) is a warning in nvcc's GNU-mode front end, an error in NVRTC's
    "--diag-warn=2361",
)

_load_lock = threading.Lock()
_module: Any = None
_version: tuple[int, int] | None = None


def nvrtc_module() -> Any:
    """`cuda.bindings.nvrtc`, checked to load libnvrtc; raises NvrtcUnavailable otherwise."""
    global _module, _version
    if _module is not None:
        return _module
    with _load_lock:
        if _module is None:
            try:
                from cuda.bindings import nvrtc

                err, major, minor = nvrtc.nvrtcVersion()
                if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
                    raise RuntimeError(f"nvrtcVersion failed: {err}")
            except Exception as exc:
                raise NvrtcUnavailable(
                    "NVRTC could not be loaded (install the CUDA toolkit wheels: "
                    f"pip install 'cuda-toolkit[nvrtc,cudart,crt,cccl]==13.*'): {exc}"
                ) from exc
            _version = (major, minor)
            _module = nvrtc
    return _module


def nvrtc_version() -> tuple[int, int]:
    nvrtc_module()
    assert _version is not None
    return _version


SYNTAX_ONLY = "-fdevice-syntax-only"
PCH_FLAGS = ("-pch", "--pch-messages=false")
# NVRTC's words about a PCH file: "precompiled header" anywhere (a heap too small for it is a
# warning located in a header), "PCH" outside a located diagnostic (which may quote a user's
# identifier `PCH`)
_PCH_WORDS = re.compile(r"precompiled header", re.IGNORECASE)
_PCH_ABBREVIATION = re.compile(r"\bPCH\b", re.IGNORECASE)
_LOCATED = re.compile(r"^\S.*?\(\d+\): ")


class PchRefused(Exception):
    """NVRTC did not use (or create) the PCH file it was given, and said why in its log (a file
    from another process's heap address, a truncated file): the caller compiles plainly."""


_BEFORE_CXX17 = frozenset({"c++03", "c++11", "c++14"})


def build_flags(
    unit: DeviceUnit, options: CompileOptions, *, syntax_only: bool = False
) -> list[str]:
    """The NVRTC command line for `unit`; the order of -I matters (stand-ins first). Every
    option past our own passes `flags.check_flag`'s allow-list (refused ones are logged)."""
    # -std: the project's dialect (nvcc's default, c++17, unless configured); at least C++17
    # where the unit takes std's names from libcu++, which refuses anything older (`#error`):
    # a C++11/14 project's file is then read as C++17 by NVRTC; nvcc keeps the project's dialect
    std = options.std
    if std in _BEFORE_CXX17 and std_names.HEADER in unit.headers:
        std = "c++17"
    flags = [f"--gpu-architecture={options.arch}", f"-std={std}", *BASE_FLAGS]
    if syntax_only:
        flags.append(SYNTAX_ONLY)
    if sys.platform.startswith("linux"):  # the prelude's platform macros (as nvcc's host's)
        flags.append("-DCUDA_LLM_HOST_LINUX")
    flags.append(f"--pre-include={std_headers.PRELUDE}")
    if std_names.HEADER in unit.headers:
        flags.append(f"--pre-include={std_names.HEADER}")
    dirs: list[str] = [str(std_headers.STUB_DIR)]
    project, toolkits = std_headers.split_include_dirs(options.include_paths)
    for directory in (
        *unit.include_dirs,
        *project,
        *std_headers.toolkit_include_dirs(),  # before another toolkit's: NVRTC's own version
        *unit.toolkit_dirs,
        *toolkits,
    ):
        if directory not in dirs:
            dirs.append(directory)
    asked = [
        *(f"-I{d}" for d in dirs),
        *(f"-D{d}" for d in options.defines if d.strip()),
        *(f for f in options.extra_flags if f not in NVCC_ONLY),
    ]
    # the allow-list, whatever the options' source (settings were checked with a message)
    kept, refused = allowed_flags(asked)
    if refused:
        log.warning("NVRTC options left out: %s", "; ".join(refused))
    flags.extend(kept)
    return flags


def compile_unit(
    unit: DeviceUnit,
    options: CompileOptions,
    name_expressions: Sequence[str],
    *,
    syntax_only: bool = False,
    pch: bool = False,
    pch_file: str = "",
    create_pch: bool = False,
) -> CompileResult:
    """Compile `unit` for `options.arch`; never raises on bad source, only NvrtcUnavailable
    (and PchRefused, with `pch_file`).
    `pch`: NVRTC's automatic precompiled header, in the process's TMPDIR (`compile.isolated`).
    `pch_file`: use that PCH file (`create_pch`: write it), one kept across sessions by a
    process without address-space randomization (`compile.isolated`); NVRTC's one message of
    using or creating it is left out of the log, and any other word about it raises PchRefused
    (a result with a PCH NVRTC turned down could differ from a plain one: never returned)."""
    nvrtc = nvrtc_module()
    expressions = list(dict.fromkeys(e.strip() for e in name_expressions if e.strip()))
    headers = dict(unit.headers)
    flags = build_flags(unit, options, syntax_only=syntax_only)
    if pch:  # ours, after the allow-list (which refuses every PCH option from settings)
        flags.extend(PCH_FLAGS)
    if pch_file:  # ours too, after the allow-list
        flags.append(f"--{'create' if create_pch else 'use'}-pch={pch_file}")
    run = _pch_checked(_run(nvrtc, unit, headers, flags, expressions), pch_file, create_pch)
    bad = _bad_name_expressions(run.log, expressions)
    if bad:  # an unusable instantiation must not hide the file's own diagnostics
        expressions = [e for e in expressions if e not in bad]
        run = _pch_checked(_run(nvrtc, unit, headers, flags, expressions), pch_file, create_pch)
    diagnostics = parse_log(run.log, unit, run.lowered)
    resources = _resources_by_expression(parse_ptxas(run.log), run.lowered)
    ok = run.ok and not any(d.severity == "error" for d in diagnostics)
    return CompileResult(
        ok=ok,
        arch=options.arch,
        diagnostics=tuple(diagnostics),
        log=run.log,
        cubin=run.cubin if ok and not syntax_only else None,  # syntax only: an empty module
        lowered_names=run.lowered,
        resources=resources,
    )


@dataclass
class _Run:
    ok: bool
    log: str
    cubin: bytes | None
    lowered: dict[str, str]


def _run(
    nvrtc: Any,
    unit: DeviceUnit,
    headers: dict[str, str],
    flags: list[str],
    expressions: list[str],
) -> _Run:
    success = nvrtc.nvrtcResult.NVRTC_SUCCESS
    names = list(headers)
    err, prog = nvrtc.nvrtcCreateProgram(
        _c_string(unit.text),
        unit.name.encode(),
        len(names),
        [_c_string(headers[n]) for n in names],
        [n.encode() for n in names],
    )
    if err != success:
        return _Run(
            False, f"nvrtc: error: cannot create program: {_error_string(nvrtc, err)}", None, {}
        )
    try:
        for expression in expressions:
            nvrtc.nvrtcAddNameExpression(prog, expression.encode())
        encoded = [f.encode() for f in flags]
        (result,) = nvrtc.nvrtcCompileProgram(prog, len(encoded), encoded)
        log = _program_log(nvrtc, prog)
        if result not in (success, nvrtc.nvrtcResult.NVRTC_ERROR_COMPILATION) and not log.strip():
            log = f"nvrtc: error: {_error_string(nvrtc, result)}"
        if result != success:
            return _Run(False, log, None, {})
        lowered: dict[str, str] = {}
        for expression in expressions:
            err, symbol = nvrtc.nvrtcGetLoweredName(prog, expression.encode())
            if err == success and symbol:
                lowered[expression] = symbol.decode()
        return _Run(True, log, _cubin(nvrtc, prog), lowered)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def _pch_checked(run: _Run, pch_file: str, create: bool) -> _Run:
    """`run` without NVRTC's line saying it used (created) `pch_file`; PchRefused when that line
    is missing or any other line speaks of a PCH (a warning that it was not used, an invalid
    file: NVRTC may have parsed the headers plainly, or stopped)."""
    if not pch_file:
        return run
    said = f'{"creating" if create else "using"} precompiled header file "{pch_file}"'
    kept: list[str] = []
    found = False
    for line in run.log.splitlines(keepends=True):
        if said in line and not found:
            found = True
        elif _PCH_WORDS.search(line) or (
            _PCH_ABBREVIATION.search(line) and not _LOCATED.match(line)
        ):
            raise PchRefused(line.strip()[:300])
        else:
            kept.append(line)
    if not found:
        raise PchRefused(f"NVRTC did not say it was {said}")
    return replace(run, log="".join(kept))


def _c_string(text: str) -> bytes:
    return text.replace("\0", " ").encode("utf-8", errors="replace")


def _error_string(nvrtc: Any, result: Any) -> str:
    try:
        return nvrtc.nvrtcGetErrorString(result)[1].decode()
    except Exception:  # only used to word a message
        return str(result)


def _program_log(nvrtc: Any, prog: Any) -> str:
    err, size = nvrtc.nvrtcGetProgramLogSize(prog)
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS or size <= 1:
        return ""
    buffer = bytearray(size)  # writable: never a shared bytes object NVRTC would write into
    nvrtc.nvrtcGetProgramLog(prog, buffer)
    # NVRTC joins the front end's log and ptxas's with a NUL: a line break keeps both readable
    return bytes(buffer).rstrip(b"\0").replace(b"\0", b"\n").decode("utf-8", errors="replace")


def _cubin(nvrtc: Any, prog: Any) -> bytes | None:
    err, size = nvrtc.nvrtcGetCUBINSize(prog)
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS or size == 0:
        return None
    buffer = bytearray(size)
    (err,) = nvrtc.nvrtcGetCUBIN(prog, buffer)
    return bytes(buffer) if err == nvrtc.nvrtcResult.NVRTC_SUCCESS else None


# --- the log ---------------------------------------------------------------------------------

_HEAD = re.compile(
    r"^(?P<file>.+?)\((?P<line>\d+)\): (?P<severity>catastrophic error|fatal error|error|warning"
    r"|remark|note)(?: #(?P<code>\w+(?:-\w)?))?: (?P<message>.*)$"
)
_AT_END = re.compile(
    r"^At end of source: (?P<severity>error|warning|catastrophic error): (?P<message>.*)$"
)
_CARET = re.compile(r"^[ \t]*\^[ \t]*$")
_PTXAS_PROBLEM = re.compile(r"^ptxas (?P<kind>error|warning|fatal)\s*: (?P<message>.*)$")
_NVRTC_PROBLEM = re.compile(r"^(?:nvrtc: )?(?P<kind>error|warning): (?P<message>.*)$")
_TOKEN = re.compile(r"[A-Za-z_0-9]\w*|\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'|\S")
_SEVERITY: dict[str, Severity] = {
    "catastrophic error": "error",
    "fatal error": "error",
    "error": "error",
    "fatal": "error",
    "warning": "warning",
    "remark": "information",
    "note": "information",
}


def parse_log(
    log: str, unit: DeviceUnit, lowered: dict[str, str] | None = None
) -> list[Diagnostic]:
    """NVRTC's log as diagnostics in the user's file (1-based; end_column exclusive)."""
    lines = log.replace("\r\n", "\n").split("\n")
    main_lines = unit.text.split("\n")
    split: dict[str, list[str] | None] = {unit.name: main_lines}  # each file split once
    symbols = {symbol: name for name, symbol in (lowered or {}).items()}
    out: list[Diagnostic] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        head = _HEAD.match(line)
        if head is None:
            at_end = _AT_END.match(line)
            if at_end is not None:  # an unclosed brace or comment: the end of the user's file
                row = max(len(main_lines) - 1, 0)
                column = len(main_lines[row]) if main_lines else 0
                severity = _SEVERITY.get(at_end.group("severity"), "error")
                message = at_end.group("message").strip() + " at the end of the file"
                out.append(Diagnostic(row + 1, column + 1, row + 1, column + 1, severity, message))
                i += 1
                continue
            extra = _other_problem(line, symbols)
            if extra is not None:
                out.append(extra)
            i += 1
            continue
        i += 1
        file = head.group("file")
        if file == NAME_MAP_FILE:
            while i < len(lines) and lines[i].strip():
                i += 1
            continue
        message = _name_stand_ins(head.group("message").strip())
        source_lines = _source_of(file, unit, split)
        row = int(head.group("line")) - 1
        source = (
            source_lines[row] if source_lines is not None and 0 <= row < len(source_lines) else None
        )
        caret: int | None = None
        before: list[str] = []  # continuation lines, then the echoed source line
        context: list[str] = []
        while i < len(lines) and lines[i].strip() and not _HEAD.match(lines[i]):
            current = lines[i]
            if caret is None and _CARET.match(current):
                caret = current.index("^") - 2
                if before:
                    before.pop()  # the line above the caret echoes the source
            elif caret is None:
                before.append(current)
            else:
                context.append(current.strip())  # "detected during instantiation of ..."
            i += 1
        echoed = source is not None and bool(before)
        if caret is None and echoed and before[-1].rstrip() == ("  " + str(source)).rstrip():
            before.pop()
        message = " ".join([message, *(b.strip() for b in before)])
        if context:
            message += " (" + "; ".join(context) + ")"
        out.append(_diagnostic(head, file, message, row, source, caret, unit, main_lines))
    return _unique(out)


def _source_of(file: str, unit: DeviceUnit, split: dict[str, list[str] | None]) -> list[str] | None:
    if file not in split:
        header = unit.headers.get(file)
        split[file] = header.split("\n") if header is not None else None
    return split[file]


def _diagnostic(
    head: re.Match[str],
    file: str,
    message: str,
    row: int,
    source: str | None,
    caret: int | None,
    unit: DeviceUnit,
    main_lines: list[str],
) -> Diagnostic:
    severity = _SEVERITY[head.group("severity")]
    code = head.group("code")
    if file == unit.name:
        column = _char_column(source, caret) if source is not None and caret is not None else 0
        end = _token_end(source, column) if source is not None else column
        return Diagnostic(row + 1, column + 1, row + 1, end + 1, severity, message, code)
    include_row, span = _include_site(file, unit, main_lines)
    where = f'in included file "{_display_name(file)}" line {row + 1}: {message}'
    return Diagnostic(
        include_row + 1, span[0] + 1, include_row + 1, span[1] + 1, severity, where, code
    )


def _name_stand_ins(message: str) -> str:
    """Name our prelude for what it stands for where EDG mentions it (macro redefinitions)."""
    prelude = std_headers.PRELUDE
    if prelude not in message:
        return message
    message = message.replace(str(std_headers.STUB_DIR / prelude), prelude)
    return message.replace(prelude, "cuda-llm's stand-in for nvcc's implicit <math.h>")


def _display_name(file: str) -> str:
    """Toolkit and stand-in headers by their include name (`<cuda_fp16.h>`), not a venv path."""
    normalized = file.replace("\\", "/")
    for directory in (str(std_headers.STUB_DIR), *std_headers.toolkit_include_dirs()):
        prefix = directory.replace("\\", "/").rstrip("/") + "/"
        if normalized.startswith(prefix):
            return f"<{normalized[len(prefix) :]}>"
    return file


def _include_site(
    file: str, unit: DeviceUnit, main_lines: list[str]
) -> tuple[int, tuple[int, int]]:
    """The main-file `#include` line that brought `file` in (0-based row, column range).

    `main_lines`: `unit.text` split once per log (a header can bring hundreds of messages).
    """
    row: int | None = unit.include_lines.get(file)
    if row is None:
        normalized = file.replace("\\", "/")
        for name, line in sorted(unit.include_lines.items(), key=lambda item: item[1]):
            stem = name.rsplit(".", 1)[0]
            if (
                normalized.endswith("/" + name)
                or normalized.endswith(name)
                or (stem and f"/{stem}." in normalized)
            ):
                row = line
                break
    if row is None:
        row = min(unit.include_lines.values(), default=0)
    text = main_lines[row] if row < len(main_lines) else ""
    stripped = text.rstrip()
    start = len(text) - len(text.lstrip())
    return row, (start, max(start, len(stripped)))


def _char_column(source: str, caret_bytes: int) -> int:
    """EDG counts the caret in bytes; the user's editor counts characters."""
    if caret_bytes <= 0:
        return 0
    encoded = source.encode("utf-8", errors="replace")
    return len(encoded[:caret_bytes].decode("utf-8", errors="ignore"))


def _token_end(source: str, column: int) -> int:
    match = _TOKEN.match(source, column)
    if match is None:
        return column
    return match.end()


def _other_problem(line: str, symbols: dict[str, str]) -> Diagnostic | None:
    """ptxas and driver-level messages that carry no source line: reported at 1:1."""
    match = _PTXAS_PROBLEM.match(line.strip())
    prefix = "ptxas: "
    if match is None:
        match = _NVRTC_PROBLEM.match(line.strip())
        prefix = ""
        if match is None:
            return None
    message = match.group("message").strip()
    for symbol, name in symbols.items():
        message = message.replace(f"'{symbol}'", f"'{name}'")
    severity = _SEVERITY.get(match.group("kind"), "error")
    return Diagnostic(1, 1, 1, 1, severity, prefix + message, "ptxas" if prefix else "nvrtc")


def _unique(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    """Drop repeats; every error kept, errors first on each line; at most MAX_PER_INCLUDE other
    header messages (warnings, notes) on one `#include` line, then one saying how many more:
    capping errors too, warnings first, once hid every real error of a file behind the cap."""
    seen: set[tuple[object, ...]] = set()
    per_include: dict[int, int] = {}
    hidden: dict[int, Diagnostic] = {}
    out: list[Diagnostic] = []
    for d in sorted(diagnostics, key=lambda d: d.severity != "error"):  # stable: log order
        key = (d.line, d.column, d.severity, d.message)
        if key in seen:
            continue
        seen.add(key)
        if d.severity != "error" and d.message.startswith("in included file "):
            per_include[d.line] = per_include.get(d.line, 0) + 1
            if per_include[d.line] > MAX_PER_INCLUDE:
                hidden.setdefault(d.line, d)
                continue
        out.append(d)
    for line, first in hidden.items():
        more = per_include[line] - MAX_PER_INCLUDE
        message = f"... and {more} more warnings and notes in included files"
        out.append(replace(first, severity="warning", message=message, code=None))
    return sorted(out, key=lambda d: (d.line, d.severity != "error", d.column))


def _bad_name_expressions(log: str, expressions: list[str]) -> set[str]:
    """Name expressions NVRTC could not resolve (reported in its synthetic __nv_name_map)."""
    if NAME_MAP_FILE not in log:
        return set()
    bad: set[str] = set()
    squeeze = re.compile(r"\s+")
    wanted = {squeeze.sub("", e): e for e in expressions}
    for line in log.split("\n"):
        marker = "#pragma nv_mangled_name"
        if marker in line:
            text = squeeze.sub("", line.split(marker, 1)[1])
            if text in wanted:
                bad.add(wanted[text])
        elif "Input name expression was:" in line:
            text = squeeze.sub("", line.rsplit(":", 1)[1].strip().strip('"'))
            if text in wanted:
                bad.add(wanted[text])
    return bad


# --- ptxas -v --------------------------------------------------------------------------------

_ENTRY = re.compile(r"Compiling entry function '(?P<name>[^']+)'")
_PROPERTIES = re.compile(r"Function properties for (?P<name>\S+)")
_FRAME = re.compile(
    r"(?P<stack>\d+) bytes stack frame, (?P<stores>\d+) bytes spill stores, "
    r"(?P<loads>\d+) bytes spill loads"
)
_USED = re.compile(r"Used (?P<registers>\d+) registers")
_SMEM = re.compile(r"(?P<bytes>\d+) bytes smem")
_CMEM = re.compile(r"(?P<bytes>\d+) bytes cmem\[\d+\]")


def parse_ptxas(log: str) -> dict[str, Resources]:
    """Resources per entry function (mangled symbol) from `ptxas -v` lines."""
    frames: dict[str, tuple[int, int, int]] = {}
    out: dict[str, Resources] = {}
    entry: str | None = None
    properties_of: str | None = None
    for line in log.split("\n"):
        if not line.startswith("ptxas"):  # nvcc indents the stack frame line instead
            if (m := _FRAME.search(line)) and properties_of is not None:
                frames[properties_of] = (int(m["stack"]), int(m["stores"]), int(m["loads"]))
            continue
        if m := _ENTRY.search(line):
            entry = m.group("name")
        elif m := _PROPERTIES.search(line):
            properties_of = m.group("name")
        elif (m := _FRAME.search(line)) and properties_of is not None:
            frames[properties_of] = (int(m["stack"]), int(m["stores"]), int(m["loads"]))
        elif (m := _USED.search(line)) and entry is not None:
            stack, stores, loads = frames.get(entry, (0, 0, 0))
            smem = _SMEM.search(line)
            out[entry] = Resources(
                registers=int(m["registers"]),
                spill_stores=stores,
                spill_loads=loads,
                shared_bytes=int(smem["bytes"]) if smem else 0,
                stack_bytes=stack,
                constant_bytes=sum(int(c["bytes"]) for c in _CMEM.finditer(line)),
            )
            entry = None
    return out


def _resources_by_expression(
    by_symbol: dict[str, Resources], lowered: dict[str, str]
) -> dict[str, Resources]:
    out: dict[str, Resources] = {}
    for expression, symbol in lowered.items():
        if symbol in by_symbol:
            out[expression] = by_symbol[symbol]
    return out
