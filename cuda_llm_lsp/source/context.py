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

from cuda_llm_lsp.source.kernels import Offsets, node_text, parse_tree

_DEFINES = ("preproc_def", "preproc_function_def")
_NAME_NODES = ("identifier", "template_function", "qualified_identifier")
_HEADER_NAMES = ("string_literal", "system_lib_string")  # "a.h", <a.h>: not a macro's name


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
    # the header name of each `#include` the preprocessor can reach ("a.h", "cstdio"): not one
    # in a comment, a string or an `#if 0` group
    header_names: tuple[str, ...] = ()

    def launch_lines(self, kernel: str) -> tuple[int, ...]:
        """The lines that launch `kernel`, each once."""
        return tuple(dict.fromkeys(s.line for s in self.launches if s.kernel == kernel))


def outline(text: str, parsed: tuple[Tree, bytes] | None = None) -> FileOutline:
    """The includes, defines, `__device__` functions and launch sites of `text`.

    `parsed`: `parse_tree(text)` when the caller already has it. Offsets index `text` (str),
    not the UTF-8 bytes tree-sitter works in.
    """
    tree, data = parsed or parse_tree(text)
    offsets = Offsets(text, data)
    includes: list[str] = []
    headers: list[str] = []
    defines: list[str] = []
    functions: list[tuple[int, int]] = []
    launches: list[LaunchSite] = []
    for node in walk_nodes(tree.root_node):
        kind = node.type
        if kind == "preproc_include":
            includes.append(node_text(node, data).strip())
            path = node.child_by_field_name("path")
            if path is not None and path.type in _HEADER_NAMES and not _disabled(node):
                headers.append(node_text(path, data)[1:-1].strip())
        elif kind in _DEFINES:
            defines.append(node_text(node, data).strip())
        elif kind == "function_definition" and _is_device_function(node):
            parent = node.parent
            whole = parent if parent and parent.type == "template_declaration" else node
            start = _line_start(text, offsets.offset(whole.start_byte))
            functions.append((start, offsets.offset(whole.end_byte)))
        elif (callee := launch_callee(node)) is not None:
            launches.append(LaunchSite(base_name(node_text(callee, data)), node.start_point[0]))
    return FileOutline(
        tuple(includes), tuple(defines), tuple(functions), tuple(launches), tuple(headers)
    )


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


def _disabled(node: Node) -> bool:
    """`node` is in the first group of an `#if 0` (or `#elif 0`): never preprocessed."""
    child, parent = node, node.parent
    while parent is not None:
        if parent.type in ("preproc_if", "preproc_elif"):
            condition = parent.child_by_field_name("condition")
            alternative = parent.child_by_field_name("alternative")
            if (
                condition is not None
                and condition.type == "number_literal"
                and condition.text is not None
                and condition.text.strip().rstrip(b"uUlL") in (b"0", b"00", b"0x0", b"0X0")
                and (alternative is None or child.start_byte < alternative.start_byte)
            ):
                return True
        child, parent = parent, parent.parent
    return False


def _is_device_function(node: Node) -> bool:
    kinds = {child.type for child in node.children}
    return "__device__" in kinds and "__global__" not in kinds


def base_name(callee: str) -> str:
    """The launched kernel's name without scope or template arguments."""
    return callee.split("<", 1)[0].rsplit("::", 1)[-1].strip()


def _line_start(text: str, offset: int) -> int:
    """`offset`, moved back over the blanks before it to the start of its line, if only blanks."""
    start = text.rfind("\n", 0, offset) + 1
    return start if not text[start:offset].strip() else offset
