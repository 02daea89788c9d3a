"""A file's compile flags as its project's build gives them, read the way clangd reads them.

Where a file's include directories, defines and dialect come from, first found wins:

1. `compile_commands.json`: in the build directory given (`cuda-llm check -p DIR`,
   `cudaLlm.compileCommandsDir`), else in the file's directory or an ancestor (or its `build/`).
   The file's own entry; for a header (no entry of its own), the entry of a file whose text
   includes it by name, else the entry nearest to it in the tree.
2. `compile_flags.txt` in the file's directory or an ancestor: one flag per line.
3. The settings alone.

Ancestors are searched up to the workspace folder holding the file (the server's,
`flags.set_workspace`), else up to the nearest directory holding `.git` (the CLI, run inside a
repository), else up to `/`: a `compile_flags.txt` in a parent of the project is not the
project's. Every file is read with `include_reads`' rules (never a device, FIFO or special file
system; untrusted, only inside the workspace), and a project include directory the workspace's
trust does not allow is left out (`ProjectFlags.refused`).

Only flags that change what the device check sees are understood: `-I`, `-isystem`,
`--include-path`, `-D`, `-U`, `-std`, `--expt-relaxed-constexpr`, `--extended-lambda`,
`-arch`/`--gpu-architecture`
and `-gencode`. They are turned into `Settings` fields, never passed through raw; every other
flag is ignored and named in `ProjectFlags.ignored` (shown as a note).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cuda_llm_lsp.compile.flags import workspace_include_dirs
from cuda_llm_lsp.compile.include_reads import IncludeRefused, outside_problem, read_header
from cuda_llm_lsp.compile.tools import workspace_roots
from cuda_llm_lsp.config import STDS, Settings

MAX_DATABASE_BYTES = 64 * 1024 * 1024  # a compile_commands.json bigger than this is not read
MAX_SCANNED_SOURCES = 2000  # sources read to find a header's includer
MAX_SCANNED_BYTES = 1024 * 1024  # of each
# A flag that takes the next argument as its value (when not joined: `-I dir`, `-x cu`).
_TAKES_VALUE = frozenset(
    {"-I", "-isystem", "-D", "-U", "-std", "--std", "-arch", "--gpu-architecture", "-gencode",
     "--generate-code", "--include-path", "--define-macro", "--undefine-macro", "-o", "-x",
     "-include", "-ccbin", "--compiler-bindir", "-Xcompiler", "-Xptxas", "-Xlinker", "-MF",
     "-MT", "-MQ", "-L", "-l", "-idirafter", "-iquote", "--output-file", "-rdc",
     "--relocatable-device-code", "-maxrregcount", "--maxrregcount", "-t", "--threads"}
)  # fmt: skip
_ARCH = re.compile(r"(?:sm|compute)_(\d+[a-z]?)")
_STD_ALIASES = {"c++1y": "c++14", "c++1z": "c++17", "c++2a": "c++20", "c++2b": "c++20",
                "c++23": "c++20", "c++03": "c++11", "c++98": "c++11"}  # fmt: skip


@dataclass(frozen=True)
class ProjectFlags:
    """What the project's configuration says about one file (understood flags only)."""

    source: str  # where they came from, for display: "compile_commands.json (entry of x.cu)"
    include_paths: tuple[str, ...] = ()  # absolute, in order (-I and -isystem)
    defines: tuple[str, ...] = ()  # "NAME" or "NAME=VALUE", after -U removed any
    std: str | None = None  # one of config.STDS
    arch: str | None = None  # "sm_XY": the newest real architecture the build targets
    relaxed_constexpr: bool = False
    extended_lambda: bool = False
    relocatable: bool = False  # -rdc=true / -dc: device code linked later (device launches)
    ignored: tuple[str, ...] = ()  # flags that do not change the device check
    refused: tuple[str, ...] = ()  # include directories the workspace's trust does not allow

    def note(self) -> str:
        """One line for the editor: where the flags came from and what was left out."""
        text = f"compile flags from {self.source}"
        if self.ignored:
            shown = " ".join(self.ignored[:8]) + (" ..." if len(self.ignored) > 8 else "")
            text += f"; ignored (not needed for the device check): {shown}"
        if self.refused:
            text += "; " + "; ".join(self.refused)
        return text


def apply(settings: Settings, flags: ProjectFlags | None) -> Settings:
    """`settings` with the project's flags: its include paths and defines first, its dialect
    and architecture unless the settings name them (an explicit --arch / --std wins)."""
    if flags is None:
        return settings
    include_paths = tuple(dict.fromkeys((*flags.include_paths, *settings.include_paths)))
    defines = tuple(dict.fromkeys((*flags.defines, *settings.defines)))
    changes: dict[str, Any] = {"include_paths": include_paths, "defines": defines}
    if flags.std and settings.std is None:
        changes["std"] = flags.std
    if flags.arch and settings.arch is None:
        changes["arch"] = flags.arch
    nvcc_flags = (
        *(("--expt-relaxed-constexpr",) if flags.relaxed_constexpr else ()),
        *(("--extended-lambda",) if flags.extended_lambda else ()),
        # both compilers take it (`flags.nvcc_spellings`): without it, a device-side launch
        # the build compiles "requires separate compilation mode"
        *(("-rdc=true",) if flags.relocatable else ()),
    )  # for the nvcc tier: NVRTC is not given NVCC_ONLY ones (`flags.NVCC_ONLY`)
    if any(f not in settings.nvrtc_flags for f in nvcc_flags):
        changes["nvrtc_flags"] = tuple(dict.fromkeys((*settings.nvrtc_flags, *nvcc_flags)))
    return replace(settings, **changes)


def find_flags(path: Path, build_dir: str | Path | None = None) -> ProjectFlags | None:
    """The project's flags for `path` (see the module's order), or None when none is found.

    Never raises: an unreadable or malformed database is skipped like a missing one.
    """
    try:
        target = Path(os.path.realpath(path))
    except (OSError, ValueError):
        return None
    databases: list[Path] = []
    if build_dir:
        databases.append(Path(build_dir) / "compile_commands.json")
    flag_files: list[Path] = []
    for directory in _searched(target):
        databases.append(directory / "compile_commands.json")
        databases.append(directory / "build" / "compile_commands.json")
        flag_files.append(directory / "compile_flags.txt")
    for database in databases:
        entries = _load_database(database)
        if entries:
            found = _entry_for(target, entries)
            if found is not None:
                entry, why = found
                return _trusted(_parse(entry["arguments"], Path(entry["directory"]), why))
    for flags_file in flag_files:
        lines = _read_small(flags_file)
        if lines is not None:
            arguments = [line.strip() for line in lines.splitlines() if line.strip()]
            return _trusted(_parse(arguments, flags_file.parent, str(flags_file)))
    return None


def _searched(target: Path) -> list[Path]:
    """The directories searched for the configuration: the file's, then its ancestors up to
    the workspace folder holding it, else the repository's root (`.git`), else `/`."""
    parents = list(target.parents)
    roots = [Path(r) for r in workspace_roots()]
    holding = [r for r in roots if r == target or r in target.parents]
    if holding:
        top = max(holding, key=lambda r: len(r.parts))
        return parents[: parents.index(top) + 1]
    if roots:  # a file outside every folder: its own directory only
        return parents[:1]
    for i, directory in enumerate(parents):
        if os.path.lexists(directory / ".git"):
            return parents[: i + 1]
    return parents


def _trusted(flags: ProjectFlags) -> ProjectFlags:
    """`flags` without the include directories the workspace's trust does not allow."""
    kept, refused = workspace_include_dirs(flags.include_paths)
    if not refused:
        return flags
    return replace(flags, include_paths=kept, refused=tuple(refused))


_cache_lock = threading.Lock()
_databases: dict[Path, tuple[tuple[int, int, bool], list[dict[str, Any]]]] = {}


def _read_small(path: Path, max_bytes: int = MAX_DATABASE_BYTES) -> str | None:
    """A regular file's text if it exists, may be read (`include_reads`: no device, FIFO or
    special file system, nothing outside an untrusted workspace) and is not huge; else None."""
    if not os.path.lexists(path):
        return None
    try:
        data = read_header(path, max_bytes=max_bytes)
    except IncludeRefused:
        return None
    return data.decode("utf-8", errors="replace")


def _load_database(path: Path) -> list[dict[str, Any]]:
    """compile_commands.json's entries, each with `arguments` (a list), absolute `file` and
    `directory`; cached by the file's modification time and size."""
    try:
        if not path.is_file():
            return []
        stat = path.stat()
    except OSError:
        return []
    stamp = (stat.st_mtime_ns, stat.st_size, outside_problem(path) is None)
    with _cache_lock:
        cached = _databases.get(path)
        if cached is not None and cached[0] == stamp:
            return cached[1]
    text = _read_small(path)
    entries: list[dict[str, Any]] = []
    try:
        data = json.loads(text) if text else []
    except ValueError:
        data = []
    for item in data if isinstance(data, list) else []:
        entry = _normal_entry(item, path.parent)
        if entry is not None:
            entries.append(entry)
    with _cache_lock:
        _databases[path] = (stamp, entries)
    return entries


def _normal_entry(item: Any, base: Path) -> dict[str, Any] | None:
    if not isinstance(item, dict) or not isinstance(item.get("file"), str):
        return None
    directory = Path(item["directory"]) if isinstance(item.get("directory"), str) else base
    arguments = item.get("arguments")
    if not (isinstance(arguments, list) and all(isinstance(a, str) for a in arguments)):
        command = item.get("command")
        if not isinstance(command, str):
            return None
        try:
            arguments = shlex.split(command)
        except ValueError:
            return None
    file = Path(item["file"])
    file = file if file.is_absolute() else directory / file
    return {"file": os.path.realpath(file), "directory": str(directory), "arguments": arguments}


def _entry_for(target: Path, entries: list[dict[str, Any]]) -> tuple[dict[str, Any], str] | None:
    """The file's own entry; for a header, an includer's, else the nearest one."""
    wanted = str(target)
    for entry in entries:
        if entry["file"] == wanted:
            return entry, f"compile_commands.json (entry of {target.name})"
    name = target.name.encode()
    for entry in entries[:MAX_SCANNED_SOURCES]:
        try:  # never `open`: an entry may name /dev/ptmx or a FIFO
            text = read_header(entry["file"])[:MAX_SCANNED_BYTES]
        except IncludeRefused:
            continue
        if re.search(rb'#\s*include\s*["<]([^">]*/)?' + re.escape(name) + rb'[">]', text):
            includer = Path(entry["file"]).name
            return entry, f"compile_commands.json (entry of {includer}, which includes it)"
    best = max(entries, key=lambda e: _shared_depth(target, Path(e["file"])), default=None)
    if best is None:
        return None
    return best, f"compile_commands.json (nearest entry, {Path(best['file']).name})"


def _shared_depth(a: Path, b: Path) -> int:
    depth = 0
    for x, y in zip(a.parts, b.parts, strict=False):
        if x != y:
            break
        depth += 1
    return depth


def _parse(arguments: list[str], directory: Path, source: str) -> ProjectFlags:
    """The understood flags of one compile command (the compiler and the file are skipped)."""
    includes: list[str] = []
    defines: list[str] = []
    std: str | None = None
    archs: list[str] = []
    relaxed = False
    extended = False
    relocatable = False
    ignored: list[str] = []
    args = list(arguments)
    if args and not args[0].startswith("-"):
        args = args[1:]  # the compiler
    i = 0
    while i < len(args):
        arg = args[i]
        flag, value = _split(arg)
        if flag in _TAKES_VALUE and value is None:
            value = args[i + 1] if i + 1 < len(args) else ""
            i += 1
        i += 1
        if flag in ("-I", "-isystem", "--include-path") and value:
            includes.append(os.path.normpath(directory / value))
        elif flag in ("-D", "--define-macro") and value:
            defines.append(value)
        elif flag in ("-U", "--undefine-macro") and value:
            defines = [d for d in defines if d.split("=", 1)[0] != value]
        elif flag in ("-std", "--std") and value:
            dialect = value.lower().replace("gnu++", "c++")
            dialect = _STD_ALIASES.get(dialect, dialect)
            if dialect in STDS:
                std = dialect
            else:
                ignored.append(arg)
        elif flag in ("-arch", "--gpu-architecture", "-gencode", "--generate-code") and value:
            archs += _ARCH.findall(value)
        elif flag in ("--expt-relaxed-constexpr", "-expt-relaxed-constexpr"):
            relaxed = True
        elif flag in ("--expt-extended-lambda", "-expt-extended-lambda", "--extended-lambda",
                      "-extended-lambda"):  # fmt: skip
            extended = True
        elif flag in ("-rdc", "--relocatable-device-code") and value in ("true", "false"):
            relocatable = value == "true"
        elif flag in ("-dc", "--device-c"):
            relocatable = True
        elif flag.startswith("-"):
            ignored.append(arg if value is None or arg != flag else f"{arg} {value}")
        # else: a source file, an object: not a flag
    return ProjectFlags(
        source=source,
        include_paths=tuple(dict.fromkeys(includes)),
        defines=tuple(dict.fromkeys(defines)),
        std=std,
        arch=_newest(archs),
        relaxed_constexpr=relaxed,
        extended_lambda=extended,
        relocatable=relocatable,
        ignored=tuple(ignored),
    )


def _split(arg: str) -> tuple[str, str | None]:
    """`-Ifoo` -> ("-I", "foo"); `--std=c++17` -> ("--std", "c++17"); `-O3` -> ("-O3", None)."""
    if "=" in arg and arg.startswith("--"):
        flag, value = arg.split("=", 1)
        return flag, value
    for short in ("-isystem", "-I", "-D", "-U"):
        if arg.startswith(short) and len(arg) > len(short):
            return short, arg[len(short) :]
    if arg.startswith(("-std=", "-arch=", "-rdc=")):
        flag, value = arg.split("=", 1)
        return flag, value
    return arg, None


def _newest(archs: list[str]) -> str | None:
    """The newest architecture named (`90a` > `90` > `80`), as `sm_XY`."""
    if not archs:
        return None

    def rank(a: str) -> tuple[int, str]:
        digits = re.match(r"\d+", a)
        return (int(digits.group(0)) if digits else 0, a)

    return f"sm_{max(archs, key=rank)}"
