"""Questions about tree-sitter nodes and raw bytes that the walker asks: no state, no verdicts.

Kept apart from the walker so that the walker reads as its decisions."""

from __future__ import annotations

import re

import tree_sitter

_NOT_RTC = re.compile(
    r"#\s*(?:if\s*!\s*defined\s*(?:\(\s*__CUDACC_RTC__\s*\)|\s__CUDACC_RTC__)"
    r"|ifndef\s+__CUDACC_RTC__)"
)
CLASS_TYPES = ("struct_specifier", "class_specifier", "union_specifier")


def defines_class(node: tree_sitter.Node) -> bool:
    """Whether the member `node` defines a class (`struct tma { ... };`), with or without a
    declarator (`struct { ... } fields;`)."""
    kind = node.child_by_field_name("type")
    return (
        kind is not None
        and kind.type in CLASS_TYPES
        and kind.child_by_field_name("body") is not None
    )


def matching_brace(data: bytes, start: int, end: int) -> int | None:
    """The byte just past the `}` that closes the `{` at `start`, if it comes before `end`
    (comments and string or character literals skipped)."""
    depth, index = 0, start
    while index < end:
        char = data[index : index + 1]
        if data.startswith(b"//", index):
            index = data.find(b"\n", index, end)
            if index < 0:
                return None
        elif data.startswith(b"/*", index):
            index = data.find(b"*/", index + 2, end)
            if index < 0:
                return None
            index += 1
        elif char in (b'"', b"'"):
            index += 1
            while index < end and data[index : index + 1] not in (char, b"\n"):
                index += 2 if data[index : index + 1] == b"\\" else 1
        elif char == b"{":
            depth += 1
        elif char == b"}":
            depth -= 1
            if depth == 0:
                return index + 1
        index += 1
    return None


def in_error(node: tree_sitter.Node) -> bool:
    """Whether `node` lies inside an ERROR node (tree-sitter misread what surrounds it)."""
    parent = node.parent
    while parent is not None:
        if parent.type == "ERROR":
            return True
        parent = parent.parent
    return False


def hides_from_nvrtc(directive: str) -> bool:
    """Whether `#if !defined(__CUDACC_RTC__)` (or `#ifndef __CUDACC_RTC__`) is `directive`."""
    return _NOT_RTC.fullmatch(directive.split("//")[0].split("/*")[0].strip()) is not None


def inner_declarator(node: tree_sitter.Node) -> tree_sitter.Node | None:
    """The declarator inside `node`: its `declarator` field, or a reference declarator's
    (`std::ostream& operator<<(...)`: tree-sitter gives `&` declarators no field)."""
    inner = node.child_by_field_name("declarator")
    if inner is None and node.type == "reference_declarator" and node.named_children:
        inner = node.named_children[-1]
    return inner


def ends_cut(node: tree_sitter.Node) -> bool:
    """Whether `node` ends with a `;` tree-sitter supplied (the text has none there)."""
    return bool(node.children) and node.children[-1].is_missing


def errors_only_in_parameters(declarator: tree_sitter.Node) -> bool:
    """Whether a function declarator's parse errors all lie in its parameter list, its name
    and the head before it well read."""
    node: tree_sitter.Node | None = declarator
    while node is not None and node.type != "function_declarator":
        node = node.child_by_field_name("declarator")
    if node is None:
        return False
    parameters = node.child_by_field_name("parameters")
    if parameters is None:
        return False
    return not any(
        c.has_error or c.type == "ERROR" or c.is_missing
        for c in node.children
        if c.id != parameters.id
    ) and not (declarator.id != node.id and _outside_has_error(declarator, node))


def _outside_has_error(outer: tree_sitter.Node, inner: tree_sitter.Node) -> bool:
    """Whether `outer` has a parse error outside `inner` (a pointer or reference declarator
    around the function declarator)."""
    return any(
        (c.has_error or c.type == "ERROR" or c.is_missing)
        and not (c.start_byte <= inner.start_byte and inner.end_byte <= c.end_byte)
        for c in outer.children
    )


def class_members(body: tree_sitter.Node) -> list[tree_sitter.Node]:
    """A class body's members, those under `#if`/`#ifndef` (every branch) included: a
    `__host__` constructor under `#ifndef LIB_NO_HOST` (ThunderKittens) is a member too."""
    members: list[tree_sitter.Node] = []
    for child in body.named_children:
        if child.type in ("preproc_if", "preproc_ifdef"):
            members.extend(_members_of(branch_items(child)))
        else:
            members.append(child)
    return members


def _members_of(items: list[tree_sitter.Node]) -> list[tree_sitter.Node]:
    out: list[tree_sitter.Node] = []
    for item in items:
        if item.type in ("preproc_if", "preproc_ifdef"):
            out.extend(_members_of(branch_items(item)))
        else:
            out.append(item)
    return out


def branch_items(node: tree_sitter.Node) -> list[tree_sitter.Node]:
    """The items of every branch of a conditional (`#if`, `#else`, `#elif`), in order."""
    items: list[tree_sitter.Node] = []
    condition = node.child_by_field_name("condition")
    for child in node.named_children:
        if condition is not None and child.id == condition.id:
            continue
        if child.type in ("preproc_else", "preproc_elif", "preproc_elifdef"):
            items.extend(branch_items(child))
        elif child.type not in ("identifier", "comment"):
            items.append(child)
    return items
