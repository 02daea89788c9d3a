"""Proof on the built program that an edit added no host code (docs/design.md, "What an accepted
winner may write").

The source check (`source.device_only`) reads a reply as tree-sitter sees it; the compiler may
see more (a macro, an attribute spelt another way, `asm`). So before a winner is written, the
original and the edited whole files are each built to a host object with `nvcc -c` and compared:
the defined host symbols (`nm`), the host symbols it uses from elsewhere (a new one, say
`system`, is a call the original did not make), and the start-up / shut-down tables
(`.init_array`, `.ctors`, `.preinit_array`, `.fini_array`, `.dtors`, each with every section of
its prefix such as `.init_array.00101`, and the functions that fill them). A legitimate change
to a kernel or its helpers adds only what nvcc generates for device code (launch stubs
`__device_stub__*`, `__nv_*` / `__cuda*` registration, fatbinary data), host symbols named
after the device-side functions and variables the edited file defines (a `__host__ __device__`
function's host copy, a `__constant__` variable's host shadow, a `constexpr`), and data local
to the object (a toolkit header's constants: nothing runs by them, nothing links to them); any
other new code or global symbol, or a bigger start-up table, is host code from the reply.
Nothing is linked or run; `nm` and `readelf` come with binutils (g++'s dependency), each under
a timeout.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cuda_llm_lsp.compile.child_env import child_env
from cuda_llm_lsp.compile.mangled import before_parameters, demangle
from cuda_llm_lsp.compile.nvcc import DEFAULT_TIMEOUT_S, NvccResult, compile_file
from cuda_llm_lsp.compile.tools import find_tool, run_tool

TOOL_TIMEOUT_S = 30.0
#: Sections whose entries run before `main` or at exit.
START_UP_SECTIONS = (".init_array", ".preinit_array", ".ctors", ".fini_array", ".dtors")
#: nvcc's own host symbols for device code: launch stubs, registration, the fatbinary.
NVCC_GENERATED = re.compile(
    r"__device_stub|__nv_|__cuda|__sti__|fatbin|__fatDeviceText|__module_id|__internal_cast"
    r"|^DW\.ref\.__gxx_personality"
)
#: Functions g++ emits for dynamic initialisation (a constructor run at start-up).
_INITIALISERS = re.compile(r"^_GLOBAL__(?:sub_)?[ID]_|__static_initialization_and_destruction")


class HostToolsUnavailable(RuntimeError):
    """`nm` or `readelf` (binutils) is not installed."""


@dataclass(frozen=True)
class Symbol:
    name: str  # mangled
    demangled: str
    kind: str  # nm's letter: T, t, B, b, D, d, R, r, W, V...
    size: int


@dataclass(frozen=True)
class HostObject:
    """What of a built object can run or be reached on the host."""

    symbols: dict[str, Symbol] = field(default_factory=dict)  # by mangled name
    # start-up / exit table -> size in bytes, every section of its prefix counted
    # (`.init_array.00101`, a prioritised entry, is `.init_array`'s)
    start_up: dict[str, int] = field(default_factory=dict)
    undefined: frozenset[str] = frozenset()  # the host symbols it uses from elsewhere (mangled)


@dataclass(frozen=True)
class Built:
    """A whole file built to a host object, or nvcc's result when it did not build."""

    host: HostObject | None
    result: NvccResult


def tools_available() -> bool:
    return find_tool("nm") is not None and find_tool("readelf") is not None


def build_host_object(
    text: str,
    path: Path | None,
    *,
    include_paths: Sequence[str] = (),
    timeout: float = DEFAULT_TIMEOUT_S,
    arch: str | None = None,
    defines: Sequence[str] = (),
    std: str | None = None,
    extra_flags: Sequence[str] = (),
) -> Built:
    """`text` compiled with `nvcc -c` and the file's flags (`compile.nvcc_tier.nvcc_flags`: the
    project's and the settings' defines, include paths, standard, architecture) and its object
    read. Raises `NvccUnavailable`, `HostToolsUnavailable`."""
    if not tools_available():
        raise HostToolsUnavailable("nm / readelf not found (install binutils)")
    with tempfile.TemporaryDirectory(prefix="cuda-llm-host-") as tmp:
        obj = Path(tmp) / "host.o"
        result = compile_file(
            text,
            path,
            include_paths=include_paths,
            timeout=timeout,
            object_path=obj,
            arch=arch,
            defines=defines,
            std=std,
            extra_flags=extra_flags,
        )
        if not result.ok or not obj.is_file():
            return Built(None, result)
        return Built(read_host_object(obj), result)


def read_host_object(obj: Path) -> HostObject:
    """The defined and undefined symbols and start-up section sizes of an object file."""
    listing = _run(["nm", "-S", str(obj)])
    rows: list[tuple[str, str, int]] = []
    undefined: set[str] = set()
    for line in listing.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] in ("U", "w", "v"):
            undefined.add(parts[1])
            continue
        if len(parts) == 4:
            _, size, kind, name = parts
        elif len(parts) == 3:
            size, kind, name = "0", parts[1], parts[2]
        else:
            continue
        rows.append((name, kind, int(size, 16)))
    demangled = demangle([name for name, _, _ in rows])
    symbols = {
        name: Symbol(name, plain, kind, size)
        for (name, kind, size), plain in zip(rows, demangled, strict=True)
    }
    sections: dict[str, int] = {}
    for line in _run(["readelf", "-SW", str(obj)]).splitlines():
        match = re.search(r"\]\s+(\S+)\s+\S+\s+[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)", line)
        table = start_up_table(match.group(1)) if match else None
        if match and table is not None:
            sections[table] = sections.get(table, 0) + int(match.group(2), 16)
    return HostObject(symbols, sections, frozenset(undefined))


def start_up_table(section: str) -> str | None:
    """The start-up or exit table a section adds to (`.init_array.00101` -> `.init_array`,
    `.ctors.65435` -> `.ctors`), or None: the linker gathers every section of the prefix."""
    for table in START_UP_SECTIONS:
        if section == table or section.startswith(table + "."):
            return table
    return None


def new_host_code(
    original: HostObject,
    edited: HostObject,
    device_names: frozenset[str],
    type_names: frozenset[str] = frozenset(),
) -> list[str]:
    """What the edited object has on the host that the original has not and a device-side
    change cannot explain: each a sentence. `device_names`: the functions and variables the
    edited file defines device-side (their host copies and shadows are expected);
    `type_names`: the types it defines (a member of one is never a device-side name)."""
    found: list[str] = []
    for section in START_UP_SECTIONS:
        before, after = original.start_up.get(section, 0), edited.start_up.get(section, 0)
        if after > before:
            found.append(
                f"it adds {(after - before) // 8 or 1} entry(ies) to `{section}` "
                "(code run at program start or exit)"
            )
    for name, symbol in sorted(edited.symbols.items()):
        old = original.symbols.get(name)
        if _INITIALISERS.search(name):
            if old is None or symbol.size > old.size:
                found.append(
                    f"it adds a dynamic initialiser (`{symbol.demangled}`): host code "
                    "run before `main`"
                )
            continue
        if old is not None or NVCC_GENERATED.search(name):
            continue
        if symbol.kind in _LOCAL_DATA:
            continue  # a header's or a constant's own data: nothing runs or interposes by it
        *scopes, name_only = _scoped_name(symbol.demangled)
        if name_only in device_names and not set(scopes) & type_names:
            continue
        what = _KINDS.get(symbol.kind.upper(), "a symbol")
        found.append(f"it defines the host symbol `{symbol.demangled}` ({what})")
    # a name the original took from elsewhere (libc's `optind`, `stderr`) now defined in the
    # object, local data included: the file's host code would read or call the edit's copy
    # (an `asm` label on a `__device__` variable names its host shadow so)
    taken = sorted(
        name
        for name in original.undefined
        if name in edited.symbols
        and not NVCC_GENERATED.search(name)
        and _scoped_name(edited.symbols[name].demangled)[-1] not in device_names
    )
    for plain in demangle(taken) if taken else []:
        found.append(
            f"it defines `{plain}`, which the original uses from elsewhere (the file's host code "
            "would use the edit's copy)"
        )
    used = sorted(
        name
        for name in edited.undefined - original.undefined
        if not NVCC_GENERATED.search(name) and name not in NVCC_USES
    )
    for plain in demangle(used) if used else []:
        found.append(f"it calls or uses the host symbol `{plain}`, which the original does not")
    return found


#: What nvcc's own host code (launch stubs, registration, device functions' host stand-ins)
#: uses from the C / C++ runtime: new in an object once it has such code.
NVCC_USES = frozenset(
    {
        "exit", "atexit", "__cxa_atexit", "__cxa_guard_acquire", "__cxa_guard_release",
        "__cxa_guard_abort", "_Unwind_Resume", "__gxx_personality_v0", "__dso_handle",
        "_GLOBAL_OFFSET_TABLE_", "__stack_chk_fail",
    }
)  # fmt: skip


#: nm's letters for data only this object sees (code is T/t/W/w/i; global data upper case).
_LOCAL_DATA = frozenset("bdrgsvn")
_KINDS = {"T": "code", "W": "code", "D": "data", "B": "data", "R": "read-only data",
          "V": "data", "U": "undefined"}  # fmt: skip


def _scoped_name(demangled: str) -> tuple[str, ...]:
    """`ns::hh(float)` -> (`ns`, `hh`); `void kt<float>(float*)` -> (`kt`,); `guard variable for
    t` -> (`t`,): the name's scopes and the name, without template arguments or parameters."""
    text = re.sub(
        r"^(?:guard variable for|vtable for|typeinfo for|typeinfo name for) ", "", demangled
    ).replace("(anonymous namespace)", "{anonymous}")
    text = before_parameters(text)
    while "<" in text:
        stripped = re.sub(r"<[^<>]*>", "", text)
        if stripped == text:
            break
        text = stripped
    words = text.split()
    return tuple((words[-1] if words else text).split("::"))


def _run(command: list[str], stdin: str | None = None) -> str:
    try:
        program = find_tool(command[0])  # by absolute path, never the workspace's
        if program is None:
            raise OSError(f"{command[0]} not found")
        done = run_tool(
            [program, *command[1:]], input=stdin, timeout=TOOL_TIMEOUT_S, env=child_env()
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise HostToolsUnavailable(f"{command[0]} failed: {exc}") from exc
    if done.returncode != 0:
        raise HostToolsUnavailable(f"{command[0]} failed: {done.stderr.strip()[:200]}")
    return done.stdout
