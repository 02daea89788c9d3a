"""The walker: visits a file's namespace-scope items in source order and decides, item by
item, what is host-only (byte ranges to blank), what macros and constants the file defines and
which `#include` rows it holds.

It keeps its own stack: a file of 10,000 nested `#if` must not exhaust Python's."""

from __future__ import annotations

import re

import tree_sitter

from cuda_llm_lsp.compile.unit.common import (
    ATTRIBUTE,
    DROPPED,
    EXTENDS,
    HIDDEN_FROM_NVRTC,
    READ_IN_DECLTYPE,
    WORD,
)
from cuda_llm_lsp.compile.unit.known import (
    CALLING_CONVENTIONS,
    HOST_DEFINITION_MACROS,
    HOST_TYPES,
    STD_FOR_CONSTEXPR,
    STD_PROVIDED,
)
from cuda_llm_lsp.compile.unit.masks import (
    attribute_kind,
    mask_attribute_macros,
    mask_split_declarators,
    split_parameter_tails,
)
from cuda_llm_lsp.compile.unit.nodes import (
    CLASS_TYPES,
    branch_items,
    class_members,
    defines_class,
    ends_cut,
    errors_only_in_parameters,
    hides_from_nvrtc,
    in_error,
    inner_declarator,
    matching_brace,
)
from cuda_llm_lsp.source.text import Span

_STD_SCOPE = re.compile(rb"\bstd\s*::")
_DEVICE_WORDS = frozenset({"__device__", "__global__"})
_MEMORY_SPACE_WORDS = frozenset({"__device__", "__constant__", "__managed__", "__shared__"})
# node types that make up a function's head before its declarator
_HEAD_TYPES = frozenset(
    {"primitive_type", "type_identifier", "qualified_identifier", "template_type",
     "sized_type_specifier", "storage_class_specifier", "type_qualifier", "launch_bounds",
     "attribute_declaration", "attribute_specifier", "ms_call_modifier", "virtual",
     "placeholder_type_specifier", "identifier"}
)  # fmt: skip
# `struct __align__(8) complex {`: a class head, read from the text
_CLASS_HEAD = re.compile(rb"\b(?:struct|class|union)\s+(?:__align__\s*\([^)\n]*\)\s*)?(\w+)\s*[:{]")
# nodes that name something (a namespace, a type, a function): `Walker._dropped_name`
_NAME_TYPES = frozenset({"namespace_identifier", "type_identifier", "identifier"})
# items complete in themselves even where tree-sitter misread what surrounds them
_WHOLE_ITEM_TYPES = frozenset(
    {"function_definition", "struct_specifier", "class_specifier", "union_specifier",
     "alias_declaration", "using_declaration"}
)  # fmt: skip
# namespace-scope items that `Walker._skip_dropped` may leave out whole
_ITEM_TYPES = frozenset(
    {"function_definition", "declaration", "struct_specifier", "class_specifier",
     "union_specifier", "using_declaration", "alias_declaration", "type_definition",
     "template_instantiation"}
)  # fmt: skip
_CONTAINERS = frozenset(
    {"translation_unit", "preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif",
     "preproc_elifdef", "declaration_list", "ERROR"}
)  # fmt: skip
# Words that make a macro's expansion usable by device code (kept even without a device word).
_USABLE_WORDS = frozenset(
    {"const", "constexpr", "typedef", "using", "template", "struct", "class", "union", "enum",
     "namespace", "static_assert"}
)  # fmt: skip
# Words a declaration-specifier macro's body may hold (`#define PNANOVDB_STATIC_CONST static
# const`): `Walker._specifier_macro`.
_SPECIFIER_WORDS = frozenset(
    {"static", "const", "volatile", "inline", "extern", "constexpr", "thread_local",
     "__inline__", "__forceinline__"}
)  # fmt: skip
_SPECIFIER_BODY = re.compile(r"[A-Za-z_\s]*")


class Walker:
    """Collects byte ranges of host-only code and the rows of `#include` directives."""

    def __init__(self, data: bytes, macros: dict[str, str], bodies: dict[str, str]) -> None:
        self.data = data
        # the bytes tree-sitter read, where attribute macros were masked (`parse_masked`): a blanked
        # declaration takes the `GGML_API`-style macros just before it along
        # (and where a function head's `#if` line was: the blank takes it along too)
        masked = mask_split_declarators(
            mask_attribute_macros(data.decode("utf-8", "surrogatepass"), macros)
        ).encode("utf-8", "surrogatepass")
        self.masked = masked if masked != data and len(masked) == len(data) else None
        # the end of a split parameter list's `#if` branch -> the end of its `#endif`
        self.split_tails = {branch_end: end for _, branch_end, end in split_parameter_tails(data)}
        self.ranges: list[tuple[int, int]] = []
        self.include_rows: list[int] = []
        # unannotated namespace-scope constants: (name, start byte, end byte)
        self.constants: list[tuple[str, int, int]] = []
        self.device_macros = {n for n, kind in macros.items() if kind == "device"}
        self.host_macros = {n for n, kind in macros.items() if kind == "host"}
        self.constexpr_macros = {n for n, kind in macros.items() if kind == "constexpr"}
        self.hidden = {n for n, kind in macros.items() if kind == HIDDEN_FROM_NVRTC}
        # names the unit lacks -> their library: its namespace, and user items that need it
        self.dropped = {n: k[len(DROPPED) :] for n, k in macros.items() if k.startswith(DROPPED)}
        self.skipped: list[tuple[Span, str, str]] = []  # items naming one: span, name, library
        self.extended = {n for n, k in macros.items() if k.startswith(EXTENDS)}
        opens = (
            rb"namespace\s+(?:" + b"|".join(re.escape(n.encode()) for n in self.dropped) + rb")\b"
        )
        self.opens_dropped = bool(self.dropped) and (
            re.search(opens, data) is not None or b"THRUST_NAMESPACE_BEGIN" in data
        )
        self.host_aliases: set[str] = set()  # aliases and classes blanked as host-only
        self.swallowed_until = 0  # the end of a blanked host body tree-sitter closed early
        self.defined: dict[str, str] = {}  # execution-space macros this text defines
        self._empty_macros: set[str] = set()  # `#define NAME` alone (see _note_macro)
        self.bodies = dict(bodies)  # macro replacement texts known so far (headers, this text)
        self.own_bodies: dict[str, str] = {}  # those this text defines
        self.own_objects: dict[str, str] = {}  # its object-like ones (`kernels.kernel_macros`)
        # macro -> the object-like macros whose replacement is that one name (`#define A B`):
        # made device macros once it is one, whichever of the two is defined first
        self.aliases: dict[str, list[str]] = {}
        self.invoked: set[str] = set()  # namespace-scope invocations of unknown macros
        self.host_functions: set[str] = set()  # names of host functions blanked so far
        self.host_templates: set[str] = set()  # those of them that are templates
        self.instantiated: set[str] = set()  # explicit instantiations kept
        self.read_in_decltype = {n for n, kind in macros.items() if kind == READ_IN_DECLTYPE}
        # rows of #include lines under a platform or feature test (`#ifdef _WIN32`, `#if ...`;
        # an include guard's `#ifndef` does not count): nvcc may never read them
        self.conditional_rows: set[int] = set()
        if self.opens_dropped:  # its classes, whatever tree-sitter made of their heads
            for match in _CLASS_HEAD.finditer(data):  # (`#if` / two heads / `#endif`: CuPy)
                declared = match.group(1).decode()
                self.defined.setdefault(declared, EXTENDS + "thrust")
                self.extended.add(declared)

    def _under_condition(self, node: tree_sitter.Node) -> bool:
        parent = node.parent
        while parent is not None:
            if parent.type in ("preproc_if", "preproc_elif", "preproc_else", "preproc_elifdef"):
                return True
            if parent.type == "preproc_ifdef" and not self.text(parent).startswith("#ifndef"):
                return True
            parent = parent.parent
        return False

    def text(self, node: tree_sitter.Node) -> str:
        return self.data[node.start_byte : node.end_byte].decode("utf-8", errors="replace")

    def _masked_start(self, start: int) -> int:
        """`start`, moved back over what was masked for tree-sitter just before it (attribute
        macros, a split head's `#if` lines): a blanked item takes those along."""
        if self.masked is not None:
            while start > 0 and self.masked[start - 1 : start].isspace():
                start -= 1
        return start

    def _specifier_macro(self, name: str) -> set[str] | None:
        """The words of macro `name` where it stands for declaration specifiers alone
        (`#define PNANOVDB_STATIC_CONST static const`) or is a device macro (its `#if`
        branches' bodies may differ: `_note_macro`), else None."""
        if name in self.device_macros:
            return {"__device__"}
        body = self.bodies.get(name)
        if body is None or _SPECIFIER_BODY.fullmatch(body) is None:
            return None
        words = set(WORD.findall(body))
        return words if words and words <= _SPECIFIER_WORDS else None

    def _specifiers_before(self, start: int) -> tuple[int, set[str]]:
        """`start`, moved back over specifier macros (`_specifier_macro`) just before it, and
        their words: after a macro call without `;` (`PNANOVDB_STRUCT_TYPEDEF(X)`) tree-sitter
        reads `PNANOVDB_STATIC_CONST` into an ERROR node, out of the declaration it heads. The
        declaration was then blanked as a host variable (no `const` seen) and its `static const`
        left to the next item (NanoVDB's PNanoVDB.h: "a storage class may not be specified
        here", then its table undefined in every function using it)."""
        words: set[str] = set()
        while True:
            end = start
            while end > 0 and self.data[end - 1 : end] in (b" ", b"\t", b"\r", b"\n"):
                end -= 1
            begin = end
            while begin > 0 and (
                self.data[begin - 1 : begin].isalnum() or self.data[begin - 1 : begin] == b"_"
            ):
                begin -= 1
            line = self.data[self.data.rfind(b"\n", 0, begin) + 1 : begin]
            found = None
            if begin < end and not line.lstrip().startswith(b"#"):
                found = self._specifier_macro(self.data[begin:end].decode("utf-8", "replace"))
            if found is None:
                return start, words
            words |= found
            start = begin

    def blank(self, node: tree_sitter.Node) -> None:
        start, _ = self._specifiers_before(self._masked_start(node.start_byte))
        end = node.end_byte
        if self.split_tails:  # a prototype ending in an `#if` branch: its `#else` branch too
            after = end
            while after < len(self.data) and self.data[after : after + 1] in (b" ", b"\t"):
                after += 1
            if self.data[after : after + 1] == b"\n":
                end = self.split_tails.get(after + 1, end)
        self.ranges.append((start, end))

    def walk(self, root: tree_sitter.Node) -> None:
        """Visit every namespace-scope item under `root` in source order (own stack)."""
        self._stack: list[tuple[tree_sitter.Node, tree_sitter.Node]] = []
        self.visit_container(root)
        while self._stack:
            node, outer = self._stack.pop()
            self._visit_one(node, outer)

    def visit_container(self, node: tree_sitter.Node) -> None:
        """Queue `node`'s children (a container) to be visited next, first child first."""
        children = node.children
        queued: list[tree_sitter.Node] = []
        taken = 0  # the end of a function read in this ERROR node: what follows is not in it
        for index, child in enumerate(children):
            if child.start_byte < taken:
                continue
            if node.type == "ERROR":
                taken = self._unterminated_function(children, index, node) or 0
                if taken >= node.end_byte:
                    break  # the rest of this ERROR node is that function's body
                if taken:
                    continue
            queued.append(child)
        self._stack.extend((child, child) for child in reversed(queued))

    def visit(self, node: tree_sitter.Node, outer: tree_sitter.Node) -> None:
        """Queue one item to be visited next (see `_visit_one`)."""
        self._stack.append((node, outer))

    def _unterminated_function(
        self, children: list[tree_sitter.Node], index: int, error: tree_sitter.Node
    ) -> int | None:
        """`head declarator {` inside an ERROR node: a function whose `}` never came, or came
        in a file tree-sitter misread (CuPy's cupy_thrust.cu, whose whole tree is one ERROR).

        Typing inside `main` (or a kernel) leaves such a node reaching to the end of the file.
        Host: blank from its head to its `}`, or to the end of the node. Device: keep it. The
        end of what it took is returned; None where `children[index]` starts no such function.
        """
        child = children[index]
        if child.type not in _HEAD_TYPES and not child.type.startswith("__"):
            return None
        end = index
        while end < len(children) and (
            children[end].type in _HEAD_TYPES or children[end].type.startswith("__")
        ):
            end += 1
        if end + 1 >= len(children) or children[end].type != "function_declarator":
            return None
        if children[end + 1].type != "{":
            return None
        head = self.data[child.start_byte : children[end].start_byte].decode("utf-8", "replace")
        words = set(WORD.findall(head))
        close = matching_brace(self.data, children[end + 1].start_byte, error.end_byte)
        taken = close or error.end_byte
        if not (words & _DEVICE_WORDS or words & self.device_macros or "constexpr" in words):
            start = child.start_byte
            if index >= 2 and children[index - 1].type == "template_parameter_list":
                start = children[index - 2].start_byte  # its `template <typename T>` too
            self.ranges.append((self._masked_start(start), taken))
        return taken

    def _visit_one(self, node: tree_sitter.Node, outer: tree_sitter.Node) -> None:
        """Decide about one namespace-scope item; `outer` is what gets blanked (with prefixes)."""
        kind = node.type
        if outer.start_byte < self.swallowed_until:
            return  # the rest of a host function's body, blanked with it
        if kind in _ITEM_TYPES and self._skip_dropped(node, outer):
            return
        if kind in _ITEM_TYPES and self.opens_dropped:  # its names are user code's (CuPy)
            for declared in self._item_names(node):
                self.defined.setdefault(declared, EXTENDS + "thrust")
                self.extended.add(declared)
        if kind == "preproc_include":
            self.include_rows.append(node.start_point[0])
            if self._under_condition(node):
                self.conditional_rows.add(node.start_point[0])
        elif kind in ("preproc_def", "preproc_function_def"):
            self._note_macro(node)
        elif kind in _CONTAINERS:
            self.visit_container(node)
        elif kind == "namespace_definition":
            body = node.child_by_field_name("body")
            if body is not None:
                self.visit_container(body)
        elif kind == "linkage_specification":
            body = node.child_by_field_name("body")
            if body is None:
                return
            if body.type == "declaration_list":
                self.visit_container(body)
            else:
                self.visit(body, outer)
        elif kind == "template_declaration":
            inner = next(
                # not a comment after the parameters: `typename Layout>  ///< Layout function`
                (
                    c
                    for c in node.named_children
                    if c.type not in ("template_parameter_list", "comment")
                ),
                None,
            )
            if inner is not None:
                self.visit(inner, outer)
        elif kind == "function_definition":
            self._visit_function(node, outer)
        elif kind == "template_instantiation":
            self._visit_instantiation(node, outer)
        elif kind == "declaration":
            self._visit_declaration(node, outer)
        elif kind in ("struct_specifier", "class_specifier", "union_specifier"):
            bases = next((c for c in node.children if c.type == "base_class_clause"), None)
            if bases is not None and (self._needs_host_std(bases) or self._names_host(bases)):
                # `class cuda_exception : public std::exception {...};`, and a class deriving
                # from one blanked so (`class fatal : public error`): host classes both
                self.blank(outer)
                self._note_host_name(node.child_by_field_name("name"))
            else:
                self._visit_class(node)
            self._note_hidden_class(node)
        elif kind in ("using_declaration", "alias_declaration", "type_definition") and (
            self._needs_host_std(node)
        ):
            self.blank(outer)  # `template <class T> using owner = std::unique_ptr<T, ...>;`
            self._note_host_name(node.child_by_field_name("name"))
        elif kind == "type_definition" and self._names_host_type(node):
            self.blank(outer)  # `typedef pthread_t CUTThread;`: a host-only name
        elif kind == "expression_statement":
            self._visit_invocation(node, outer)
        elif kind == "type_definition":  # `typedef struct {...} Name;`: its members
            for child in node.named_children:
                if child.type in ("struct_specifier", "class_specifier", "union_specifier"):
                    self._visit_class(child)

    def _visit_function(self, node: tree_sitter.Node, outer: tree_sitter.Node) -> None:
        """A function definition: blanked when surely host code, its name noted for the
        explicit instantiations of it; a misread device one's swallowed items walked."""
        if self._is_surely_host(node) and not self._is_device_function(node):
            name = self._declared_name(node.child_by_field_name("declarator"))
            template = node.parent is not None and node.parent.type == "template_declaration"
            if template and name in self.read_in_decltype and not self._needs_host_std(node):
                return  # its type is deduced in device code's `decltype` (CUTLASS 3)
            self.blank(outer)
            self._blank_cut_short_head(node)
            self._blank_cut_short_body(node, outer)
            if name:
                self.host_functions.add(name)
                if template:
                    self.host_templates.add(name)
        elif node.has_error:
            self._visit_swallowed(node)

    def _blank_cut_short_body(self, node: tree_sitter.Node, outer: tree_sitter.Node) -> None:
        """A host function whose body tree-sitter closed early: the items it left after it, up
        to the `}` matching the body's `{`, are the body's rest (blanked, not walked).

        A macro argument holding `if (...) {...} else {...}` (kmcuda's `FOR_EACH_DEVI(...)`)
        ends the body at the `}` inside it; what followed (`uint64_t n = 0; ... return r; }`)
        read as namespace-scope items, was kept, and NVRTC rejected it. Not past a definition:
        a brace count thrown off by `#if` branches must not take a kernel along.
        """
        body = node.child_by_field_name("body")
        container = outer.parent
        if body is None or not body.has_error or container is None:
            return
        close = matching_brace(self.data, body.start_byte, container.end_byte)
        if close is None or close <= outer.end_byte:
            return
        sibling = outer.next_sibling
        while sibling is not None and sibling.start_byte < close:
            if sibling.type in _DEFINITION_TYPES:
                return
            sibling = sibling.next_sibling
        self.ranges.append((outer.end_byte, close))
        self.swallowed_until = close

    def _visit_instantiation(self, node: tree_sitter.Node, outer: tree_sitter.Node) -> None:
        """`template void reduce<int>(...);`: blanked with the host template blanked above."""
        words = self._head_words(node)
        name = self._instantiated_name(node)
        if name in self.host_functions and not words & (_DEVICE_WORDS | self.device_macros):
            self.blank(outer)
        elif name:
            self.instantiated.add(name)

    def _visit_swallowed(self, node: tree_sitter.Node) -> None:
        """Items a misread function body swallowed, walked as the namespace-scope items they are.

        tree-sitter may carry a kernel's body on past its `}` (two `#ifdef`s in a braced
        initializer: ThunderKittens' interpreter kernel took the `__host__` launcher after it
        along, and NVRTC rejected the host function). Only items past the `}` that closes the
        body's `{` are walked; what lies inside is the function's, however misread."""
        body = node.child_by_field_name("body")
        if body is None or body.type != "compound_statement":
            return
        closed = matching_brace(self.data, body.start_byte, body.end_byte)
        if closed is None or closed >= body.end_byte:
            return
        stack = list(reversed(body.children))
        while stack:
            child = stack.pop()
            if child.end_byte <= closed or child.type in ("field_declaration_list", "comment"):
                continue
            if child.start_byte >= closed and child.type in (
                "template_declaration",
                "function_definition",
            ):
                self.visit(child, child)
            else:
                stack.extend(reversed(child.children))

    def _note_macro(self, node: tree_sitter.Node) -> None:
        name = node.child_by_field_name("name")
        value = node.child_by_field_name("value")
        if name is not None and value is None and node.type == "preproc_def":
            # `#define API` stands for nothing, as the preprocessor reads it: masked for
            # tree-sitter like an attribute macro. Unmasked, `typedef API struct s* s_t;` was
            # read as `typedef API struct` and a host variable `s* s_t`, blanked (cuSPARSE's
            # CUSPARSE_DEPRECATED_TYPE_MSVC). Not a reserved name (`#define __device__` of a
            # host build) nor one another `#if` branch defines as something (`REAL float`);
            # only one this text uses outside directives (not an include guard: no re-parse)
            empty = self.text(name)
            if not empty.startswith("__") and empty not in self.bodies and self._used(empty):
                self._empty_macros.add(empty)
                self.defined.setdefault(empty, ATTRIBUTE)
            return
        if name is None or value is None:
            return
        self.bodies[self.text(name)] = self.own_bodies[self.text(name)] = self.text(value)
        words = set(WORD.findall(self.text(value)))
        if node.type == "preproc_def":
            self.own_objects[self.text(name)] = self.text(value)
            if len(words) == 1 and self.text(value).strip() in words:
                self.aliases.setdefault(self.text(value).strip(), []).append(self.text(name))
        if words & _DEVICE_WORDS or (node.type == "preproc_def" and words & self.device_macros):
            self._note_device_macro(self.text(name))
        elif "__host__" in words:
            self.host_macros.add(self.text(name))
            self.defined[self.text(name)] = "host"
        elif words == {"constexpr"} and node.type == "preproc_def":
            self.constexpr_macros.add(self.text(name))
            self.defined[self.text(name)] = "constexpr"
        else:
            kind = attribute_kind(node.type, self.text(value), self._parameters(node))
            if kind is None and self.text(name) in self._empty_macros:
                self.defined.pop(self.text(name), None)  # empty here, something there
            # another `#if` branch's attributes do not unmake a device macro: NanoVDB's
            # PNANOVDB_FORCE_INLINE is `__host__ __device__ static __forceinline__` under
            # `__CUDACC__`, `static inline __attribute__((always_inline))` after it, and every
            # function it heads was blanked as host code
            if kind is not None and self.text(name) not in self.device_macros:
                self.defined[self.text(name)] = kind

    def _used(self, name: str) -> bool:
        """Whether `name` appears in a line of this text that is no preprocessor directive."""
        pattern = rb"^(?![ \t]*#)[^\n]*\b" + re.escape(name.encode()) + rb"\b"
        return re.search(pattern, self.data, re.MULTILINE) is not None

    def _note_device_macro(self, name: str) -> None:
        """`name` is a device macro, and so is each alias of it (`#define __kernel KERNEL`
        read before `#define KERNEL extern "C" __global__`): its functions stay device code."""
        todo = [name]
        while todo:
            macro = todo.pop()
            if self.defined.get(macro) == "device":
                continue
            self.device_macros.add(macro)
            self.defined[macro] = "device"
            todo.extend(self.aliases.get(macro, ()))

    def _parameters(self, node: tree_sitter.Node) -> list[str]:
        params = node.child_by_field_name("parameters")
        return [self.text(c) for c in params.named_children] if params is not None else []

    def _visit_invocation(self, node: tree_sitter.Node, outer: tree_sitter.Node) -> None:
        """`LIST(DECLARE)` at namespace scope: a macro invocation (no expression stands there).

        cuda-samples' EGL interop declares host function pointers this way, of types from host
        headers that the unit drops. Blanked when its whole expansion, as far as the user's
        macros tell, holds no device word and nothing device code could use (a constant, a
        type, a template); one whose macro is unknown (yet) is kept and noted.
        """
        call = node.named_children[0] if node.named_child_count == 1 else None
        if call is None or call.type != "call_expression":
            return
        function = call.child_by_field_name("function")
        if function is None or function.type != "identifier":
            return
        name = self.text(function)
        if name not in self.bodies:
            self.invoked.add(name)
            return
        words: set[str] = set()
        todo = [name, *WORD.findall(self.text(call.child_by_field_name("arguments") or call))]
        while todo and len(words) < 4096:
            word = todo.pop()
            if word not in words:
                words.add(word)
                todo.extend(WORD.findall(self.bodies.get(word, "")))
        usable = _DEVICE_WORDS | _MEMORY_SPACE_WORDS | self.device_macros | _USABLE_WORDS
        if not words & usable:
            self.blank(outer)

    def blank_instantiation_macros(self) -> None:
        """`INSTANTIATE(float)` invocations, `;` or not, of a macro whose body is an explicit
        instantiation (`template void launch<T>(...);`) of a host template: blanked with it
        (DeepSpeed's inference kernels; tree-sitter reads a run of such lines as anything).

        A run of them starts a line and ends one; clang-format may put several on a line and
        split one over lines (bitsandbytes' ops.cu: `MAKE(ADAM, half) MAKE(\n  LION, half\n)`).
        """
        names: list[bytes] = []
        for macro, body in self.bodies.items():
            instantiated = _EXPLICIT_INSTANTIATION.search(body)
            if instantiated is None or set(WORD.findall(body)) & (
                _DEVICE_WORDS | self.device_macros
            ):
                continue
            if instantiated.group(1) not in self.host_functions:
                self.instantiated.add(instantiated.group(1))  # a header's, maybe: walked again
                continue
            names.append(re.escape(macro.encode()))
        if not names:
            return
        head = re.compile(rb"(?:" + rb"|".join(names) + rb")[ \t]*\(")
        starts = re.compile(rb"^[ \t]*(?=(?:" + rb"|".join(names) + rb")\b)", re.MULTILINE)
        done = 0
        for start in starts.finditer(self.data):
            if start.start() < done:
                continue
            run: list[tuple[int, int]] = []
            at = start.end()
            while (found := head.match(self.data, at)) is not None:
                end = _invocation_end(self.data, found.end() - 1)
                if end < 0:
                    break
                run.append((found.start(), end))
                at = _SPACE.match(self.data, end).end()  # type: ignore[union-attr]
            if run and _LINE_END.match(self.data, run[-1][1]):  # nothing else on the last line
                self.ranges.extend(run)
                done = run[-1][1]

    def _head_words(self, node: tree_sitter.Node) -> set[str]:
        """Words before the declarator: specifiers, qualifiers, macros standing for them."""
        declarator = node.child_by_field_name("declarator")
        end = declarator.start_byte if declarator is not None else node.end_byte
        head = self.data[node.start_byte : end].decode("utf-8", errors="replace")
        words = set(WORD.findall(head))
        for word in list(words):  # `PNANOVDB_STATIC_CONST int x = 1;`: a constant
            words |= self._specifier_macro(word) or set()
        return words

    def _is_surely_host(self, node: tree_sitter.Node) -> bool:
        """Only a well-formed head is judged; a head tree-sitter misread is left to NVRTC.

        `struct __align__(16) V {...};` parses as a function with an ERROR in its head; a
        definition with no return type is a constructor (`S::S()`) or another misread.
        """
        declarator = node.child_by_field_name("declarator")
        body = node.child_by_field_name("body")
        if declarator is None or body is None or not self._is_function_declarator(declarator):
            return False
        for child in node.children:
            if child.start_byte >= body.start_byte:
                break
            if child.id == declarator.id and errors_only_in_parameters(declarator):
                continue  # `std::initializer_list<int> outputs = {}`: tree-sitter's gap, not
                # the head's (ggml's ggml_can_fuse_subgraph was kept for NVRTC)
            if child.type == "ERROR" or child.is_missing or child.has_error:
                # a head misread because of an unknown macro; a known __host__ one is clear,
                # and so is a host calling convention (`void CUDART_CB callback(...)`)
                words = self._head_words(node)
                if words & (_DEVICE_WORDS | self.device_macros):
                    return False
                return bool(words & self.host_macros or words & CALLING_CONVENTIONS)
        if declarator.start_byte == node.start_byte:  # no return type: ctor or misparse
            head = self.data[declarator.start_byte : declarator.end_byte]
            return b"::" in head or self._host_definition_macro(declarator)
        return True

    def _host_definition_macro(self, declarator: tree_sitter.Node) -> bool:
        """`PYBIND11_MODULE(name, m) {...}`, `TORCH_LIBRARY_IMPL(ns, CUDA, m) {...}`: a macro
        that defines a host function around the body (PyTorch extensions end with one). One
        of those, or a macro whose expansion (as far as the headers tell) has no device word."""
        inner = declarator.child_by_field_name("declarator")
        if inner is None or inner.type != "identifier":
            return False
        name = self.text(inner)
        if name in HOST_DEFINITION_MACROS:
            return True
        body = self.bodies.get(name)
        return body is not None and not (set(WORD.findall(body)) & _DEVICE_WORDS)

    def _is_device_function(self, node: tree_sitter.Node) -> bool:
        words = self._head_words(node) | self._specifiers_before(node.start_byte)[1]
        head = self._cut_short_head(node)
        if head is not None:
            words |= set(WORD.findall(self.text(head)))
        if words & _DEVICE_WORDS or words & self.device_macros:
            return True
        # a constexpr function is judged by NVRTC exactly as nvcc would (relaxed-constexpr rules)
        constexpr = "constexpr" in words or bool(words & self.constexpr_macros)
        return constexpr and not self._needs_host_std(node, STD_FOR_CONSTEXPR)

    def _visit_declaration(self, node: tree_sitter.Node, outer: tree_sitter.Node) -> None:
        if ends_cut(node):
            return  # misread: `struct CUTE_ALIGNAS(16) array_aligned : ...` (CuTe), for NVRTC
        before, specified = self._specifiers_before(outer.start_byte)
        words = self._head_words(node) | specified
        if words & _MEMORY_SPACE_WORDS or words & _DEVICE_WORDS or words & self.device_macros:
            return
        for child in node.named_children:
            if child.type in ("struct_specifier", "class_specifier", "union_specifier"):
                self._visit_class(child)
        # `extern "C" struct S {...};` reads as a declaration whose declarator is MISSING: a
        # type, not a host variable (numba's nrt.cuh)
        declarators = [
            c
            for c in node.children_by_field_name("declarator")
            if c.type != "ERROR" and not c.is_missing
        ]
        if any(self._is_function_declarator(d) for d in declarators):
            if b"->" not in self.data[node.start_byte : node.end_byte]:
                self.blank(outer)  # a host function's prototype
            # else `auto has_size(T*) -> bool_constant<...>;` (CuTe): a declaration only for
            # decltype to read, which nvcc accepts from device code whatever its space
            return
        constant = bool(words & {"const", "constexpr"}) and "extern" not in words
        # a constexpr initializer is evaluated at compile time: the constexpr names serve it
        constexpr = constant and "constexpr" in words
        if self._needs_host_std(node, STD_FOR_CONSTEXPR if constexpr else STD_PROVIDED):
            self.blank(outer)
            return
        if not declarators:
            return  # `struct S {...};`, `enum {...};`
        if "typedef" in words:
            return
        if constant:
            names = [self._declared_name(d) for d in declarators]
            if all(names):
                for name in names:
                    self.constants.append((name or "", before, outer.end_byte))
            return
        self.blank(outer)  # a host variable: NVRTC rejects those in JIT mode

    def _visit_class(self, node: tree_sitter.Node) -> None:
        body = node.child_by_field_name("body")
        if body is None:
            return
        for member in class_members(body):
            if member.type in ("preproc_def", "preproc_function_def"):
                self._note_macro(member)
                continue
            if member.type == "preproc_call" and self.text(member).startswith("#include"):
                # `#include "memory/memory.cuh"` inside `struct group {` (ThunderKittens;
                # tree-sitter reads it as a `preproc_call` there): read and registered like
                # one at namespace scope
                self.include_rows.append(member.start_point[0])
                if self._under_condition(member):
                    self.conditional_rows.add(member.start_point[0])
                continue
            target = member
            if member.type == "template_declaration":
                target = next(
                    (
                        c
                        for c in member.named_children
                        if c.type not in ("template_parameter_list", "comment")
                    ),
                    member,
                )
            if target.type == "function_definition":
                declarator = target.child_by_field_name("declarator")
                if not self._is_function_declarator(declarator):
                    continue  # misread: `STATIC_ASSERT(A{} % B{} == 0);` as `M (A) {}` (CuTe)
                if not self._is_device_function(target) and not self._is_defaulted(target):
                    self.blank(member)
                    self._blank_cut_short_head(member)
            elif target.type == "field_declaration" and defines_class(target):
                # `struct Arguments { ... };` (CUTLASS 2.x): a nested class is walked member by
                # member; its host methods go, the class stays for the device code naming it
                for child in target.named_children:
                    if child.type in CLASS_TYPES and child.child_by_field_name("body"):
                        self._visit_class(child)
            elif target.type in ("field_declaration", "declaration") and (
                self._needs_host_std(target)
                or self._names_host_type(target)
                or self._is_host_prototype(target)
            ):
                self.blank(member)
            elif target.type == "alias_declaration" and self._needs_host_std(target):
                # `using engine_type = std::mt19937;` (CUTLASS's reference/host/tensor_fill.h):
                # gone, and so are the members of its type
                self.blank(member)
                name = target.child_by_field_name("name")
                if name is not None:
                    self.host_aliases.add(self.text(name))

    def _is_host_prototype(self, node: tree_sitter.Node) -> bool:
        """A member function declared `__host__` alone (`__host__ void copyFrom(...);`, faiss's
        Tensor): NVRTC rejects an explicit `__host__` in JIT mode, nvcc never compiles it for
        the device. An unmarked prototype stays (NVRTC accepts it, a device definition outside
        the class may need it), and so does one a device word also marks."""
        declarators = node.children_by_field_name("declarator")
        if not any(self._is_function_declarator(d) for d in declarators):
            return False
        words = self._head_words(node)
        if words & _DEVICE_WORDS or words & self.device_macros:
            return False
        return "__host__" in words or bool(words & self.host_macros)

    def _cut_short_head(self, node: tree_sitter.Node) -> tree_sitter.Node | None:
        """tree-sitter reads `MACRO explicit S(float x) {...}` or `MACRO friend bool f() {...}`
        as a member (`MACRO explicit`) whose `;` is missing, then a function with no head: that
        member (before `node`) is the function's head."""
        before = node.prev_named_sibling
        if before is None:
            return None
        if before.type in ("preproc_if", "preproc_ifdef"):
            # `#if ... __device__ __noinline__ #else HD #endif` then the function (half_t)
            heads = branch_items(before)
            cut = all(h.type == "field_declaration" and ends_cut(h) for h in heads)
            return before if heads and cut else None
        return before if before.type == "field_declaration" and ends_cut(before) else None

    def _blank_cut_short_head(self, node: tree_sitter.Node) -> None:
        head = self._cut_short_head(node)
        if head is not None:
            self.blank(head)

    def _names_host_type(self, node: tree_sitter.Node) -> bool:
        """A member whose type only host headers declare (`glob_t g;`, `struct timeval t;`),
        or only host compilers see (`_note_hidden_class`)."""
        kind = node.child_by_field_name("type")
        if kind is None:
            return False
        words = set(WORD.findall(self.text(kind)))
        return bool(words & HOST_TYPES or words & self.hidden or words & self.host_aliases)

    def _names_host(self, node: tree_sitter.Node) -> bool:
        """Whether `node` names a host-only alias or class blanked before it (in this text, or
        in a header: `_note_host_name`), or one NVRTC never sees."""
        words = set(WORD.findall(self.text(node)))
        return bool(words & self.host_aliases or words & self.hidden)

    def _note_host_name(self, name: tree_sitter.Node | None) -> None:
        """A namespace-scope alias or class blanked as host code: classes deriving from it
        and members of its type are host code too (NVRTC would not know the name). Noted as
        a class NVRTC never sees, so that other files (a header deriving from dlib's `error`
        in another) are walked again knowing it."""
        if name is not None and name.type == "type_identifier":
            self.host_aliases.add(self.text(name))
            self.defined.setdefault(self.text(name), HIDDEN_FROM_NVRTC)

    def _note_hidden_class(self, node: tree_sitter.Node) -> None:
        """A class defined under `#if !defined(__CUDACC_RTC__)` exists for nvcc, not NVRTC.

        CUTLASS's `platform::unique_ptr` is one: the host class `DeviceAllocation` keeps a
        member of it, which NVRTC rejects. Its name is noted (as a macro kind, so that headers
        blanked before it was known are walked again) and members of its type are blanked.
        """
        name = node.child_by_field_name("name")
        body = node.child_by_field_name("body")
        if name is None or body is None or name.type != "type_identifier":
            return
        child, parent = node, node.parent
        while parent is not None:
            if parent.type in ("preproc_if", "preproc_ifdef") and hides_from_nvrtc(
                self.text(parent).split("\n", 1)[0]
            ):
                alternative = parent.child_by_field_name("alternative")
                if alternative is None or child.start_byte < alternative.start_byte:
                    self.defined[self.text(name)] = HIDDEN_FROM_NVRTC
                    return
            child, parent = parent, parent.parent

    def _skip_dropped(self, node: tree_sitter.Node, outer: tree_sitter.Node) -> bool:
        """Blank an item that names a dropped library's namespace (`thrust::tuple<...>`) and
        note it, unless it is host code the walker blanks anyway (no note then)."""
        if not self.dropped or outer.has_error:
            return False  # a misread item: blanking part of it would leave the rest stranded
        if in_error(outer) and not (
            node.type in _WHOLE_ITEM_TYPES
            and self.data[outer.end_byte - 1 : outer.end_byte] in (b"}", b";")
        ):
            return False  # in a misread region only an item complete in itself is left out
        named = self._dropped_name(outer)
        if named is None:
            return False
        self.blank(outer)
        if node.type == "function_definition" and (
            self._is_surely_host(node) and not self._is_device_function(node)
        ):
            return True
        if node.type == "declaration" and not self._head_words(node) & (
            _MEMORY_SPACE_WORDS | _DEVICE_WORDS | self.device_macros | {"typedef"}
        ):
            return True  # a host variable or prototype
        library = self.dropped[named]
        for name in self._item_names(node):  # what names it is left out too (`range_view<T>`)
            if self.opens_dropped or name in self.extended:
                continue  # an overload in the library's namespace (CuPy's `thrust::atanh`)
            self.dropped.setdefault(name, library)
            self.defined.setdefault(name, DROPPED + library)
        row = outer.start_point[0]  # the byte column from the text: a mask may move points'
        column = outer.start_byte - (self.data.rfind(b"\n", 0, outer.start_byte) + 1)
        line = self.data[outer.start_byte : outer.end_byte].split(b"\n", 1)[0]
        end = len(line.decode("utf-8", errors="replace").rstrip())
        self.skipped.append((Span.of(row, column, row, column + end), named, library))
        return True

    def _dropped_name(self, node: tree_sitter.Node) -> str | None:
        """The dropped name that `node` uses (`thrust::get<0>(t)`, `range_view<T>`), if any."""
        source = self.data[node.start_byte : node.end_byte]
        if not any(n.encode() in source for n in self.dropped):
            return None  # cheap: most items name none
        declared = set(self._item_names(node))
        stack = [node]
        while stack:
            current = stack.pop()
            if current.type in _NAME_TYPES:
                word = self.text(current)
                if word in self.dropped and word not in declared and not self._extended(current):
                    return word
            stack.extend(current.children)
        return None

    def _extended(self, node: tree_sitter.Node) -> bool:
        """`thrust::complex` where user code declares `complex` in namespace thrust."""
        parent = node.parent
        if parent is None or parent.type != "qualified_identifier":
            return False
        name = parent.child_by_field_name("name")
        if name is None:
            return False
        word = WORD.match(self.text(name))
        return word is not None and word.group(0) in self.extended

    def _item_names(self, node: tree_sitter.Node) -> list[str]:
        """The names a namespace-scope item declares: a class's, a function's, an alias's."""
        if node.type in ("struct_specifier", "class_specifier", "union_specifier"):
            name = node.child_by_field_name("name")
            return [self.text(name)] if name is not None and name.type == "type_identifier" else []
        if node.type == "alias_declaration":
            name = node.child_by_field_name("name")
            return [self.text(name)] if name is not None else []
        names: list[str] = []
        for declarator in node.children_by_field_name("declarator"):
            if declarator.type == "type_identifier":  # `typedef ... Name;`
                names.append(self.text(declarator))
            else:
                declared = self._declared_name(declarator)
                if declared:
                    names.append(declared)
        return names

    def _is_defaulted(self, node: tree_sitter.Node) -> bool:
        body = node.child_by_field_name("body")
        return body is None

    def _is_function_declarator(self, node: tree_sitter.Node | None) -> bool:
        while node is not None:
            # `operator T*() {...}`: a conversion operator (ThunderKittens' `__host__` ones)
            if node.type in ("function_declarator", "operator_cast"):
                return True
            if node.type in ("init_declarator", "array_declarator"):
                return False
            node = inner_declarator(node)
        return False

    def _instantiated_name(self, node: tree_sitter.Node) -> str | None:
        """`reduce` of `template void reduce<int>(...);`."""
        declarator = node.child_by_field_name("declarator")
        while declarator is not None and declarator.type != "function_declarator":
            declarator = declarator.child_by_field_name("declarator")
        inner = declarator.child_by_field_name("declarator") if declarator else None
        if inner is None:
            return None
        if inner.type == "template_function":
            inner = inner.child_by_field_name("name")
        return self.text(inner).split("::")[-1] if inner is not None else None

    def _declared_name(self, node: tree_sitter.Node | None) -> str | None:
        while node is not None:
            if node.type == "identifier":
                return self.text(node)
            node = inner_declarator(node)
        return None

    def _needs_host_std(
        self, node: tree_sitter.Node, provided: frozenset[str] = STD_PROVIDED
    ) -> bool:
        """Whether `node` names something in `std::` that only host headers declare (not one
        of `provided`)."""
        if _STD_SCOPE.search(self.data, node.start_byte, node.end_byte) is None:
            return False  # cheap: big initializer lists need no tree walk
        stack: list[tuple[tree_sitter.Node, bool]] = [(node, False)]
        while stack:
            current, nested = stack.pop()  # nested: the name part of `cuda::std::tuple`
            inner: tree_sitter.Node | None = None
            if current.type == "qualified_identifier":
                scope = current.child_by_field_name("scope")
                name = current.child_by_field_name("name")
                if scope is not None and self.text(scope) == "std" and name is not None:
                    word = WORD.match(self.text(name))
                    if not nested and (word is None or word.group(0) not in provided):
                        return True
                elif scope is not None and self.text(scope) not in ("", "::"):
                    inner = name  # `cuda::std::tuple<...>`: libcu++'s, not the host's
            if current.type == "using_declaration" and current.child_count >= 2:
                parts = [self.text(c) for c in current.named_children]
                if parts and parts[-1].startswith("std::"):
                    rest = parts[-1][5:]
                    if rest not in provided:
                        return True
            stack.extend((c, inner is not None and c.id == inner.id) for c in current.children)
        return False


# items that are surely not the rest of a misread function body
_DEFINITION_TYPES = frozenset(
    {
        "function_definition",
        "template_declaration",
        "namespace_definition",
        "linkage_specification",
        "struct_specifier",
        "class_specifier",
        "union_specifier",
    }
)

# `template void launch<T>(...)` in a macro's body: an explicit instantiation, and its name
_EXPLICIT_INSTANTIATION = re.compile(r"\btemplate\b(?!\s*<)[^;{}<(]*?\b(\w+)\s*[<(]")
_SPACE = re.compile(rb"\s*")
_LINE_END = re.compile(rb"[ \t]*(?:\r?\n|\Z)")
_AFTER_INVOCATION = re.compile(rb"[ \t]*;?")


def _invocation_end(data: bytes, open_paren: int) -> int:
    """The end of the macro invocation whose `(` is at `open_paren` (its `;` included), or -1
    where it does not close before a `;`, a brace or a line splice (a `#define`'s body)."""
    depth = 0
    for at in range(open_paren, min(len(data), open_paren + 20000)):
        char = data[at : at + 1]
        if char in (b";", b"{", b"}", b"\\"):
            return -1
        if char == b"(":
            depth += 1
        elif char == b")":
            depth -= 1
            if depth == 0:
                return _AFTER_INVOCATION.match(data, at + 1).end()  # type: ignore[union-attr]
    return -1
