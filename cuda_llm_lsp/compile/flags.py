"""Which compiler options reach NVRTC, wherever they come from (settings, CLI, specs, projects).

NVRTC takes options that read or write files: `--create-pch=PATH`, `--time=PATH` and
`--fdevice-time-trace=PATH` made it replace files in the user's home from a workspace's
`cudaLlm.nvrtcFlags`, on file open; `--pre-include`, `--use-pch` and `--pch-dir` read any file.
So options are allow-listed, not deny-listed: `check_flag` accepts only the optimisation,
language and diagnostic options below, each value checked; anything else (a new NVRTC option
included) is refused with a message. `-I` names a directory: `include_dir_problem` decides
(never under /proc, /sys, /dev; outside the workspace and the toolkit only when the workspace is
trusted). `-D`/`-U` take a macro name (and a value).

`nvrtc.build_flags` applies `check_flag` again to every option it passes, so a path that skipped
the settings check (a spec's defines, a caller's options) still cannot pass a refused one.
Issue [realworld]'s project configuration (compile_commands.json, compile_flags.txt) maps its
flags through here.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from cuda_llm_lsp.compile import headers as std_headers
from cuda_llm_lsp.compile import include_reads, tools

_BOOL = r"true|false"
_ARCH = r"(?:sm|compute|lto)_\d{2,3}[af]?"
_IDENT = r"[A-Za-z_]\w*"
_DIAG = r"[\w-]+(?:,[\w-]+)*"
#: nvcc options (from a build or the settings) NVRTC 13 no longer takes ("unrecognized
#: option": every compile failed): each spelling -> the one the nvcc tier passes on. The fast
#: tier has no need of them: `-default-device` already lets device code call constexpr
#: functions, and extended lambdas are host code.
NVCC_ONLY: dict[str, str] = {
    "--expt-relaxed-constexpr": "--expt-relaxed-constexpr",
    "-expt-relaxed-constexpr": "--expt-relaxed-constexpr",
    "--expt-extended-lambda": "--extended-lambda",
    "-expt-extended-lambda": "--extended-lambda",
    "--extended-lambda": "--extended-lambda",
    "-extended-lambda": "--extended-lambda",
}
#: NVRTC options nvcc also takes, with the same meaning: the code the build generates (device
#: code relocatable for device-side launches, a register limit, fast math, debug info). The nvcc
#: tier passes them on in nvcc's spelling: without the build's `-rdc=true`, nvcc rejected every
#: device-side launch ("requires separate compilation mode") that the build compiles.
_SHARED_WITH_NVCC: dict[str, str] = {
    "-rdc": "-rdc", "--relocatable-device-code": "-rdc",
    "-dc": "-rdc=true", "--device-c": "-rdc=true",
    "-maxrregcount": "-maxrregcount", "--maxrregcount": "-maxrregcount",
    "--use_fast_math": "--use_fast_math", "-use_fast_math": "--use_fast_math",
    "--use-fast-math": "--use_fast_math",
    "-ftz": "-ftz", "--ftz": "-ftz", "-prec-div": "-prec-div", "--prec-div": "-prec-div",
    "-prec-sqrt": "-prec-sqrt", "--prec-sqrt": "-prec-sqrt", "-fmad": "-fmad", "--fmad": "-fmad",
    "-G": "-G", "--device-debug": "-G", "-lineinfo": "-lineinfo",
    "--generate-line-info": "-lineinfo",
}  # fmt: skip


def nvcc_spellings(nvrtc_flags: Iterable[str]) -> tuple[str, ...]:
    """What of `nvrtc_flags` (checked ones: `check_flag`) nvcc is given too, in its spelling:
    the `NVCC_ONLY` dialect flags and the code-generation ones both compilers take."""
    out: list[str] = []
    for flag in nvrtc_flags:
        if flag in NVCC_ONLY:
            out.append(NVCC_ONLY[flag])
            continue
        name, equals, value = flag.partition("=")
        spelled = _SHARED_WITH_NVCC.get(name)
        if spelled is None or check_flag(flag) is not None:
            continue
        out.append(f"{spelled}={value}" if equals and "=" not in spelled else spelled)
    return tuple(dict.fromkeys(out))


#: Options taking no value, under every spelling NVRTC accepts.
SWITCHES = std_headers.names(
    """
    --use_fast_math -use_fast_math --use-fast-math
    --device-debug -G --generate-line-info -lineinfo
    --extra-device-vectorization -extra-device-vectorization
    --device-as-default-execution-space -default-device
    --device-c -dc --device-w -dw -rdc --extensible-whole-program -ewp
    --expt-relaxed-constexpr -expt-relaxed-constexpr
    --expt-extended-lambda -expt-extended-lambda --extended-lambda -extended-lambda
    --disable-warnings -w --restrict -restrict --device-int128 -device-int128
    --display-error-number -err-no --no-display-error-number -no-err-no
    --no-source-include -no-source-include --fdevice-syntax-only -fdevice-syntax-only
    --minimal -minimal --Wreorder -Wreorder
    --Wno-deprecated-declarations -Wno-deprecated-declarations
    --Wno-deprecated-gpu-targets -Wno-deprecated-gpu-targets
    """
)
#: Options taking a value (`--name=value`): the name's spellings -> the value's pattern.
_VALUED: dict[tuple[str, ...], str] = {
    ("--gpu-architecture", "-arch"): _ARCH,
    ("--std", "-std"): r"c\+\+(?:03|11|14|17|20)",
    ("--maxrregcount", "-maxrregcount"): r"\d{1,3}",
    ("--ftz", "-ftz", "--prec-div", "-prec-div", "--prec-sqrt", "-prec-sqrt", "--fmad",
     "-fmad", "--relocatable-device-code", "-rdc", "--modify-stack-limit",
     "-modify-stack-limit", "--device-stack-protector", "-device-stack-protector",
     "--builtin-move-forward", "-builtin-move-forward", "--builtin-initializer-list",
     "-builtin-initializer-list", "--brief-diagnostics", "-brief-diagnostics"): _BOOL,
    ("--dopt", "-dopt"): r"on|off",
    ("--Ofast-compile", "-Ofc"): r"0|min|mid|max",
    ("--optimization-info", "-opt-info"): r"inline",
    ("--split-compile", "-split-compile"): r"\d{1,3}",
    ("--jump-table-density", "-jump-table-density"): r"\d{1,3}",
    ("--diag-error", "-diag-error", "--diag-suppress", "-diag-suppress", "--diag-warn",
     "-diag-warn", "--diag_suppress", "-diag_suppress"): _DIAG,
    ("--Werror", "-Werror"): r"all-warnings|reorder|deprecated-declarations",
    ("--ptxas-options", "-Xptxas"): (
        r"-v|--verbose|-O[0-3]|--warn-on-spills|-warn-spills|--warn-on-local-memory-usage"
        r"|-warn-lmem-usage|--allow-expensive-optimizations(?:=(?:true|false))?"
    ),
}  # fmt: skip
VALUED: dict[str, re.Pattern[str]] = {
    name: re.compile(f"(?:{pattern})") for names, pattern in _VALUED.items() for name in names
}
_DEFINE = re.compile(rf"{_IDENT}(?:\((?:\s*{_IDENT}\s*(?:,\s*{_IDENT}\s*)*)?\))?(?:=.*)?", re.S)
_NAME = re.compile(_IDENT)
_DEFINE_PREFIXES = ("--define-macro=", "-D")
_UNDEFINE_PREFIXES = ("--undefine-macro=", "-U")
_INCLUDE_PREFIXES = ("--include-path=", "-I")

#: Decides an `-I` directory: None when it may be used, else why not.
IncludeDirRule = Callable[[str], "str | None"]


@dataclass(frozen=True)
class Trust:
    """Where settings may point: anywhere (trusted), or inside `roots` and the toolkit."""

    trusted: bool = True
    roots: tuple[str, ...] = ()  # the workspace folders

    def include_dir_problem(self, directory: str) -> str | None:
        return include_dir_problem(directory, self)


_workspace = Trust()  # `set_workspace`: the server's; the CLI's user is trusted


def set_workspace(trust: Trust) -> bool:
    """What the server's client says of its workspace, for every read and child from now on:
    no program runs from a workspace folder (`tools`); untrusted, headers and project include
    directories are read only inside the folders, the toolkit and the system's (`include_reads`,
    `workspace_include_dirs`); the project configuration is looked for up to a folder's root.
    True when what may be read changed (open files are to be analysed again)."""
    global _workspace
    moved = trust != _workspace
    _workspace = trust
    tools.set_workspace_roots(trust.roots)
    if trust.trusted:
        include_reads.limit_reads(None)
    else:
        include_reads.limit_reads(
            (
                *trust.roots,
                *std_headers.toolkit_include_dirs(),
                str(std_headers.STUB_DIR),
                *std_headers.host_include_dirs(),
            ),
            trust.roots,
        )
    return moved


def workspace_trust() -> Trust:
    return _workspace


def workspace_include_dirs(directories: Iterable[str]) -> tuple[tuple[str, ...], list[str]]:
    """A project's include directories that the workspace's trust allows, and why each other
    one is left out."""
    kept: list[str] = []
    refused: list[str] = []
    for directory in directories:
        problem = include_dir_problem(directory, _workspace)
        if problem is None:
            kept.append(directory)
        else:
            refused.append(f"-I {directory!r} left out: {problem}")
    return tuple(kept), refused


def define_problem(define: str) -> str | None:
    """Why `NAME` / `NAME=VALUE` / `NAME(a,b)=VALUE` is not a define, or None."""
    if "\0" in define or "\n" in define or "\r" in define:
        return "a define is one line"
    if _DEFINE.fullmatch(define.strip()) is None:
        return "expected NAME or NAME=VALUE, NAME a C identifier"
    return None


def include_dir_problem(directory: str, trust: Trust | None = None) -> str | None:
    """Why `directory` may not be an include path, or None.

    Never a special file system; for an untrusted workspace, only a directory inside one of
    its folders, the toolkit's or our stand-ins (symlinks resolved).
    """
    if not directory or "\0" in directory:
        return "an empty or malformed path"
    root = include_reads.special_root(directory)
    if root is not None:
        return f"{root} is never read (a special file system)"
    if trust is None or trust.trusted:
        return None
    real = os.path.realpath(directory)
    allowed = (*trust.roots, *std_headers.toolkit_include_dirs(), str(std_headers.STUB_DIR))
    for base in allowed:
        inside = os.path.realpath(base)
        if real == inside or real.startswith(inside.rstrip("/") + "/"):
            return None
    return (
        "outside the workspace folders and the CUDA toolkit, and the workspace is not trusted "
        "(trust it to use this path)"
    )


def check_flag(flag: str, include_dir: IncludeDirRule | None = None) -> str | None:
    """Why NVRTC may not be given `flag`, or None when it is on the allow-list."""
    if "\0" in flag or "\n" in flag:
        return "an option is one line"
    if flag in SWITCHES:
        return None
    for prefix in _DEFINE_PREFIXES:
        if flag.startswith(prefix) and len(flag) > len(prefix):
            return define_problem(flag[len(prefix) :])
    for prefix in _UNDEFINE_PREFIXES:
        if flag.startswith(prefix) and len(flag) > len(prefix):
            name = flag[len(prefix) :]
            return None if _NAME.fullmatch(name) else "expected -UNAME, NAME a C identifier"
    for prefix in _INCLUDE_PREFIXES:
        if flag.startswith(prefix) and len(flag) > len(prefix):
            rule = include_dir or include_dir_problem
            return rule(flag[len(prefix) :])
    name, equals, value = flag.partition("=")
    pattern = VALUED.get(name)
    if pattern is not None and equals:
        if pattern.fullmatch(value):
            return None
        return f"{value!r} is not a value {name} takes here"
    if pattern is not None:
        return f"{name} needs a value ({name}=VALUE)"
    return (
        "not on the list of options cuda-llm passes to NVRTC (options that read or write "
        "files, such as --create-pch, --time or --pre-include, are never passed)"
    )


def allowed_flags(
    flags: Iterable[str], include_dir: IncludeDirRule | None = None
) -> tuple[tuple[str, ...], list[str]]:
    """The flags on the allow-list, and a message for each one left out."""
    kept: list[str] = []
    refused: list[str] = []
    for flag in flags:
        problem = check_flag(flag, include_dir)
        if problem is None:
            kept.append(flag)
        else:
            refused.append(f"{_shown(flag)}: {problem}")
    return tuple(kept), refused


def _shown(flag: str) -> str:
    return repr(flag) if len(flag) <= 160 else repr(flag[:157] + "...")
