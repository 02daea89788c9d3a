"""Pointer roles (`in`, `out`, `inout`) a kernel's signature and body imply.

A const pointer is `in`, and so is any pointer the body never writes: reading through `p[i]`,
`*(p + i)`, `p->f` or `__ldg(&p[i])` leaves memory as it was, and counting such a pointer as
written doubles its bytes in the bandwidth figure. A write is an assignment or `++`/`--` through
the pointer; passing the pointer or an address inside it on (atomics, helpers), aliasing it or
casting it in a call count as writes, conservatively. A written pointer is `out` only if the
body never reads it (`p[i] = ...` and `*p = ...` are the only non-reading uses), else `inout`.
The spec parser uses these as the defaults of unprefixed pointers, the draft spec writes them
out; both read the same tree-sitter model of the body.
"""

from __future__ import annotations

from collections.abc import Callable
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
    return _uses(body, names, lambda node, data: not _is_pure_write(node))


# Calls that only load through the address they are given (the read-only cache intrinsics).
_LOADS = frozenset({"__ldg", "__ldca", "__ldcg", "__ldcs", "__ldlu", "__ldcv"})
# Operators under which an address is only compared or tested.
_COMPARISONS = frozenset({"==", "!=", "<", ">", "<=", ">=", "&&", "||", "!"})


def written_pointers(body: str, names: set[str]) -> set[str]:
    """Which of `names` the function body `body` ('{...}') may write through (conservatively)."""
    if not names:
        return set()
    return _uses(body, names, _address_may_be_written)


def _uses(body: str, names: set[str], counts: Callable[[Any, bytes], bool]) -> set[str]:
    """Which of `names` have an identifier use in `body` ('{...}') for which `counts` holds."""
    tree, data = parse_tree("void __cuda_llm_body() " + body)  # a per-thread parser
    found: set[str] = set()
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        if node.type != "identifier":
            continue
        name = data[node.start_byte : node.end_byte].decode("utf-8", "replace")
        if name in names and name not in found and counts(node, data):
            found.add(name)
    return found


def _address_may_be_written(address: Any, data: bytes) -> bool:
    """Whether memory at `address` (the pointer, or an address computed from it) may change."""
    node = address
    while True:  # climb through address arithmetic: (p), p + i, i + p, p - i, (T*)p
        parent = node.parent
        if parent is None:
            return True
        arithmetic = parent.type == "binary_expression" and _operator(parent, data) in ("+", "-")
        cast = parent.type == "cast_expression" and _is_field(parent, "value", node)
        if parent.type == "parenthesized_expression" or arithmetic or cast:
            node = parent
        else:
            break
    parent = node.parent
    if parent.type == "subscript_expression" and _is_field(parent, "argument", node):
        return _lvalue_is_written(parent, data)
    if parent.type == "pointer_expression" and _operator(parent, data) == "*":
        return _lvalue_is_written(parent, data)
    if parent.type == "field_expression" and _is_field(parent, "argument", node):
        return _lvalue_is_written(parent, data)  # p->f
    if parent.type in ("binary_expression", "unary_expression"):
        return _operator(parent, data) not in _COMPARISONS
    if parent.type == "condition_clause":
        return False
    if parent.type == "argument_list":
        call = parent.parent
        function = call.child_by_field_name("function") if call is not None else None
        return function is None or data[function.start_byte : function.end_byte] not in {
            name.encode() for name in _LOADS
        }
    return True  # passed on, aliased, returned, assigned: it may be written elsewhere


def _lvalue_is_written(lvalue: Any, data: bytes) -> bool:
    """Whether the memory `lvalue` (`p[i]`, `*p`, `p->f`, and members of them) is changed."""
    node = lvalue
    while True:  # p[i].x, p[i][j], (p[i])
        parent = node.parent
        if parent is None:
            return True
        if parent.type == "parenthesized_expression" or (
            parent.type in ("field_expression", "subscript_expression")
            and _is_field(parent, "argument", node)
        ):
            node = parent
        else:
            break
    parent = node.parent
    if parent.type == "assignment_expression":
        return _is_field(parent, "left", node)
    if parent.type == "update_expression":
        return True
    if parent.type == "pointer_expression" and _operator(parent, data) == "&":
        return _address_may_be_written(parent, data)  # &p[i]: follow the address
    # p[i].method() may change the element; any other use only reads it
    return parent.type == "call_expression" and _is_field(parent, "function", node)


def _is_field(parent: Any, field: str, child: Any) -> bool:
    found = parent.child_by_field_name(field)
    return found is not None and found.id == child.id


def _operator(node: Any, data: bytes) -> str:
    operator = node.child_by_field_name("operator")
    return "" if operator is None else data[operator.start_byte : operator.end_byte].decode()


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
    """The default role of every pointer parameter: const or never written -> in; else out
    unless read."""
    pointers = [p for p in kernel.params if p.is_pointer]
    candidates = {p.name for p in pointers if not p.is_const}
    try:
        body = kernel.body_span.slice(source)
        writes = written_pointers(body, candidates)
        reads = read_pointers(body, writes)
    except Exception:  # a broken body: be conservative
        writes = reads = set(candidates)
    roles: dict[str, Role] = {}
    for p in pointers:
        if p.is_const or p.name not in writes:
            roles[p.name] = "in"
        else:
            roles[p.name] = "inout" if p.name in reads else "out"
    return roles
