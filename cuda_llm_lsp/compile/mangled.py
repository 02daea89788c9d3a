"""Kernel symbols as ptxas names them (Itanium-mangled), read back into source names.

nvcc's resource report (`ptxas -v`) names each entry function by its mangled symbol. To put a
figure on the kernel it belongs to, `base_name` reads the qualified function name out of the
symbol (`_ZN2ns6reduceIfLi256EEvPT_` -> `ns::reduce`): kernels cannot be class members, so the
name is a chain of namespaces and the function's own identifier, which is all this reads.
`display_names` turns whole symbols into what a person reads (`reduce<float, 256>`) with the
toolchain's demangler (`cu++filt`, else binutils' `c++filt`), and falls back to the symbol.
"""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Sequence
from pathlib import Path

from cuda_llm_lsp.compile.child_env import child_env
from cuda_llm_lsp.compile.tools import find_tool, run_tool, usable_program
from cuda_llm_lsp.source.brackets import outside_angles

log = logging.getLogger(__name__)

#: The anonymous namespace's component, not written in the source.
_ANONYMOUS = "_GLOBAL__N_1"


def base_name(symbol: str) -> str | None:
    """The qualified name of the function `symbol` mangles ("ns::k"); the symbol itself when it
    is not mangled (`extern "C"`); None when it cannot be read."""
    if not symbol.startswith("_Z"):
        return symbol if symbol.isidentifier() else None
    reader = _Reader(symbol, 2)
    reader.skip("L")  # internal linkage
    parts: list[str] = []
    if reader.skip("N"):
        while reader.peek() in ("r", "V", "K"):  # cv-qualifiers of a nested name
            reader.pos += 1
        while not reader.at_end() and reader.peek() not in ("E", "I"):
            if reader.skip("St"):
                parts.append("std")
                continue
            name = reader.source_name()
            if name is None:
                return None
            parts.append(name)
    else:
        if reader.skip("St"):
            parts.append("std")
        name = reader.source_name()
        if name is None:
            return None
        parts.append(name)
    shown = [p for p in parts if p != _ANONYMOUS]
    return "::".join(shown) if shown else None


class _Reader:
    def __init__(self, text: str, pos: int) -> None:
        self.text, self.pos = text, pos

    def at_end(self) -> bool:
        return self.pos >= len(self.text)

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def skip(self, token: str) -> bool:
        if self.text.startswith(token, self.pos):
            self.pos += len(token)
            return True
        return False

    def source_name(self) -> str | None:
        start = self.pos
        while self.peek().isdigit():
            self.pos += 1
        if self.pos == start:
            return None
        length = int(self.text[start : self.pos])
        name = self.text[self.pos : self.pos + length]
        if len(name) != length:
            return None
        self.pos += length
        return name


def display_names(symbols: Sequence[str], nvcc: Path | None = None) -> dict[str, str]:
    """Each symbol as a person reads it: `reduce<float, 256>`, without the return type and the
    parameter list (the symbol itself where no demangler is found or it cannot read it)."""
    shown = dict(zip(symbols, demangle(symbols, nvcc), strict=True))
    return {s: _without_signature(text) if text != s else s for s, text in shown.items()}


def demangle(symbols: Sequence[str], nvcc: Path | None = None) -> list[str]:
    """Each symbol demangled whole (`void k<float>(float*)`), in order; a symbol the demangler
    cannot read, or every symbol where there is no demangler, stays as it is."""
    names = list(symbols)
    mangled = [s for s in names if s.startswith("_Z")]
    tool = _demangler(nvcc)
    if not mangled or tool is None:
        return names
    try:
        done = run_tool([tool], input="\n".join(mangled) + "\n", timeout=30, env=child_env())
    except (OSError, subprocess.SubprocessError) as exc:
        log.debug("demangling failed: %s", exc)
        return names
    lines = done.stdout.splitlines()
    if done.returncode != 0 or len(lines) != len(mangled):
        return names
    read = dict(zip(mangled, lines, strict=True))
    return [read.get(s, s) for s in names]


def _demangler(nvcc: Path | None) -> str | None:
    if nvcc is not None and usable_program(nvcc.parent / "cu++filt"):
        return str(nvcc.parent / "cu++filt")
    return find_tool("cu++filt") or find_tool("c++filt")  # never the workspace's


def _without_signature(text: str) -> str:
    """`void ns::k<float, 256>(float*, int)` -> `ns::k<float, 256>`."""
    name = before_parameters(text.replace("(anonymous namespace)::", ""))
    depth = 0
    for i in range(len(name) - 1, -1, -1):  # the return type ends at the last outer space
        char = name[i]
        if char == ">":
            depth += 1
        elif char == "<":
            depth -= 1
        elif char == " " and depth == 0:
            return name[i + 1 :]
    return name


def before_parameters(demangled: str) -> str:
    """A demangled function's text up to its parameter list (template arguments kept)."""
    end = outside_angles(demangled, "(")
    return demangled if end < 0 else demangled[:end]
