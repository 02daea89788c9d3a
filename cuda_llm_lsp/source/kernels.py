"""Find `__global__` kernels in CUDA source with tree-sitter-cuda.

Gives each kernel's parameters, ranges (whole definition, name, body), template parameters,
`extern "C"` linkage, launch bounds, the `/* @cuda-llm ... */` spec block above it, and the
template instantiations seen at launch sites. Robust to half-typed code: a kernel whose
definition does not parse is skipped, never raises.
"""

from __future__ import annotations

import re
import threading
from bisect import bisect_right
from collections.abc import Mapping
from dataclasses import dataclass

import tree_sitter_cuda
from tree_sitter import Language, Node, Parser, Query, QueryCursor, Tree

from cuda_llm_lsp.source.brackets import ANGLES, close_index, split_top
from cuda_llm_lsp.source.text import Point, Span, normalized

SPEC_MARKER = "@cuda-llm"
_LAUNCH_MARKER = re.compile(r"@cuda-llm[ \t]+launch(?=\s|\*/)")


@dataclass(frozen=True)
class Param:
    index: int
    name: str
    c_type: str  # the declared type as written, without the name: "const float* __restrict__"
    base_type: str  # element/scalar type without qualifiers or '*': "float", "T", "__nv_bfloat16"
    is_pointer: bool
    is_const: bool  # for pointers: the pointee is const


@dataclass(frozen=True)
class SpecBlock:
    """A `/* @cuda-llm ... */` comment directly above a kernel."""

    span: Span  # the whole comment, from '/*' to '*/'
    toml: str  # the text between the '@cuda-llm' marker and '*/', line structure kept
    toml_first_line: int  # file line (0-based) of the first line of `toml`
    toml_first_column: int  # column of `toml`'s first character on that line


@dataclass(frozen=True)
class Kernel:
    name: str
    params: tuple[Param, ...]
    span: Span  # whole definition, including `template<...>` and `extern "C"` prefixes
    name_span: Span
    body_span: Span  # from '{' to '}' inclusive
    is_extern_c: bool
    template_params: tuple[str, ...]  # names of template parameters; () if not a template
    launch_bounds: str | None  # the text inside __launch_bounds__(...)
    spec: SpecBlock | None
    instantiations: tuple[str, ...]  # e.g. ("k<float, 128>",) from launch sites in the file
    scope: str = ""  # enclosing namespaces, "ns::inner::" ("" at global scope)
    # a candidate's `/* @cuda-llm launch ... */` block (source/spec/launch.py), never the spec
    launch_block: SpecBlock | None = None
    # the macro its `__global__` came through (`__kernel`), "" where `__global__` is written:
    # such a kernel gets diagnostics and figures; the GPU jobs find kernels in the text alone
    via_macro: str = ""

    @property
    def is_template(self) -> bool:
        return bool(self.template_params)

    @property
    def qualified_name(self) -> str:
        return self.scope + self.name

    def scoped(self, expression: str) -> str:
        """`k<4>` of a kernel in `namespace ns` as NVRTC resolves names (at global scope):
        `ns::k<4>`; an expression already qualified stays as it is."""
        if not self.scope or expression.startswith((self.scope, "::")):
            return expression
        return self.scope + expression


_LANGUAGE = Language(tree_sitter_cuda.language())
_FUNCTIONS = Query(_LANGUAGE, "(function_definition) @function")
_LAUNCHES = Query(
    _LANGUAGE,
    "(call_expression function: (template_function) @callee (kernel_call_syntax))",
)
_INSTANTIATIONS = Query(
    _LANGUAGE, "(template_instantiation (function_declarator (template_function) @callee))"
)
_POINTER_DECLARATORS = (
    "pointer_declarator",
    "abstract_pointer_declarator",
    "array_declarator",
    "abstract_array_declarator",
)
_local = threading.local()  # tree-sitter parsers are not thread-safe; one per thread


def parse_tree(text: str) -> tuple[Tree, bytes]:
    """The tree-sitter-cuda tree of `text` and the UTF-8 bytes it was built from (those of
    `normalized(text)`: rows then count lone-CR line breaks as LSP does)."""
    parser = getattr(_local, "parser", None)
    if parser is None:
        parser = _local.parser = Parser(_LANGUAGE)
    data = normalized(text).encode("utf-8", errors="surrogatepass")
    masked = _mask_instantiation_lines(_mask_unknown_attributes(_mask_empty_define_tails(data)))
    return parser.parse(masked), data


# `#define ROCM_ONLY(x) ` / `#define EMPTY \t`: a macro with no body and blanks before the line's
# end. tree-sitter-cuda then reads the next line as its body: causal-conv1d's `#else` after one
# was lost (its `#include <hipcub/hipcub.hpp>` taken as unconditional), and a kernel on the next
# line went unlisted. (A `/* comment */` before the blanks is left alone.)
_EMPTY_DEFINE_TAIL = re.compile(
    rb"^([ \t]*#[ \t]*define[ \t]+\w+(?:\([^()\n]*\))?)([ \t]+)(\r?\n)", re.MULTILINE
)


def _mask_empty_define_tails(data: bytes) -> bytes:
    """`data` with those blanks moved past the line break (same length, rows unchanged; only
    tree-sitter's columns on the next line move, never a byte offset)."""
    if b"define" not in data:
        return data
    return _EMPTY_DEFINE_TAIL.sub(lambda m: m.group(1) + m.group(3) + m.group(2), data)


# Attributes tree-sitter-cuda does not know; blanked (same length) before parsing so the kernel
# after them is still found and every byte offset stays exact. `__align__(8)` on an anonymous
# struct inside a union (cuda-samples' dct8x8) otherwise ends the union early: its next member
# reads as a namespace-scope host variable and was blanked.
_UNKNOWN_ATTRIBUTES = re.compile(
    rb"\b(?:__cluster_dims__|__maxnreg__|__(?:builtin_)?align__)\s*\([^()]*\)"
)


# `#define INSTANTIATE(T) template void launch<T>(...);`: a macro whose body is an explicit
# instantiation (`\` continuations allowed before it)
_INSTANTIATION_MACRO = re.compile(
    rb"^[ \t]*#[ \t]*define[ \t]+(\w+)\([^)\n]*\)(?:[ \t]|\\\n)*template\b(?![ \t]*<)", re.MULTILINE
)


def _mask_instantiation_lines(data: bytes) -> bytes:
    """`data` with each line that invokes, alone, such a macro of the text made spaces.

    DeepSpeed's `INSTANTIATE_LAUNCH_BIAS_GELU(__half)` lines often have no `;`: tree-sitter
    read them and the kernel after them as one declaration, whose head lost its `__global__`
    (the kernel went unlisted, and the device unit blanked its head). What NVRTC reads is the
    text as written (the device unit blanks those of host templates)."""
    if b"#" not in data or b"template" not in data:
        return data
    names = _INSTANTIATION_MACRO.findall(data)
    if not names:
        return data
    invoked = b"|".join(re.escape(n) for n in names)
    alone = re.compile(
        rb"^[ \t]*(?:" + invoked + rb")[ \t]*\([^;{}\n]*\)[ \t]*;?[ \t]*$", re.MULTILINE
    )
    return alone.sub(lambda m: b" " * len(m.group(0)), data)


def _mask_unknown_attributes(data: bytes) -> bytes:
    if b"__cluster_dims__" not in data and b"__maxnreg__" not in data and b"align__" not in data:
        return data
    return _UNKNOWN_ATTRIBUTES.sub(lambda m: b" " * len(m.group(0)), data)


def find_kernels(
    text: str,
    parsed: tuple[Tree, bytes] | None = None,
    macros: Mapping[str, bool] | None = None,
) -> list[Kernel]:
    """Every `__global__` function definition in `text`, in source order.

    `parsed`: `parse_tree(text)` when the caller already has it (one parse per analysis).
    `macros`: the macros known for `text` that stand for `__global__`, each with whether it
    makes the kernel `extern "C"` (`kernel_macros` of its own and its headers' `#define`s:
    `DeviceUnit.kernel_macros`): a definition whose head, before its name, names one
    (`#define __kernel extern "C" __global__`: LAMMPS's Geryon) is a kernel too. None: only a
    literal `__global__` makes a kernel.
    """
    tree, data = parsed or parse_tree(text)
    points = Offsets(text, data)
    instantiations = _instantiations(tree.root_node, data)
    by_macro = macros or {}
    kernels: list[Kernel] = []
    functions = QueryCursor(_FUNCTIONS).captures(tree.root_node).get("function", [])
    for node in sorted(functions, key=lambda node: node.start_byte):  # source order
        kernel = _kernel(node, data, points, instantiations, by_macro)
        if kernel is not None:
            kernels.append(kernel)
    kernels.sort(key=lambda k: k.span.start)
    return kernels


# `extern "C"` in a replacement list (its string is what makes the linkage)
_EXTERN_C = re.compile(r'\bextern\s*"C"')
# what no word of a replacement list is read from: comments and string or character literals
_NOT_WORDS = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.DOTALL)
_WORD = re.compile(r"[A-Za-z_]\w*")


def kernel_macros(definitions: Mapping[str, str]) -> dict[str, bool]:
    """Of object-like macro `definitions` (name -> replacement list as written), those whose
    expansion through the others holds `__global__`, each with whether it holds `extern "C"`
    too: `#define A B` with `#define B extern "C" __global__` gives {A: True, B: True}.

    Words in comments and string literals do not count. Linear in the definitions' size (a
    project's headers define thousands): each word is followed back to the macros naming it.
    Nothing is executed: the texts are only read."""
    if not any("__global__" in body for body in definitions.values()):
        return {}
    used_by: dict[str, list[str]] = {}  # a word -> the macros whose replacement names it
    extern_c: list[str] = []
    for name, body in definitions.items():
        kept = _NOT_WORDS.sub(lambda m: m.group(0) if m.group(0) == '"C"' else " ", body)
        if _EXTERN_C.search(kept):
            extern_c.append(name)
        for word in set(_WORD.findall(_NOT_WORDS.sub(" ", body))):
            used_by.setdefault(word, []).append(name)
    is_global = _reaching(["__global__"], used_by)
    is_global.discard("__global__")
    linked = _reaching(extern_c, used_by)
    return {name: name in linked for name in definitions if name in is_global}


def _reaching(seeds: list[str], used_by: Mapping[str, list[str]]) -> set[str]:
    """`seeds` and every macro whose expansion names one of them, through `used_by`."""
    found = set(seeds)
    todo = list(seeds)
    while todo:
        for name in used_by.get(todo.pop(), ()):
            if name not in found:
                found.add(name)
                todo.append(name)
    return found


def launched_templates(text: str, parsed: tuple[Tree, bytes] | None = None) -> dict[str, list[str]]:
    """Template kernel instantiations `text` launches or instantiates explicitly, by kernel
    name (unqualified): for kernels defined elsewhere (an included header)."""
    tree, data = parsed or parse_tree(text)
    return _instantiations(tree.root_node, data)


def kernel_at(kernels: list[Kernel], point: Point) -> Kernel | None:
    """The kernel whose definition (or spec block) contains `point`."""
    for kernel in kernels:
        start = kernel.spec.span.start if kernel.spec else kernel.span.start
        if start <= point <= kernel.span.end:
            return kernel
    return None


class Offsets:
    """Tree-sitter's byte positions in `data` (from `parse_tree(text)`) as positions in `text`:
    points (line, code-point column) and character offsets.

    The one converter of the source modules. Each line's first byte (and first character) is
    found once; a position is its line's start plus the part of that line before it, decoded
    alone, so converting every node of a file costs the file's size, not its square (nothing
    is decoded for an ASCII text, or an ASCII line).
    """

    def __init__(self, text: str, data: bytes) -> None:
        self.text = text
        self.data = data
        self.ascii = len(text) == len(data)
        self._byte_starts: list[int] | None = None
        self._char_starts: list[int] | None = None

    def point(self, byte: int) -> Point:
        row = self._row(byte)
        return Point(row, self._column(row, byte - self._bytes()[row]))

    def point_of(self, row: int, byte_column: int) -> Point:
        """A tree-sitter point (`node.start_point`: row, byte column) as a `Point`."""
        return Point(row, self._column(row, byte_column))

    def span(self, node: Node) -> Span:
        # from its bytes, not tree-sitter's points: a mask may move a line's blanks to the next
        # line's start (`_mask_empty_define_tails`), which shifts the points' columns there
        return Span(self.point(node.start_byte), self.point(node.end_byte))

    def offset(self, byte: int) -> int:
        """The character offset in `text` of the byte offset `byte` of `data`."""
        if self.ascii:
            return byte
        row = self._row(byte)
        if self._char_starts is None:
            self._char_starts = [0, *(m.end() for m in re.finditer("\n", normalized(self.text)))]
        return self._char_starts[row] + self._column(row, byte - self._bytes()[row])

    def _bytes(self) -> list[int]:
        if self._byte_starts is None:
            self._byte_starts = [0, *(m.end() for m in re.finditer(b"\n", self.data))]
        return self._byte_starts

    def _row(self, byte: int) -> int:
        return max(bisect_right(self._bytes(), byte) - 1, 0)

    def _column(self, row: int, byte_column: int) -> int:
        if self.ascii:
            return byte_column
        starts = self._bytes()
        start = starts[row] if row < len(starts) else len(self.data)
        part = self.data[start : start + byte_column]
        if part.isascii():
            return len(part)
        try:
            return len(part.decode("utf-8", errors="surrogatepass"))
        except UnicodeDecodeError:  # a position inside a character: count what is there
            return len(part.decode("utf-8", errors="replace"))


def node_text(node: Node, data: bytes) -> str:
    """The text of `node` (of the tree parsed from `data`)."""
    return data[node.start_byte : node.end_byte].decode("utf-8", errors="replace")


def _kernel(
    node: Node,
    data: bytes,
    points: Offsets,
    instantiations: dict[str, list[str]],
    by_macro: Mapping[str, bool],
) -> Kernel | None:
    children = node.children
    declarator = node.child_by_field_name("declarator")
    head = _head_words(node, declarator) if by_macro else []
    words = [word for word in (node_text(n, data) for n in head) if word in by_macro]
    named = [by_macro[word] for word in words]
    written = any(child.type == "__global__" for child in children)
    if not named and not written:
        return None
    while declarator is not None and declarator.type != "function_declarator":
        # e.g. attributes or parenthesised declarators wrapping the function declarator
        declarator = declarator.child_by_field_name("declarator")
    body = node.child_by_field_name("body")
    if declarator is None or body is None:
        return None
    name_node = declarator.child_by_field_name("declarator")
    parameters = declarator.child_by_field_name("parameters")
    if name_node is None or parameters is None or name_node.type != "identifier":
        return None
    name = node_text(name_node, data)

    outer = node
    template_params: tuple[str, ...] = ()
    is_extern_c = any(named)  # a macro's `extern "C"`
    parent = node.parent
    if parent is not None and parent.type == "template_declaration":
        template_params = _template_params(parent, data)
        outer = parent
        parent = parent.parent
    if parent is not None and parent.type == "declaration_list":
        linkage = parent.parent
        if linkage is not None and linkage.type == "linkage_specification":
            is_extern_c = is_extern_c or _is_extern_c(linkage, data)
    elif parent is not None and parent.type == "linkage_specification":
        is_extern_c = is_extern_c or _is_extern_c(parent, data)
        outer = parent

    launch_bounds = next(
        (_launch_bounds_text(child, data) for child in children if child.type == "launch_bounds"),
        None,
    )
    if launch_bounds is None and head:  # after a macro, tree-sitter reads it into an ERROR node
        bounds = _MISREAD_BOUNDS.search(data, node.start_byte, declarator.start_byte)
        launch_bounds = bounds.group(1).decode("utf-8", "replace").strip() if bounds else None
    return Kernel(
        name=name,
        params=tuple(_params(parameters, data)),
        span=points.span(outer),
        name_span=points.span(name_node),
        body_span=points.span(body),
        is_extern_c=is_extern_c,
        template_params=template_params,
        launch_bounds=launch_bounds,
        spec=_spec_block(outer, data, points),
        launch_block=_spec_block(outer, data, points, launch=True),
        instantiations=tuple(instantiations.get(name, ())) if template_params else (),
        scope=_scope(node, data),
        via_macro="" if written else words[0],
    )


# `__launch_bounds__(128, 2)` in a head tree-sitter misread (no `launch_bounds` node)
_MISREAD_BOUNDS = re.compile(rb"\b__launch_bounds__\s*\(([^()]*)\)")


def _head_words(node: Node, declarator: Node | None) -> list[Node]:
    """The identifiers of a function definition's head, before its declarator: the type, and
    what tree-sitter read into an ERROR node there (`__kernel void f()` is a type `__kernel`,
    then `void` in an ERROR node). Comments and strings hold no identifier node."""
    if declarator is None:
        return []
    words: list[Node] = []
    todo = [c for c in node.children if c.end_byte <= declarator.start_byte]
    while todo:
        child = todo.pop()
        if child.type in ("identifier", "type_identifier"):
            words.append(child)
        elif child.type not in ("comment", "string_literal", "raw_string_literal"):
            todo.extend(child.children)
    return words


def _is_extern_c(linkage: Node, data: bytes) -> bool:
    value = linkage.child_by_field_name("value")
    return value is not None and node_text(value, data).strip('"') == "C"


def _launch_bounds_text(node: Node, data: bytes) -> str:
    text = node_text(node, data)
    start, end = text.find("("), text.rfind(")")
    return text[start + 1 : end].strip() if 0 <= start < end else ""


def _template_params(template: Node, data: bytes) -> tuple[str, ...]:
    plist = template.child_by_field_name("parameters")
    if plist is None:
        return ()
    names: list[str] = []
    for param in plist.named_children:
        identifiers = [
            c for c in _walk(param) if c.type in ("type_identifier", "identifier")
        ]  # `typename T`, `typename T = Vec`: the first identifier is the name, a default follows
        declared = param.child_by_field_name("declarator") or param.child_by_field_name("name")
        if declared is not None:
            names.append(node_text(declared, data))
        elif identifiers:
            names.append(node_text(identifiers[0], data))
    return tuple(names)


def _walk(node: Node) -> list[Node]:
    out = [node]
    for child in node.children:
        out.extend(_walk(child))
    return out


def _params(parameters: Node, data: bytes) -> list[Param]:
    params: list[Param] = []
    for decl in parameters.named_children:
        if decl.type not in ("parameter_declaration", "optional_parameter_declaration"):
            continue
        type_node = decl.child_by_field_name("type")
        declarator = decl.child_by_field_name("declarator")
        base_type = node_text(type_node, data) if type_node is not None else ""
        leading_const = any(
            c.type == "type_qualifier" and node_text(c, data) == "const"
            for c in decl.children
            if declarator is None or c.start_byte < declarator.start_byte
        )
        is_pointer = False
        name = ""
        node = declarator
        while node is not None:
            if node.type in _POINTER_DECLARATORS:
                is_pointer = True
            if node.type == "identifier":
                name = node_text(node, data)
                break
            inner = node.child_by_field_name("declarator")
            if inner is None:
                inner = next((c for c in node.named_children if c.type == "identifier"), None)
            node = inner
        full = node_text(decl, data)
        if name:
            # the declared type is the declaration without its name (keep '*' and qualifiers)
            cut = full.rfind(name)
            c_type = (full[:cut] + full[cut + len(name) :]).strip()
        else:
            c_type = full.strip()
        params.append(
            Param(
                index=len(params),
                name=name,
                c_type=re.sub(r"\s+", " ", c_type),
                base_type=re.sub(r"\s+", " ", base_type),
                is_pointer=is_pointer,
                is_const=leading_const,
            )
        )
    return params


def _spec_block(
    outer: Node, data: bytes, points: Offsets, *, launch: bool = False
) -> SpecBlock | None:
    """The nearest `/* @cuda-llm` comment above `outer`, with only comments between; with
    `launch`, the nearest `/* @cuda-llm launch` one (which is never taken for the spec)."""
    sibling = outer.prev_sibling
    while sibling is not None and sibling.type == "comment":
        text = node_text(sibling, data)
        if text.startswith("/*") and text[2:].lstrip().startswith(SPEC_MARKER):
            is_launch = _LAUNCH_MARKER.match(text, text.index(SPEC_MARKER))
            if bool(is_launch) != launch:
                sibling = sibling.prev_sibling
                continue
            span = points.span(sibling)
            marker_end = text.index(SPEC_MARKER) + len(SPEC_MARKER)
            body_start = is_launch.end() if is_launch else marker_end
            toml = text[body_start : len(text) - 2 if text.endswith("*/") else len(text)]
            before = text[:body_start]
            line = span.start.line + before.count("\n")
            column = (
                span.start.column + len(before)
                if "\n" not in before
                else len(before) - before.rfind("\n") - 1
            )
            return SpecBlock(span=span, toml=toml, toml_first_line=line, toml_first_column=column)
        sibling = sibling.prev_sibling
    return None


def _scope(node: Node, data: bytes) -> str:
    names: list[str] = []
    parent = node.parent
    while parent is not None:
        if parent.type == "namespace_definition":
            name = parent.child_by_field_name("name")
            if name is not None:
                names.append(node_text(name, data))
        parent = parent.parent
    return "".join(f"{n}::" for n in reversed(names))


def _instantiations(root: Node, data: bytes) -> dict[str, list[str]]:
    """Template kernel instantiations named at `<<<>>>` launch sites and explicit instantiations."""
    found: dict[str, list[str]] = {}
    for query in (_LAUNCHES, _INSTANTIATIONS):
        # tree-sitter gives captures out of document order on some large files (and not the
        # same order in every process): "the first instantiation launched" must be the first
        callees = QueryCursor(query).captures(root).get("callee", [])
        for callee in sorted(callees, key=lambda node: node.start_byte):
            name_node = callee.child_by_field_name("name")
            if name_node is None:
                continue
            name = node_text(name_node, data).split("::")[-1]
            expression = re.sub(r"\s+", " ", node_text(callee, data))
            expression = _with_constants(expression, callee, data)
            if expression not in found.setdefault(name, []):
                found[name].append(expression)
    for name, expression in _macro_instantiations(data.decode("utf-8", errors="replace")):
        if expression not in found.setdefault(name, []):
            found[name].append(expression)
    return found


# `#define MAKE(a, b) template __global__ void k<a, b>(...);` (its lines spliced)
_FUNCTION_MACRO = re.compile(
    r"^[ \t]*#[ \t]*define[ \t]+(\w+)\(([^()]*)\)((?:[^\n\\]|\\.)*)", re.M | re.S
)
_EXPLICIT_KERNEL = re.compile(r"\btemplate\s+(?:__global__\s+)?void\s+(\w+)\s*<")
_MAX_MACRO_INSTANCES = 4096


def _macro_instantiations(text: str) -> list[tuple[str, str]]:
    """(kernel name, instance) of each explicit instantiation a function-like macro of `text`
    writes where `text` invokes it at the start of a line: bitsandbytes' kernels.cu instantiates
    its kernels by `MAKE_Optimizer32bit1State(MOMENTUM, half)` lines. Text only (the macro's
    parameters replaced by the invocation's arguments); a body that pastes or stringizes
    tokens (`#`, `##`) is not followed."""
    found: list[tuple[str, str]] = []
    for define in _FUNCTION_MACRO.finditer(text):
        macro, body = define.group(1), define.group(3).replace("\\\n", " ")
        if "#" in body or "template" not in body:
            continue
        parameters = split_top(define.group(2))
        templates = []
        for match in _EXPLICIT_KERNEL.finditer(body):
            written = _angle_text(body, match.end() - 1)
            if written is not None:
                templates.append((match.group(1), written))
        if not templates:
            continue
        invocation = re.compile(rf"^[ \t]*{re.escape(macro)}[ \t]*\(", re.M)
        for call in invocation.finditer(text):
            arguments = _call_arguments(text, call.end() - 1)
            if arguments is None or len(arguments) != len(parameters):
                continue
            values = dict(zip(parameters, arguments, strict=True))
            for kernel, template_arguments in templates:
                replaced = _substituted(template_arguments, values)
                found.append((kernel, re.sub(r"\s+", " ", f"{kernel}<{replaced}>")))
                if len(found) >= _MAX_MACRO_INSTANCES:
                    return found
    return found


def _substituted(text: str, values: Mapping[str, str]) -> str:
    """`text` with each word that names a macro parameter replaced by its argument."""
    return re.sub(r"[A-Za-z_]\w*", lambda m: values.get(m.group(0), m.group(0)), text)


def _angle_text(text: str, open_angle: int) -> str | None:
    """What stands between the `<` at `open_angle` and its `>` (nested brackets kept)."""
    close = close_index(text, open_angle + 1, *ANGLES, limit=2000)
    return text[open_angle + 1 : close] if close >= 0 and text[close] == ">" else None


def _call_arguments(text: str, open_paren: int) -> list[str] | None:
    """The top-level comma-separated arguments of the call whose `(` is at `open_paren`."""
    close = close_index(text, open_paren + 1, limit=2000)
    if close < 0 or text[close] != ")":
        return None
    return split_top(text[open_paren + 1 : close])


_ARGUMENT_WORD = re.compile(r"(?<![\w:.])([A-Za-z_]\w*)(?![\w(<:])")
_MAX_RESOLVED = 8  # rounds of substitution (a constant defined from other constants)


def _with_constants(expression: str, callee: Node, data: bytes) -> str:
    """`k<BM, BN>` with each template argument that names a constant declared before the launch
    (`const uint BM = 128;` in the launching function, or at namespace scope) replaced by its
    value: NVRTC resolves name expressions at namespace scope, where a host function's local
    constants do not exist (nvcc instantiates `k<128, 64>` all the same)."""
    open_at = expression.find("<")
    if open_at < 0:
        return expression
    head, arguments = expression[:open_at], expression[open_at:]
    before = data[: callee.start_byte].decode("utf-8", errors="replace")
    for _ in range(_MAX_RESOLVED):
        words = {w for w in _ARGUMENT_WORD.findall(arguments) if w not in _KEEP_WORDS}
        changed = False
        for word in words:
            value = _constant_value(word, before)
            if value is not None:
                arguments = re.sub(rf"(?<![\w:.]){word}(?![\w(<:])", value, arguments)
                changed = True
        if not changed:
            break
    return head + arguments


_KEEP_WORDS = frozenset(
    {"true", "false", "float", "double", "int", "unsigned", "char", "short", "long", "bool",
     "half", "nullptr", "sizeof", "const", "signed", "void", "uint", "size_t"}
)  # fmt: skip


def _constant_value(name: str, before: str) -> str | None:
    """The value of the last `const`/`constexpr` integral `name = value;` in `before`."""
    pattern = re.compile(
        rf"\b(?:constexpr|const)\s+(?:static\s+)?(?:(?:unsigned|signed|long|short|int|uint|"
        rf"size_t|auto|char|bool|u?int\d+_t)\s+)*{re.escape(name)}\s*(?:=\s*|\{{)"
        rf"([^;{{}}]+?)\}}?\s*;"
    )
    last = None
    for match in pattern.finditer(before):
        last = match
    if last is None:
        return None
    value = last.group(1).strip()
    if not value or len(value) > 200:
        return None
    return value if re.fullmatch(r"[\w.]+", value) else f"({value})"
