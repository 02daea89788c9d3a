"""What of a model's reply is not device-side, item by item (docs/design.md, "What an accepted
winner may write").

NVRTC parses host code and never runs it, so a reply's host function, host object with a
constructor or `__attribute__((constructor))` passes the judge; written into the user's file,
nvcc would build it and the program would run it. A reply may therefore add only: the kernel and
other `__global__` / `__device__` / `__host__ __device__` functions and templates, preprocessor
definitions, `#include`s (judged by `compile.candidate_policy`), `__device__` / `__constant__` /
`__shared__` variables, `constexpr` values and `const` scalars with constant initialisers,
types whose member functions are device functions, `typedef` / `using`, `static_assert`,
prototypes, and namespaces or `extern "C"` blocks of those. Anything else at namespace scope is a
`HostItem` naming its line and what it is. Macros whose body is only function specifiers
(`#define HD __host__ __device__`) are read as those specifiers; a macro that redefines a
reserved name (`#define __device__`) is itself not allowed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tree_sitter import Node

from cuda_llm_lsp.source.context import walk_nodes
from cuda_llm_lsp.source.kernels import node_text, parse_tree
from cuda_llm_lsp.source.untrusted import code_only, hidden_characters

_SPECIFIER_WORDS = frozenset(
    {
        "__host__",
        "__device__",
        "__forceinline__",
        "__noinline__",
        "inline",
        "__inline__",
        "static",
        "__inline",
    }
)
_HARMLESS = frozenset(
    {
        "comment",
        "preproc_include",
        "static_assert_declaration",
        "type_definition",
        "alias_declaration",
        "namespace_alias_definition",
        "using_declaration",
    }
)
_DEVICE_VARIABLE = frozenset({"__device__", "__constant__", "__shared__"})
_PRAGMAS = re.compile(r"(?:unroll|nounroll|once|nv_diag_\w+|diag_\w+)\b")
_SAFE_DIRECTIVES = frozenset({"#undef", "#error", "#warning"})
_ATTRIBUTES_OK = frozenset(
    {
        "aligned",
        "__aligned__",
        "always_inline",
        "__always_inline__",
        "noinline",
        "__noinline__",
        "unused",
        "__unused__",
        "maybe_unused",
        "likely",
        "unlikely",
        "nodiscard",
        "fallthrough",
        "noreturn",
        "pure",
        "const",
        "__const__",
        "flatten",
        "packed",
        "__packed__",
        "restrict",
    }
)
_SCALAR_TYPES = re.compile(
    r"(?:(?:unsigned|signed|short|long|const|static|volatile|constexpr)\s+)*"
    r"(?:bool|char|short|int|long|float|double|unsigned|signed|size_t|std::size_t|ptrdiff_t|"
    r"u?int(?:8|16|32|64)_t|half|__half|__nv_bfloat16)(?:\s+(?:int|long|const))*\Z"
)
_DYNAMIC = frozenset(
    {
        "call_expression",
        "new_expression",
        "delete_expression",
        "lambda_expression",
        "assignment_expression",
        "update_expression",
        "comma_expression",
        "string_literal",
        "compound_literal_expression",
        "co_await_expression",
        "throw_expression",
    }
)
_RESERVED_MACRO = re.compile(
    r"__\w*|_[A-Z]\w*|asm|static|inline|extern|const|constexpr|void|int|float|struct|class|"
    r"template|namespace|operator"
)


@dataclass(frozen=True)
class HostItem:
    """Something in a reply that is not device-side: its line (1-based) and what it is.
    `span`: the lines (0-based, first and last) of the whole namespace-scope item when the kernel
    can do without it
    (a host function, object, variable or type, a host-only `#include`): `device_only` drops it
    from the candidate; None: a trick no honest reply needs, which refuses the reply."""

    line: int
    what: str  # "defines a host function `main`"
    span: tuple[int, int] | None = field(default=None, compare=False)

    def describe(self) -> str:
        return f"line {self.line} {self.what}"


@dataclass(frozen=True)
class DeviceOnly:
    """A cleaned candidate made device-only (`device_only`): its text, the host items dropped
    from it, and the lines whose `__host__` was removed (what the model hears next round)."""

    text: str
    dropped: tuple[HostItem, ...] = ()
    unhosted: tuple[int, ...] = ()  # lines of the reply whose `__host__` was removed

    def note(self) -> str:
        """What was changed and why, for the model's next prompt ("" when nothing was)."""
        lines = []
        if self.dropped:
            shown = "; ".join(i.describe() for i in self.dropped[:MAX_ITEMS_SHOWN])
            more = len(self.dropped) - MAX_ITEMS_SHOWN
            lines.append(
                f"dropped from the reply, never compiled (only the kernel and its device "
                f"helpers are used): {shown}" + (f" (and {more} more)" if more > 0 else "")
            )
        if self.unhosted:
            where = ", ".join(str(n) for n in self.unhosted[:MAX_ITEMS_SHOWN])
            lines.append(
                f"`__host__` removed on line(s) {where}: helpers are compiled as `__device__` "
                "only (write them `__device__`)"
            )
        return "\n".join(lines)


MAX_ITEMS_SHOWN = 5


def reply_refusal(code: str, where: str = "") -> str | None:
    """Why `code` (a reply's code) may not become a candidate, one line per finding, or None:
    hidden characters first (they make the rest unreadable), then host code. `where`: said after
    each line number (" of the candidate": `fsr.prompts` shows the model its code there)."""
    hidden = hidden_refusal(code, where)
    if hidden is not None:
        return hidden
    items = host_items(code) + _place_names(code)
    return _refusal(items, where) if items else None


def device_only(code: str, where: str = "") -> DeviceOnly | str:
    """`code` (a cleaned candidate) as it may be compiled and written, or why it may not:

    - hidden characters, and tricks no honest reply needs (an attribute, a host pragma,
      namespace-scope `asm`, a section directive, a host-only preprocessor branch): refused;
    - `__host__` removed everywhere (`__host__ __device__` helpers, a `#define HD __host__
      __device__`, an extended lambda): a reply's functions compile as device code only, which is
      the same code for the kernel (NVRTC compiles only the device side of them anyway);
    - what the kernel does not need on the device (`main`, a host launcher, host objects and
      variables, a type with host member functions, a host-only standard `#include`): dropped
      (`DeviceOnly.dropped`); if the kernel needed it, the candidate does not compile.
    """
    hidden = hidden_refusal(code, where)
    if hidden is not None:
        return hidden
    text, unhosted = _without_host(code)
    items = host_items(text)
    tricks = [i for i in items if i.span is None]
    if tricks:
        return _refusal(tricks, where)
    rows: list[tuple[int, int]] = []  # whole lines: a specifier macro's use moved columns
    for first, last in sorted({i.span for i in items if i.span is not None}):
        if rows and first <= rows[-1][1]:
            rows[-1] = (rows[-1][0], max(last, rows[-1][1]))  # sharing a line with the one before
        else:
            rows.append((first, last))
    lines = text.split("\n")
    for first, last in reversed(rows):
        del lines[first : last + 1]
    text = "\n".join(lines)
    left = host_items(text) + _place_names(text)
    if left:  # what dropping left behind is still host code: refused as it stands
        return _refusal(left, where)
    return DeviceOnly(text, tuple(items), unhosted)


def hidden_refusal(code: str, where: str = "") -> str | None:
    """Why `code` may not be used for its hidden characters, one line per finding, or None."""
    hidden = hidden_characters(code)
    if not hidden:
        return None
    return "\n".join(
        f"hidden characters are not allowed in a reply: {h.describe()}"
        + (f" (line {h.line}{where})" if where else "")
        for h in hidden[:MAX_ITEMS_SHOWN]
    )


def _refusal(items: list[HostItem], where: str) -> str:
    return "\n".join(
        f"host code is not allowed in a reply: {i.describe()}"
        + (f" (line {i.line}{where})" if where else "")
        for i in items[:MAX_ITEMS_SHOWN]
    )


_HOST_WORD = re.compile(r"\b__host__\b[ \t]*")


def _without_host(code: str) -> tuple[str, tuple[int, ...]]:
    """`code` with every `__host__` of its code (not of comments or strings) removed, and the
    lines it was on."""
    bare = code_only(code)
    found = list(_HOST_WORD.finditer(bare))
    lines = tuple(sorted({bare.count("\n", 0, m.start()) + 1 for m in found}))
    for match in reversed(found):
        code = code[: match.start()] + code[match.end() :]
    return code, lines


def device_names(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """The names of the device-side functions and variables `text` defines at any namespace
    depth (`__global__`, `__device__`, `__constant__`, `constexpr`, `const`), and of its types:
    what may have a host copy or shadow in its host object (`compile.host_object`)."""
    tree, data = parse_tree(_with_specifier_macros(text)[0])
    names: set[str] = set()
    types: set[str] = set()
    for node in walk_nodes(tree.root_node):
        if node.type in (
            "struct_specifier",
            "class_specifier",
            "union_specifier",
            "enum_specifier",
        ):
            name = node.child_by_field_name("name")
            if name is not None:
                types.add(node_text(name, data))
        elif node.type in ("function_definition", "declaration"):
            marks = _marks(node, data)
            if not marks & (_DEVICE_VARIABLE | {"__global__", "constexpr", "const"}):
                continue
            if _in_function(node):
                continue  # a local
            for declarator in node.children_by_field_name("declarator"):
                name_text = _name_of(declarator, data)
                names.add(name_text.split("::")[-1])
    return frozenset(names), frozenset(types)


def _in_function(node: Node) -> bool:
    parent = node.parent
    while parent is not None:
        if parent.type == "compound_statement":
            return True
        parent = parent.parent
    return False


def host_items(code: str) -> list[HostItem]:
    """What in `code` (a reply's cleaned code block) is host-side, in source order."""
    text, specifier_macros = _with_specifier_macros(code)
    tree, data = parse_tree(text)
    found: list[HostItem] = []
    _scope(tree.root_node, data, found, specifier_macros)
    found.extend(_attributes(code))
    found.extend(_host_spellings(code))
    found.extend(_host_branches(code))
    found.extend(_section_directives(code))
    found.extend(_joining_splices(code))
    found.extend(_alternative_directives(code))
    found.extend(_build_identity(code))
    found.extend(_asm_outside_bodies(code))
    found.extend(_hidden_attributes(code))
    unique = {(i.line, i.what, i.span): i for i in found}
    return sorted(unique.values(), key=lambda item: (item.line, item.what))


def _with_specifier_macros(code: str) -> tuple[str, frozenset[str]]:
    """`code` as tree-sitter should read it: every use of a macro whose body is only function
    specifiers replaced by its body (lines stay), `__align__(N)` blanked, the header names of
    `__has_include` made identifiers."""
    # `__align__(16)` (CUDA's alignment macro) confuses tree-sitter: blanked, same length
    code = re.sub(r"\b__(?:builtin_)?align__\s*\([^()\n]*\)", lambda m: " " * len(m.group(0)), code)
    # `__has_include(<cuda_bf16.h>)` in an `#if` is no expression to tree-sitter: the header name
    # becomes an identifier of the same length (the include policy judges the header itself)
    code = re.sub(
        r"\b(__has_include(?:_next)?\s*\(\s*)([<\"][^<>\"\n]*[>\"])",
        lambda m: m.group(1) + re.sub(r"\W", "_", m.group(2)),
        code,
    )
    names: dict[str, str] = {}
    for match in re.finditer(r"(?m)^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+([^\n]*)$", code):
        words = match.group(2).split()
        if (
            words
            and set(words) <= _SPECIFIER_WORDS
            and len(match.group(2)) <= len(match.group(1)) + 64
        ):
            names[match.group(1)] = " ".join(words)
    if not names:
        return code, frozenset()
    lines = code.split("\n")
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b")
    for i, line in enumerate(lines):
        if not re.match(r"\s*#", line):
            lines[i] = pattern.sub(lambda m: names[m.group(1)], line)
    return "\n".join(lines), frozenset(names)


def _line(node: Node) -> int:
    return node.start_point.row + 1


def _marks(node: Node, data: bytes) -> set[str]:
    """The specifier words directly on a declaration (`__device__`, `static`, `constexpr`...)."""
    out: set[str] = set()
    for child in node.children:
        if child.type in ("storage_class_specifier", "type_qualifier", "virtual") or (
            child.child_count == 0
        ):
            out.add(node_text(child, data).strip())
    return out


#: A host item found but not yet given the span of the namespace-scope item it is in.
_DROP = (-1, -1)


def _scope(node: Node, data: bytes, found: list[HostItem], macros: frozenset[str]) -> None:
    """Check every item of a namespace-scope list (the file, a namespace, `extern "C" {}`, the
    branches of `#if`); what the kernel can do without gets the span of the item it is in."""
    _each(node.named_children, data, found, macros)


def _each(items: list[Node], data: bytes, found: list[HostItem], macros: frozenset[str]) -> None:
    for child in items:
        before = len(found)
        _item(child, data, found, macros)
        for i in range(before, len(found)):
            if found[i].span == _DROP:
                end = child.end_point  # a directive ends at the start of the next line
                last = (
                    end.row - 1 if end.column == 0 and end.row > child.start_point.row else end.row
                )
                rows = (child.start_point.row, last)
                found[i] = HostItem(found[i].line, found[i].what, rows)


def _item(node: Node, data: bytes, found: list[HostItem], macros: frozenset[str]) -> None:
    """The host items of one top-level `node` of a reply, added to `found`.

    Long because it is one branch per kind of top-level item a reply may hold, in the order
    they are checked; each branch is a few lines and returns."""
    kind = node.type

    def host(what: str, droppable: bool = True) -> None:
        found.append(HostItem(_line(node), what, _DROP if droppable else None))

    if kind == "preproc_include":
        path = node.child_by_field_name("path")
        header = node_text(path, data).strip('<>" ') if path is not None else ""
        if header in _HOST_HEADERS:
            host(f"includes the host-only header <{header}>")
        return
    if kind in _HARMLESS:
        if kind == "type_definition":
            for child in node.named_children:
                if child.type in ("struct_specifier", "class_specifier", "union_specifier"):
                    _type(child, data, found)
        return
    if kind in ("preproc_def", "preproc_function_def"):
        name = node.child_by_field_name("name")
        text = node_text(name, data) if name is not None else ""
        if _RESERVED_MACRO.fullmatch(text) and text not in macros:
            host(f"redefines the reserved name `{text}` (`#define {text}`)", False)
        return
    if kind == "preproc_call":
        directive_node = node.child_by_field_name("directive")
        directive = node_text(directive_node, data).strip() if directive_node else ""
        argument = node.child_by_field_name("argument")
        arg = node_text(argument, data).strip() if argument is not None else ""
        if directive == "#pragma":
            if not _PRAGMAS.match(arg):
                host(
                    f"holds a host pragma (`#pragma {arg.split()[0] if arg else ''}`): only "
                    "`#pragma unroll` and `nv_diag_*` are allowed",
                    False,
                )
        elif directive == "#undef":
            if _RESERVED_MACRO.fullmatch(arg):
                host(f"undefines the reserved name `{arg}`", False)
        elif directive not in _SAFE_DIRECTIVES:
            host(f"holds the directive `{directive}`", False)
        return
    if kind in ("preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif", "preproc_elifdef"):
        branch = [
            child
            for child in node.named_children
            if child != node.child_by_field_name("condition")
            and child != node.child_by_field_name("name")
        ]
        _each(branch, data, found, macros)
        return
    if kind in ("namespace_definition", "linkage_specification"):
        body = node.child_by_field_name("body")
        if body is None:
            return
        if body.type == "declaration_list":
            _scope(body, data, found, macros)
        else:
            _item(body, data, found, macros)
        return
    if kind in ("template_declaration", "template_instantiation"):
        inner = [c for c in node.named_children if c.type not in ("template_parameter_list",)]
        if kind == "template_instantiation":
            if not _marks(node, data) & {"__device__", "__global__"}:
                host("instantiates a host function template")
            return
        for child in inner:
            _item(child, data, found, macros)
        return
    if kind == "function_definition":
        marks = _marks(node, data)
        if not marks & {"__device__", "__global__"}:
            host(f"defines a host function `{_name(node, data)}`")
        return
    if kind in ("struct_specifier", "class_specifier", "union_specifier"):
        _type(node, data, found)
        return
    if kind == "enum_specifier":
        return
    if kind == "declaration":
        _declaration(node, data, found)
        return
    if kind == "expression_statement" and re.match(r"\s*(?:__)?asm", node_text(node, data)):
        host("holds namespace-scope `asm`", False)
        return
    shown = " ".join(node_text(node, data).split())[:40]
    host(f"holds `{shown}`, which is not a device-side definition")


def _name(node: Node, data: bytes) -> str:
    declarator = node.child_by_field_name("declarator")
    while declarator is not None:
        if declarator.type in (
            "identifier",
            "field_identifier",
            "qualified_identifier",
            "operator_name",
            "destructor_name",
            "type_identifier",
        ):
            return node_text(declarator, data)
        declarator = declarator.child_by_field_name("declarator")
    return "?"


def _type(node: Node, data: bytes, found: list[HostItem]) -> None:
    """A struct / class / union: its member functions must be device functions."""
    body = node.child_by_field_name("body")
    if body is None:
        return
    name_node = node.child_by_field_name("name")
    name = node_text(name_node, data) if name_node is not None else "(unnamed)"
    for member in body.named_children:
        target = member
        if member.type == "template_declaration":
            target = next(
                (c for c in member.named_children if c.type == "function_definition"), member
            )
        if member.type == "friend_declaration":
            target = next(
                (c for c in member.named_children if c.type == "function_definition"), member
            )
            if target is member:
                continue
        if target.type == "function_definition":
            if _defaulted(target, data):
                continue
            if not _marks(target, data) & {"__device__", "__global__"}:
                member_name = _name(target, data)
                what = (
                    "a constructor"
                    if member_name.split("<")[0] == name
                    else (f"the host member function `{member_name}`")
                )
                found.append(
                    HostItem(
                        _line(target),
                        f"defines a type `{name}` with {what} (a host function)",
                        _DROP,
                    )
                )
        elif target.type in ("struct_specifier", "class_specifier", "union_specifier"):
            _type(target, data, found)
        elif target.type == "field_declaration":
            marks = _marks(target, data)
            if "static" in marks and "constexpr" not in marks and "inline" in marks:
                # a static inline data member is a host variable defined here: its initialiser
                # (`= printf(...)`) runs at start-up
                field_name = next(
                    (node_text(c, data) for c in target.children if c.type == "field_identifier"),
                    "?",
                )
                found.append(
                    HostItem(
                        _line(target),
                        f"defines a type `{name}` with the static data member `{field_name}` "
                        "(a host variable)",
                        _DROP,
                    )
                )
            for child in target.named_children:
                if child.type in ("struct_specifier", "class_specifier", "union_specifier"):
                    _type(child, data, found)


def _defaulted(function: Node, data: bytes) -> bool:
    return any(
        c.type in ("default_method_clause", "delete_method_clause") for c in function.children
    )


def _declaration(node: Node, data: bytes, found: list[HostItem]) -> None:
    """A namespace-scope declaration: a prototype, an `extern`, a device variable, a constant."""
    marks = _marks(node, data)
    for child in node.named_children:
        if child.type in ("struct_specifier", "class_specifier", "union_specifier"):
            _type(child, data, found)
    declarators = node.children_by_field_name("declarator")
    objects = [d for d in declarators if not _is_function(d)]
    if not objects:
        return  # prototypes (a definition elsewhere is judged there)
    if marks & _DEVICE_VARIABLE or "constexpr" in marks:
        for declarator in objects:
            value = declarator.child_by_field_name("value")
            if value is not None and any(n.type == "lambda_expression" for n in walk_nodes(value)):
                what = f"defines `{_name_of(declarator, data)}` as a lambda (a host function)"
                found.append(HostItem(_line(node), what, _DROP))
        return
    type_node = node.child_by_field_name("type")
    type_text = " ".join(
        node_text(c, data)
        for c in node.children
        if c.type
        in (
            "storage_class_specifier",
            "type_qualifier",
            "primitive_type",
            "sized_type_specifier",
            "type_identifier",
            "qualified_identifier",
        )
    )
    scalar = type_node is not None and bool(_SCALAR_TYPES.match(type_text))
    for declarator in objects:
        name = _name_of(declarator, data)
        value = (
            declarator.child_by_field_name("value")
            if declarator.type == ("init_declarator")
            else None
        )
        if "extern" in marks and value is None:
            continue
        plain = declarator.type == "identifier" or (
            declarator.type == "init_declarator"
            and (inner := declarator.child_by_field_name("declarator")) is not None
            and inner.type == "identifier"
        )
        if "const" in marks and scalar and plain and value is not None and not _dynamic(value):
            continue
        class_type = type_node is not None and type_node.type in (
            "type_identifier",
            "template_type",
            "qualified_identifier",
        )
        if class_type and not scalar and type_node is not None:
            what = f"defines a host object `{name}` of class type `{node_text(type_node, data)}`"
            found.append(HostItem(_line(node), what + " (its constructor runs at start-up)", _DROP))
            continue
        if value is not None and _dynamic(value):
            found.append(
                HostItem(
                    _line(node),
                    f"defines a host variable `{name}` with a dynamic initialiser",
                    _DROP,
                )
            )
            continue
        found.append(
            HostItem(
                _line(node),
                f"defines a host variable `{name}` (only `__device__`"
                " / `__constant__` variables and `constexpr` or `const` scalar "
                "constants are allowed)",
                _DROP,
            )
        )


def _is_function(declarator: Node) -> bool:
    node: Node | None = declarator
    while node is not None:
        if node.type == "function_declarator":
            return True
        if node.type == "init_declarator":
            return False
        node = node.child_by_field_name("declarator")
    return False


def _name_of(declarator: Node, data: bytes) -> str:
    node: Node | None = declarator
    while node is not None:
        if node.type in ("identifier", "qualified_identifier"):
            return node_text(node, data)
        node = node.child_by_field_name("declarator")
    return node_text(declarator, data)


def _dynamic(value: Node) -> bool:
    stack = [value]
    while stack:
        node = stack.pop()
        if node.type in _DYNAMIC:
            return True
        stack.extend(node.children)
    return False


_ATTRIBUTE = re.compile(
    r"__attribute__\s*\(\s*\((?P<gnu>.*?)\)\s*\)|\[\s*\[(?P<std>.*?)\]\s*\]"
    r"|__declspec\s*\((?P<ms>[^)]*)\)",
    re.DOTALL,
)
# Words that only ever serve start-up hooks or hidden pragmas, however they are spelt around
# (a macro pasting `__attribute__` together still names them).
_HOOK_WORDS = re.compile(
    r"\b(?:_Pragma|__pragma|(?:__)?(?:constructor|destructor|init_priority)"
    r"(?:__)?)\b"
)


def _attributes(code: str) -> list[HostItem]:
    """Attributes other than the harmless few, anywhere in the code (`constructor`, `section`,
    `init_priority`, `alias`...: host start-up hooks and symbol tricks)."""
    bare = code_only(code)
    found: list[HostItem] = []
    spans = [m.span() for m in _ATTRIBUTE.finditer(bare)]
    for match in _HOOK_WORDS.finditer(bare):
        if any(start <= match.start() < end for start, end in spans):
            continue  # named below, as the attribute it is
        line = bare.count("\n", 0, match.start()) + 1
        found.append(HostItem(line, f"uses `{match.group(0)}` (a host start-up hook or pragma)"))
    for match in _ATTRIBUTE.finditer(bare):
        body = match.group("gnu") or match.group("std") or match.group("ms") or ""
        for word in re.findall(r"(?:\w+::)?\b([A-Za-z_]\w*)\s*(?:\([^()]*\))?", body):
            if word not in _ATTRIBUTES_OK:
                line = bare.count("\n", 0, match.start()) + 1
                found.append(
                    HostItem(
                        line,
                        f"uses the attribute `{word}` (only alignment, "
                        "inlining and `unused` attributes are allowed)",
                    )
                )
    return found


#: Standard headers only host code uses: a whole program's `#include`s, dropped with it.
_HOST_HEADERS = frozenset(
    {
        "iostream",
        "fstream",
        "sstream",
        "iomanip",
        "istream",
        "ostream",
        "vector",
        "string",
        "map",
        "unordered_map",
        "set",
        "unordered_set",
        "list",
        "deque",
        "queue",
        "stack",
        "chrono",
        "thread",
        "mutex",
        "condition_variable",
        "future",
        "random",
        "filesystem",
        "regex",
    }
)
#: Ways to say `__host__` other than the word (`host_defines.h`): never from a model.
_HOST_SPELLINGS = re.compile(r"\b(?:__host__|__location__|__annotate__)\b")


def _host_spellings(code: str) -> list[HostItem]:
    """`__host__` left after `device_only` removed it (it is called on text it has not
    rewritten too: `winner_text`, the raw reply) or spelt through `host_defines.h`'s macros."""
    bare = code_only(code)
    return [
        HostItem(
            bare.count("\n", 0, m.start()) + 1,
            f"uses `{m.group(0)}`: a reply's functions compile as device code only (write "
            "helpers `__device__`, not `__host__ __device__`)",
        )
        for m in _HOST_SPELLINGS.finditer(bare)
    ]


_DIRECTIVE_LINE = re.compile(r"[ \t]*#[ \t]*(\w+)(.*)", re.DOTALL)
_ARCH = "__CUDA_ARCH__"
_NOT_ARCH = re.compile(r"!\s*[\s(]*(?:defined\s*\(?\s*)?__CUDA_ARCH__\b")
_ARCH_BELOW = re.compile(
    r"__CUDA_ARCH__\s*(?:==|!=|<=?(?!<))|(?:==|!=|<=?|>=?)\s*__CUDA_ARCH__\b"
    r"|__CUDA_ARCH__\s*>=\s*0\b"
)
_ONLY_DEFINED_ARCH = re.compile(
    r"\s*(?:defined\s*(?:\(\s*__CUDA_ARCH__\s*\)|__CUDA_ARCH__)|\(?\s*__CUDA_ARCH__\s*\)?)\s*"
)
_HOST_TARGETS = re.compile(r"\b(?:NV_IS_HOST|NV_IF_ELSE_TARGET|NV_ANY_TARGET|NV_DISPATCH_TARGET)\b")
_BRANCH_FIX = (
    "a reply may not hold code only the host compiles: test the device architecture as "
    "`#if __CUDA_ARCH__ >= N` only"
)


def _host_branches(code: str) -> list[HostItem]:
    """Preprocessor branches only the host compile takes (`#ifndef __CUDA_ARCH__`, `#if
    !defined(__CUDA_ARCH__)`, the `#else` of `#ifdef __CUDA_ARCH__`, `__CUDA_ARCH__` compared
    below a version, `NV_IF_TARGET(NV_IS_HOST, ...)`), and a macro carrying `__CUDA_ARCH__`
    (it would hide such a test). A reply's functions are device functions, whose bodies the host
    compile never builds, and every namespace-scope item is checked in every branch; this rule
    keeps what a model sends readable as what it is."""
    found: list[HostItem] = []
    bare = code_only(code)
    groups: list[bool] = []  # per open `#if`: its test is `defined(__CUDA_ARCH__)` alone
    lines = bare.split("\n")
    row = 0
    while row < len(lines):
        line, first = lines[row], row + 1
        while line.endswith("\\") and row + 1 < len(lines):
            row += 1
            line = line[:-1] + " " + lines[row]
        row += 1
        match = _DIRECTIVE_LINE.fullmatch(line)
        if match is None:
            continue
        directive, rest = match.group(1), match.group(2)

        def refuse(what: str, at: int = first) -> None:
            found.append(HostItem(at, f"{what}: {_BRANCH_FIX}"))

        if directive in ("if", "ifdef", "ifndef"):
            groups.append(
                (directive == "ifdef" and rest.strip() == _ARCH)
                or (directive == "if" and bool(_ONLY_DEFINED_ARCH.fullmatch(rest)))
            )
        if directive == "ifndef" and rest.strip() == _ARCH:
            refuse("holds a host-only branch (`#ifndef __CUDA_ARCH__`)")
        elif directive in ("if", "elif") and _ARCH in rest:
            if _NOT_ARCH.search(rest) or _ARCH_BELOW.search(rest):
                refuse(f"holds a host-only branch (`#{directive} {' '.join(rest.split())}`)")
        elif directive == "define" and _ARCH in rest:
            refuse("defines a macro that carries `__CUDA_ARCH__`")
        if directive in ("else", "elif", "elifdef", "elifndef") and groups and groups[-1]:
            refuse(f"holds a host-only branch (the `#{directive}` of `#ifdef __CUDA_ARCH__`)")
        if directive == "endif" and groups:
            groups.pop()
    for match in _HOST_TARGETS.finditer(bare):
        at = bare.count("\n", 0, match.start()) + 1
        found.append(HostItem(at, f"names `{match.group(0)}` (host code): {_BRANCH_FIX}"))
    return found


#: Assembler directives that place code or data in a section (start-up tables included).
_SECTION_DIRECTIVES = re.compile(
    r"\.(?:(?:push|pop|sub)?section|previous|(?:pre)?init_array|fini_array|ctors|dtors|globl"
    r"|incbin|symver)\b"
)


def _section_directives(code: str) -> list[HostItem]:
    """Assembler section directives anywhere in the text, string literals included (an `asm`
    statement's text is one): inline asm is for device instructions, never for sections."""
    return [
        HostItem(
            code.count("\n", 0, m.start()) + 1,
            f"holds the assembler directive `{m.group(0)}` (inline `asm` may not place code "
            "or data in a section)",
        )
        for m in _SECTION_DIRECTIVES.finditer(code)
    ]


_SPLICE = re.compile(r"\\[ \t]*\r?\n")
_ALTERNATIVE_HASH = re.compile(r"^[ \t]*(%:|\?\?=)", re.MULTILINE)


def _alternative_directives(code: str) -> list[HostItem]:
    """A directive spelled with the digraph `%:` or the trigraph `??=`: the preprocessor reads
    it as `#`, tree-sitter does not (it took `%:include` for a declaration spanning the kernel).
    No honest reply needs the spelling; refused, never dropped."""
    return [
        HostItem(
            code.count("\n", 0, m.start()) + 1,
            f"spells a directive with `{m.group(1)}`: write `#`",
        )
        for m in _ALTERNATIVE_HASH.finditer(code)
    ]


def _joining_splices(code: str) -> list[HostItem]:
    """Line splices (backslash-newline, trailing blanks allowed as gcc allows them) with a
    character other than a blank on both sides: the compiler joins the two into one token
    (`__ho\\` + `st__` is `__host__`, `".pushsec\\` + `tion"` a section directive), which every
    check here, reading lines, would not see. A splice after or before a blank (a multi-line
    `#define`'s ` \\`) joins nothing."""
    found = []
    for match in _SPLICE.finditer(code):
        before = code[match.start() - 1] if match.start() > 0 else " "
        after = code[match.end()] if match.end() < len(code) else " "
        if not before.isspace() and not after.isspace():
            line = code.count("\n", 0, match.start()) + 1
            found.append(
                HostItem(
                    line,
                    f"joins `{before}` and `{after}` across a line splice (a backslash at the end "
                    "of the line): put a blank before the backslash",
                )
            )
    return found


#: Macros that tell which compiler, toolkit, host, build mode, time or place a unit is built
#: with: the judge builds a candidate with NVRTC (`__CUDACC_RTC__`, the wheel's toolkit) now,
#: the user's program is built by nvcc and a host compiler later.
_BUILD_IDENTITY = re.compile(
    r"\b(?:__CUDACC_RTC\w*|__NVCC__|__CUDACC_VER\w*|__CUDACC_(?:RDC|EWP|DEBUG|RELAXED_CONSTEXPR"
    r"|EXTENDED_LAMBDA)__|__CUDA_API_VER\w*|CUDART_VERSION|__CUDART_API_VERSION|CUDA_VERSION"
    r"|__NVCC_DIAG_PRAGMA_SUPPORT__|__GNU[CG]\w*|__clang\w*|_MSC_\w+|__INTEL\w*|__NVCOMPILER\w*"
    r"|__EDG\w*|__linux\w*|__unix\w*|_WIN\d\d|__x86_64\w*|__amd64\w*|__aarch64__|__OPTIMIZE\w*"
    r"|__DATE__|__TIME__|__TIMESTAMP__|__COUNTER__|__INCLUDE_LEVEL__)\b"
)


def _build_identity(code: str) -> list[HostItem]:
    """Names that tell the judge's build from the user's (`#ifndef __CUDACC_RTC__`, `__NVCC__`,
    the toolkit's or the host compiler's version, `__TIME__`): a kernel testing them is judged
    on one text and run as another, or carries host code NVRTC never reads."""
    bare = code_only(code)
    return [
        HostItem(
            bare.count("\n", 0, m.start()) + 1,
            f"names `{m.group(0)}`, which tells which compiler, toolkit, host or time builds "
            "it: the kernel judged must be the kernel the user's program runs",
        )
        for m in _BUILD_IDENTITY.finditer(bare)
    ]


_ASM_WORD = re.compile(r"\b(?:asm|__asm__|__asm)\b")
_DEFINE = re.compile(r"(?m)^[ \t]*#[ \t]*define[ \t]+(\w+)((?:[^\n]*\\\n)*[^\n]*)")


def _asm_outside_bodies(code: str) -> list[HostItem]:
    """`asm` (or a macro that carries it) anywhere but inside a function body: a reply's
    functions are device functions, so `asm` in a body is device instructions; elsewhere it is
    host assembly or an `asm` label, which renames a symbol (`__device__ int v asm("optind")`
    gives the host shadow libc's name, and the file's host code reads it)."""
    text, _ = _with_specifier_macros(code)
    bare = code_only(text)
    words, inside_define = _carried(bare, _ASM_WORD)
    tree, _data = parse_tree(text)
    lines = text.split("\n")
    found: list[HostItem] = []
    for match in words.finditer(bare):
        if any(start <= match.start() < end for start, end in inside_define):
            continue  # judged where the macro is used
        row = bare.count("\n", 0, match.start())
        column = match.start() - (bare.rfind("\n", 0, match.start()) + 1)
        point = (row, len(lines[row][:column].encode("utf-8", errors="surrogatepass")))
        node: Node | None = tree.root_node.descendant_for_point_range(point, point)
        while node is not None and node.type != "compound_statement":
            node = node.parent
        if node is None:
            found.append(
                HostItem(
                    row + 1,
                    f"uses `{match.group(0)}` outside a function body (inline `asm` is for "
                    "device instructions in a `__device__` function's body; no `asm` labels)",
                )
            )
    return found


_ATTRIBUTE_WORD = re.compile(r"\b(?:__attribute__|__attribute|__declspec)\b(?!\s*\()")


def _hidden_attributes(code: str) -> list[HostItem]:
    """An attribute the attribute check cannot read: `__attribute__` / `__declspec` without its
    parentheses (`#define A __attribute__` then `A((section(...)))`), or a macro whose body
    leaves a bracket open (`#define L [` then `L[gnu::section(...)]]`)."""
    bare = code_only(code)
    found = [
        HostItem(
            bare.count("\n", 0, m.start()) + 1,
            f"uses `{m.group(0)}` without its parentheses (an attribute spelt through a macro)",
        )
        for m in _ATTRIBUTE_WORD.finditer(bare)
    ]
    for match in _DEFINE.finditer(bare):
        body = match.group(2)
        if body.count("[") != body.count("]"):
            found.append(
                HostItem(
                    bare.count("\n", 0, match.start()) + 1,
                    f"defines `{match.group(1)}` with an unbalanced `[` or `]` (an attribute "
                    "spelt through a macro)",
                )
            )
    return found


_PLACE = re.compile(r"\b(?:__FILE__|__BASE_FILE__|__FILE_NAME__|__LINE__)\b")


def _place_names(code: str) -> list[HostItem]:
    """`__FILE__` / `__LINE__` (or a macro carrying them) used in what is left of a reply once
    its host items are dropped: the judge's unit and the user's file differ in name and lines,
    so a kernel testing them is judged on one path and run on another. A whole program's
    `CUDA_CHECK` macro, used only by its dropped host code, passes."""
    bare = code_only(code)
    words, spans = _carried(bare, _PLACE)
    return [
        HostItem(
            bare.count("\n", 0, m.start()) + 1,
            f"uses `{m.group(0)}`, whose value differs between the judge's unit and the "
            "user's file (its name and lines)",
        )
        for m in words.finditer(bare)
        if not any(start <= m.start() < end for start, end in spans)
    ]


def _carried(bare: str, word: re.Pattern[str]) -> tuple[re.Pattern[str], list[tuple[int, int]]]:
    """`word`, or any macro of `bare` (code, comments and literals blanked) whose body names it
    or another such macro (followed transitively), as one pattern; and every `#define`'s span."""
    defines = [(m.group(1), m.group(2), m.span()) for m in _DEFINE.finditer(bare)]
    carriers: set[str] = set()
    grown = True
    while grown:
        grown = False
        for name, body, _span in defines:
            if name not in carriers and (
                word.search(body) or set(re.findall(r"\w+", body)) & carriers
            ):
                carriers.add(name)
                grown = True
    if not carriers:
        return word, [span for _n, _b, span in defines]
    names = "|".join(map(re.escape, carriers))
    return re.compile(word.pattern + r"|\b(?:" + names + r")\b"), [s for _n, _b, s in defines]
