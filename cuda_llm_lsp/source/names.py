"""The tokens and the top-level definitions of CUDA text: what a winner's helpers define and what
the file already uses, so that a helper never silently changes the meaning of the file
(`fsr/clashes.py`, docs/design.md [launch]).

Code is read as tree-sitter-cuda's leaves; the bodies of `#define`s and other directives, which
tree-sitter keeps as one opaque `preproc_arg`, are lexed as preprocessing tokens (as the
preprocessor sees them: `#` and `##` included). Comments, string and character literals are never
names.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

from tree_sitter import Node

from cuda_llm_lsp.source.context import walk_nodes
from cuda_llm_lsp.source.kernels import Offsets, node_text, parse_tree

DefinitionKind = Literal["macro", "function_macro", "function", "variable", "type"]

_IDENT = re.compile(r"[A-Za-z_$][\w$]*\Z")
_LITERALS = frozenset(
    {
        "string_literal",
        "char_literal",
        "raw_string_literal",
        "number_literal",
        "system_lib_string",
        "concatenated_string",
        "user_defined_literal",
    }
)
_CONDITIONALS = frozenset(
    {
        "preproc_if",
        "preproc_ifdef",
        "preproc_else",
        "preproc_elif",
        "preproc_elifdef",
    }
)
_At = Callable[[int], int]  # a byte offset of the parsed data as a character offset of the text
_DEVICE_MARKS = frozenset({"__device__", "__global__", "__constant__", "__shared__", "__managed__"})
_PP_TOKEN = re.compile(
    r"""(?P<comment>//[^\n]*|/\*.*?(?:\*/|\Z))
      |(?P<literal>(?:u8|u|U|L)?"(?:\\.|[^"\\\n])*"?|(?:u8|u|U|L)?'(?:\\.|[^'\\\n])*'?
                  |\.?\d(?:[eEpP][+-]|[\w.'])*)
      |(?P<ident>[A-Za-z_$][\w$]*)
      |(?P<punct>\#\#|%:%:|->|::|\.\.\.|\S)""",
    re.DOTALL | re.VERBOSE,
)


@dataclass(frozen=True)
class Token:
    """One token of the text; comments are left out, a literal is one token."""

    text: str
    start: int  # offsets into the text (str, not UTF-8 bytes)
    end: int
    ident: bool  # a name (what a macro or a rename could apply to)
    member: bool = False  # after `.`, `->` or `scope::`: a member or another scope's name
    tested: bool = False  # in `#ifdef` / `#ifndef` / `defined(...)`: only asked whether defined


@dataclass(frozen=True)
class Definition:
    """A name defined at the top level (or, for `#define`, anywhere): its whole text's span."""

    name: str
    kind: DefinitionKind
    start: int  # from the start of its line where only blanks are before it
    end: int  # through the end of its line where only blanks follow
    shape: tuple[str, ...]  # its tokens without comments or spacing: equal shapes, equal text
    conditional: bool  # inside `#if` / `#ifdef`
    device: bool  # device-side: a macro, a type, `__device__`/`__global__`, constexpr, constant
    params: tuple[str, ...] = ()  # a function-like macro's parameters
    body: tuple[str, ...] = ()  # a macro's replacement tokens


@dataclass(frozen=True)
class Block:
    """A top-level `#if` / `#ifdef` ... `#endif`: its span (whole lines) and its tokens."""

    start: int
    end: int
    shape: tuple[str, ...]


@dataclass(frozen=True)
class Names:
    """The tokens, definitions, `#undef`s and top-level conditional blocks of one text."""

    text: str
    tokens: tuple[Token, ...]
    definitions: tuple[Definition, ...]
    undefs: tuple[Token, ...]  # the name of each `#undef`
    blocks: tuple[Block, ...] = ()

    def lines(self, offset: int) -> int:
        """The 1-based line of `offset`."""
        return self.text.count("\n", 0, offset) + 1


def read_names(text: str) -> Names:
    """The tokens, the definitions and the `#undef`s of `text`."""
    tree, data = parse_tree(text)
    at = Offsets(text, data).offset
    tokens: list[Token] = []
    definitions: list[Definition] = []
    undefs: list[Token] = []
    blocks: list[tuple[int, int]] = []
    skip_until = -1
    for node in walk_nodes(tree.root_node):
        if node.start_byte < skip_until:
            continue
        kind = node.type
        if kind in ("preproc_if", "preproc_ifdef") and node.parent == tree.root_node:
            blocks.append(_whole_lines(text, at(node.start_byte), at(node.end_byte)))
        if kind in ("preproc_def", "preproc_function_def"):
            definitions.append(_macro(node, text, at))
        elif kind in (
            "function_definition",
            "declaration",
            "struct_specifier",
            "class_specifier",
            "union_specifier",
            "enum_specifier",
            "type_definition",
            "alias_declaration",
        ):
            definitions.extend(_definitions(node, text, at))
        if kind == "comment":
            skip_until = node.end_byte
        elif kind in _LITERALS or (node.child_count == 0 and kind != "preproc_arg"):
            skip_until = node.end_byte
            leaf = _leaf(node, text, at)
            if leaf.text.strip():
                tokens.append(leaf)
        elif kind == "preproc_arg":
            skip_until = node.end_byte
            directive = _directive(node, data)
            found = lex(text[at(node.start_byte) : at(node.end_byte)], at(node.start_byte))
            if directive == "#undef":
                undefs.extend(t for t in found if t.ident)
            tokens.extend(found)
    starts = [t.start for t in tokens]

    def shape(start: int, end: int) -> tuple[str, ...]:
        return tuple(t.text for t in tokens[bisect_left(starts, start) : bisect_left(starts, end)])

    shaped = tuple(replace(d, shape=(d.kind, *shape(d.start, d.end))) for d in definitions)
    conditionals = tuple(Block(start, end, shape(start, end)) for start, end in blocks)
    return Names(text, tuple(tokens), shaped, tuple(undefs), conditionals)


def lex(body: str, base: int = 0) -> list[Token]:
    """Preprocessing tokens of a directive's text (a `#define` body): comments left out."""
    out: list[Token] = []
    for match in _PP_TOKEN.finditer(body):
        group = match.lastgroup
        if group == "comment":
            continue
        text = match.group(0)
        prev = out[-1].text if out else ""
        scoped = prev == "::" and len(out) > 1 and out[-2].ident
        out.append(
            Token(
                text,
                base + match.start(),
                base + match.end(),
                group == "ident",
                member=prev in (".", "->") or scoped,
            )
        )
    return out


def macro_arguments(tokens: list[Token] | tuple[Token, ...], at: int) -> list[list[Token]] | None:
    """The arguments of the invocation whose `(` is `tokens[at]`, or None when it is not closed."""
    if at >= len(tokens) or tokens[at].text != "(":
        return None
    depth = 0
    args: list[list[Token]] = [[]]
    for token in tokens[at + 1 :]:
        if token.text == ")" and depth == 0:
            return args if any(args) or len(args) > 1 else []
        if token.text in ("(", "[", "{"):
            depth += 1
        elif token.text in (")", "]", "}"):
            depth -= 1
        if token.text == "," and depth == 0:
            args.append([])
        else:
            args[-1].append(token)
    return None


def pasted_params(definition: Definition) -> frozenset[int]:
    """Indexes of a function-like macro's parameters used with `#` or `##` (not expanded)."""
    body = ("", *definition.body, "")
    return frozenset(
        definition.params.index(token)
        for before, token, after in zip(body, body[1:], body[2:], strict=False)
        if token in definition.params and {"#", "##", "%:%:"} & {before, after}
    )


def pasted_names(definition: Definition) -> frozenset[str]:
    """Names other than its parameters that a macro's body uses next to `#` or `##`."""
    body = ("", *definition.body, "")
    return frozenset(
        token
        for before, token, after in zip(body, body[1:], body[2:], strict=False)
        if _IDENT.match(token)
        and token not in definition.params
        and {"#", "##", "%:%:"} & {before, after}
    )


def _leaf(node: Node, text: str, at: _At) -> Token:
    value = text[at(node.start_byte) : at(node.end_byte)]
    parent = node.parent
    member = node.type == "field_identifier" or (
        parent is not None
        and parent.type == "qualified_identifier"
        and parent.child_by_field_name("scope") is not None
        and parent.child_by_field_name("name") == node
    )
    tested = parent is not None and (
        parent.type == "preproc_defined"
        or (
            parent.type in ("preproc_ifdef", "preproc_elifdef")
            and parent.child_by_field_name("name") == node
        )
    )
    return Token(
        value,
        at(node.start_byte),
        at(node.end_byte),
        ident=node.type not in _LITERALS and bool(_IDENT.match(value)),
        member=member,
        tested=tested,
    )


def _directive(arg: Node, data: bytes) -> str:
    directive = arg.parent.child_by_field_name("directive") if arg.parent else None
    if directive is None:
        return ""
    return node_text(directive, data).strip()


def _macro(node: Node, text: str, at: _At) -> Definition:
    name = node.child_by_field_name("name")
    params = node.child_by_field_name("parameters")
    value = node.child_by_field_name("value")
    body = lex(text[at(value.start_byte) : at(value.end_byte)]) if value is not None else []
    param_names = (
        tuple(text[at(p.start_byte) : at(p.end_byte)] for p in params.named_children)
        if params is not None
        else ()
    )
    kind: DefinitionKind = "function_macro" if node.type == "preproc_function_def" else "macro"
    start, end = _whole_lines(text, at(node.start_byte), at(node.end_byte))
    name_text = text[at(name.start_byte) : at(name.end_byte)] if name is not None else ""
    return Definition(
        name_text,
        kind,
        start,
        end,
        (),
        _conditional(node),
        True,
        param_names,
        tuple(t.text for t in body),
    )


def _definitions(node: Node, text: str, at: _At) -> list[Definition]:
    """The names a top-level function, declaration or type defines (none when nested)."""
    outer = node
    while outer.parent is not None and outer.parent.type in (
        "template_declaration",
        "linkage_specification",
    ):
        outer = outer.parent
    parent = outer.parent
    while parent is not None and parent.type in (*_CONDITIONALS, "declaration_list"):
        if parent.type == "declaration_list" and (
            parent.parent is None or parent.parent.type != "linkage_specification"
        ):
            return []  # in a namespace, class or block: not a name of the file's top level
        parent = parent.parent
    if parent is None or parent.type not in ("translation_unit", "linkage_specification"):
        return []
    if (
        node.type.endswith("_specifier")
        and node.parent is not None
        and node.parent.type in ("declaration", "type_definition", "function_definition")
    ):
        return []  # `struct S {...} s;` is read through its declaration
    start, end = _whole_lines(text, at(outer.start_byte), at(outer.end_byte))
    marks = {text[at(c.start_byte) : at(c.end_byte)] for c in node.children}
    conditional = _conditional(outer)
    found: list[tuple[str, DefinitionKind]] = []
    if node.type == "function_definition":
        name = _declared_name(node.child_by_field_name("declarator"), text, at)
        if name:
            found.append((name, "function"))
        device = bool(marks & _DEVICE_MARKS)
    elif node.type in ("declaration", "type_definition"):
        device = node.type == "type_definition" or bool(marks & (_DEVICE_MARKS | {"constexpr"}))
        for declarator in node.children_by_field_name("declarator"):
            name = _declared_name(declarator, text, at)
            if not name or (
                node.type == "declaration"
                and (_function_declarator(declarator) or "extern" in marks)
            ):
                continue  # a prototype or an `extern` declaration names what is defined elsewhere
            found.append((name, "type" if node.type == "type_definition" else "variable"))
        found.extend(_type_names(node, text, at))
    else:
        device = True
        found.extend(_type_names(node, text, at))
    return [Definition(n, k, start, end, (), conditional, device) for n, k in found]


def _type_names(node: Node, text: str, at: _At) -> list[tuple[str, DefinitionKind]]:
    """A defined struct/class/union/enum's name, an enum's enumerators, an alias's name."""
    out: list[tuple[str, DefinitionKind]] = []
    for spec in [node, *(c for c in node.children if c.type.endswith("_specifier"))]:
        name = spec.child_by_field_name("name")
        body = spec.child_by_field_name("body")
        if name is not None and (body is not None or spec.type == "alias_declaration"):
            out.append((text[at(name.start_byte) : at(name.end_byte)], "type"))
        if spec.type == "enum_specifier" and body is not None:
            for enumerator in body.named_children:
                value = enumerator.child_by_field_name("name")
                if value is not None:
                    out.append((text[at(value.start_byte) : at(value.end_byte)], "variable"))
    return out


def _declared_name(declarator: Node | None, text: str, at: _At) -> str:
    node = declarator
    while node is not None:
        if node.type in ("identifier", "type_identifier"):
            return text[at(node.start_byte) : at(node.end_byte)]
        if node.type in ("qualified_identifier", "operator_name", "destructor_name"):
            return ""  # a member defined out of its class, an operator: not a new file name
        node = node.child_by_field_name("declarator")
    return ""


def _function_declarator(declarator: Node) -> bool:
    node: Node | None = declarator
    while node is not None:
        if node.type == "function_declarator":
            return True
        node = node.child_by_field_name("declarator")
    return False


def _conditional(node: Node) -> bool:
    parent = node.parent
    while parent is not None:
        if parent.type in _CONDITIONALS:
            return True
        parent = parent.parent
    return False


def _whole_lines(text: str, start: int, end: int) -> tuple[int, int]:
    """[start, end) widened to whole lines where only blanks are beside it."""
    line_start = text.rfind("\n", 0, start) + 1
    if not text[line_start:start].strip():
        start = line_start
    if end and text[end - 1] == "\n":
        return start, end
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end + 1
    if not text[end:line_end].strip():
        end = line_end
    return start, end
