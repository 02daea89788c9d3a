"""Pointer roles (`in`, `out`, `inout`) a kernel's signature and body imply.

A const pointer is `in`. Any other pointer is `out` only if the body never reads it (`p[i] = ...`
and `*p = ...` are the only non-reading uses); compound assignment, atomics, passing the pointer
on or aliasing it count as reads, so the role is `inout`. The spec parser uses these as the
defaults of unprefixed pointers, the draft spec writes them out; both read the same tree-sitter
model of the body.
"""

from __future__ import annotations

from typing import Any, Literal

from cuda_llm_lsp.source.kernels import Kernel, parse_tree

Role = Literal["in", "out", "inout"]
ROLES: tuple[str, ...] = ("in", "out", "inout")


def read_pointers(body: str, names: set[str]) -> set[str]:
    """Which of `names` the function body `body` ('{...}') reads (conservatively).

    A use is a pure write only as `p[...] = ...` or `*p = ...` (plain `=`); anything else,
    including `+=`, `atomicAdd(&p[i], v)`, `f(p)` and `T* q = p`, counts as a read.
    """
    if not names:
        return set()
    tree, data = parse_tree("void __cuda_llm_body() " + body)  # a per-thread parser
    reads: set[str] = set()
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        if node.type != "identifier":
            continue
        name = data[node.start_byte : node.end_byte].decode("utf-8", "replace")
        if name in names and name not in reads and not _is_pure_write(node):
            reads.add(name)
    return reads


def _is_pure_write(identifier: Any) -> bool:
    parent = identifier.parent
    if parent is None:
        return False
    if parent.type == "subscript_expression":
        target = parent
    elif parent.type == "pointer_expression":
        operator = parent.child_by_field_name("operator")
        if operator is None or operator.type != "*":
            return False
        target = parent
    else:
        return False
    argument = target.child_by_field_name("argument")
    if argument is None or argument.id != identifier.id:
        return False
    assignment = target.parent
    if assignment is None or assignment.type != "assignment_expression":
        return False
    left = assignment.child_by_field_name("left")
    operator = assignment.child_by_field_name("operator")
    return (
        left is not None and left.id == target.id and operator is not None and operator.type == "="
    )


def infer_roles(kernel: Kernel, source: str) -> dict[str, Role]:
    """The default role of every pointer parameter: const -> in; else out unless read."""
    pointers = [p for p in kernel.params if p.is_pointer]
    candidates = {p.name for p in pointers if not p.is_const}
    try:
        body = kernel.body_span.slice(source)
        reads = read_pointers(body, candidates)
    except Exception:  # a broken body: be conservative
        reads = set(candidates)
    roles: dict[str, Role] = {}
    for p in pointers:
        roles[p.name] = "in" if p.is_const else ("inout" if p.name in reads else "out")
    return roles
