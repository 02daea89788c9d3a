"""What surrounds the kernels in a file, read from the tree-sitter-cuda tree: `#include`s,
`#define`s, `__device__` functions and the `<<<...>>>` launch sites.

The FSR prompts show these to the model (a drop-in replacement must use the file's macros and
helpers and is launched as the host launches it), and a candidate is cleaned of helpers the file
already defines. Comments and strings never count: the tree knows them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from tree_sitter import Node, Tree

from cuda_llm_lsp.source.kernels import parse_tree

_DEFINES = ("preproc_def", "preproc_function_def")
_NAME_NODES = ("identifier", "template_function", "qualified_identifier")


@dataclass(frozen=True)
class LaunchSite:
    kernel: str  # the launched name without scope or template arguments: "k" for "ns::k<float>"
    line: int  # 0-based line of the `<<<`


@dataclass(frozen=True)
class FileOutline:
    """The file-level context of a CUDA file, in source order."""

    includes: tuple[str, ...]  # each `#include` directive, as written
    defines: tuple[str, ...]  # each `#define`, continuation lines included
    device_functions: tuple[tuple[int, int], ...]  # [start, end) of `__device__` definitions
    launches: tuple[LaunchSite, ...]

    def launch_lines(self, kernel: str) -> tuple[int, ...]:
        """The lines that launch `kernel`, each once."""
        return tuple(dict.fromkeys(s.line for s in self.launches if s.kernel == kernel))


def outline(text: str, parsed: tuple[Tree, bytes] | None = None) -> FileOutline:
    """The includes, defines, `__device__` functions and launch sites of `text`.

    `parsed`: `parse_tree(text)` when the caller already has it. Offsets index `text` (str),
    not the UTF-8 bytes tree-sitter works in.
    """
    tree, data = parsed or parse_tree(text)
    offsets = _Offsets(text, data)
    includes: list[str] = []
    defines: list[str] = []
    functions: list[tuple[int, int]] = []
    launches: list[LaunchSite] = []
    for node in walk_nodes(tree.root_node):
        kind = node.type
        if kind == "preproc_include":
            includes.append(_text(node, data).strip())
        elif kind in _DEFINES:
            defines.append(_text(node, data).strip())
        elif kind == "function_definition" and _is_device_function(node):
            parent = node.parent
            whole = parent if parent and parent.type == "template_declaration" else node
            start = _line_start(text, offsets.at(whole.start_byte))
            functions.append((start, offsets.at(whole.end_byte)))
        elif (callee := launch_callee(node)) is not None:
            launches.append(LaunchSite(base_name(_text(callee, data)), node.start_point[0]))
    return FileOutline(tuple(includes), tuple(defines), tuple(functions), tuple(launches))


def device_function_spans(text: str) -> list[tuple[int, int]]:
    """[start, end) offsets of the `__device__` function definitions in `text`, each from the
    start of its line (a `template <...>` line above included)."""
    return list(outline(text).device_functions)


def launch_callee(node: Node) -> Node | None:
    """For a `<<<...>>>` node of a call, the launched name (`k`, `k<float>`, `ns::k`), else
    None (also for a launch through an expression such as `(*fp)<<<...>>>`)."""
    if node.type != "kernel_call_syntax" or not node.parent:
        return None
    if node.parent.type != "call_expression":
        return None
    callee = node.parent.child_by_field_name("function")
    return callee if callee is not None and callee.type in _NAME_NODES else None


def walk_nodes(node: Node) -> Iterator[Node]:
    """Every node in source order, without recursion (deep trees stay cheap)."""
    cursor = node.walk()
    while True:
        assert cursor.node is not None
        yield cursor.node
        if cursor.goto_first_child():
            continue
        while not cursor.goto_next_sibling():
            if not cursor.goto_parent():
                return


def _is_device_function(node: Node) -> bool:
    kinds = {child.type for child in node.children}
    return "__device__" in kinds and "__global__" not in kinds


def _text(node: Node, data: bytes) -> str:
    return data[node.start_byte : node.end_byte].decode("utf-8", errors="replace")


def base_name(callee: str) -> str:
    """The launched kernel's name without scope or template arguments."""
    return callee.split("<", 1)[0].rsplit("::", 1)[-1].strip()


def _line_start(text: str, offset: int) -> int:
    """`offset`, moved back over the blanks before it to the start of its line, if only blanks."""
    start = text.rfind("\n", 0, offset) + 1
    return start if not text[start:offset].strip() else offset


class _Offsets:
    """Byte offsets into the UTF-8 data as offsets into the text (the same for ASCII)."""

    def __init__(self, text: str, data: bytes) -> None:
        self._data = data
        self._ascii = len(text) == len(data)

    def at(self, byte: int) -> int:
        if self._ascii:
            return byte
        return len(self._data[:byte].decode("utf-8", errors="surrogatepass"))
