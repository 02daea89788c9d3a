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
from dataclasses import dataclass

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
    """Something in a reply that is not device-side: its line (1-based) and what it is."""

    line: int
    what: str  # "defines a host function `main`"

    def describe(self) -> str:
        return f"line {self.line} {self.what}"


MAX_ITEMS_SHOWN = 5


def reply_refusal(code: str, where: str = "") -> str | None:
    """Why `code` (a reply's code) may not become a candidate, one line per finding, or None:
    hidden characters first (they make the rest unreadable), then host code. `where`: said after
    each line number (" of the candidate": `fsr.prompts` shows the model its code there)."""
    hidden = hidden_characters(code)
    if hidden:
        return "\n".join(
            f"hidden characters are not allowed in a reply: {h.describe()}"
            + (f" (line {h.line}{where})" if where else "")
            for h in hidden[:MAX_ITEMS_SHOWN]
        )
    items = host_items(code)
    if items:
        return "\n".join(
            f"host code is not allowed in a reply: {i.describe()}"
            + (f" (line {i.line}{where})" if where else "")
            for i in items[:MAX_ITEMS_SHOWN]
        )
    return None


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
    return sorted(set(found), key=lambda item: item.line)


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


def _scope(node: Node, data: bytes, found: list[HostItem], macros: frozenset[str]) -> None:
    """Check every item of a namespace-scope list (the file, a namespace, `extern "C" {}`, the
    branches of `#if`)."""
    for child in node.named_children:
        _item(child, data, found, macros)


def _item(node: Node, data: bytes, found: list[HostItem], macros: frozenset[str]) -> None:
    kind = node.type

    def host(what: str) -> None:
        found.append(HostItem(_line(node), what))

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
            host(f"redefines the reserved name `{text}` (`#define {text}`)")
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
                    "`#pragma unroll` and `nv_diag_*` are allowed"
                )
        elif directive == "#undef":
            if _RESERVED_MACRO.fullmatch(arg):
                host(f"undefines the reserved name `{arg}`")
        elif directive not in _SAFE_DIRECTIVES:
            host(f"holds the directive `{directive}`")
        return
    if kind in ("preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif", "preproc_elifdef"):
        for child in node.named_children:
            if child == node.child_by_field_name("condition") or child == node.child_by_field_name(
                "name"
            ):
                continue
            _item(child, data, found, macros)
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
        host("holds namespace-scope `asm`")
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
                        _line(target), f"defines a type `{name}` with {what} (a host function)"
                    )
                )
        elif target.type in ("struct_specifier", "class_specifier", "union_specifier"):
            _type(target, data, found)
        elif target.type == "field_declaration":
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
            found.append(HostItem(_line(node), what + " (its constructor runs at start-up)"))
            continue
        if value is not None and _dynamic(value):
            found.append(
                HostItem(
                    _line(node), f"defines a host variable `{name}` with a dynamic initialiser"
                )
            )
            continue
        found.append(
            HostItem(
                _line(node),
                f"defines a host variable `{name}` (only `__device__`"
                " / `__constant__` variables and `constexpr` or `const` scalar "
                "constants are allowed)",
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
        for word in re.findall(r"(?:\w+::)?(\w+)\s*(?:\([^()]*\))?", body):
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
