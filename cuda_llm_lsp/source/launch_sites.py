"""Every launch of a kernel in a file, and each rewritten for a new launch configuration.

An accepted candidate that brings its own launch (source/spec/launch.py) must leave the whole
program consistent: every `name<<<g, b[, smem[, stream]]>>>(args)` site of the kernel (template
launches `name<T><<<...>>>` included) gets the new configuration written in that site's own
terms. A size bound to a scalar parameter (`args.n = "n"` in the spec) becomes the expression the
site passes for that parameter; the stream is kept; shared memory is added, changed or dropped;
above 48 KiB a `cudaFuncSetAttribute` call is put before the launch. A configuration variable
declared before the call and used only there (`dim3 block(256);`) has its initialiser rewritten
where that is provably the same value; otherwise (a variable shared with other code, a loop, a
value that may change in between) the call's arguments are rewritten in place.

Where a site cannot be rewritten safely the result says why, per site, as a typed refusal: a size
not bound to a scalar parameter, an argument with side effects (`n++`, a function call: the
configuration would evaluate it again), a launch inside a macro, a launch API
(`cudaLaunchKernel`, cooperative and `Ex` launches), the kernel used as a value we cannot follow,
or no launch site at all. The contract is docs/design.md's "Launch sites"; nothing here decides
whether a refused site blocks an edit (the caller's `cudaLlm.launch` policy does).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

from tree_sitter import Node

from cuda_llm_lsp.source.context import base_name, launch_callee, walk_nodes
from cuda_llm_lsp.source.expr import Expr, ExprError, parse_expr, to_c
from cuda_llm_lsp.source.kernels import Offsets, node_text, parse_tree
from cuda_llm_lsp.source.names import lex
from cuda_llm_lsp.source.spec.launch import LaunchConfig
from cuda_llm_lsp.source.spec.model import TestSpec
from cuda_llm_lsp.source.text import Point, Span, replace_span

RefusalReason = Literal[
    "no_site", "unbound_size", "side_effect", "macro", "launch_api", "indirect", "smem_attribute"
]

#: Launch APIs that take the kernel as a value: their configuration is not ours to rewrite.
LAUNCH_APIS = frozenset(
    {
        "cudaLaunchKernel",
        "cudaLaunchKernelEx",
        "cudaLaunchKernelExC",
        "cudaLaunchCooperativeKernel",
        "cudaLaunchCooperativeKernelMultiDevice",
        "cuLaunchKernel",
        "cuLaunchKernelEx",
        "cuLaunchCooperativeKernel",
        "cudaGraphAddKernelNode",
        "cudaGraphKernelNodeSetParams",
    }
)
#: Runtime calls that take the kernel without launching it (attributes, occupancy queries).
NON_LAUNCHING_APIS = frozenset(
    {
        "cudaFuncSetAttribute",
        "cudaFuncGetAttributes",
        "cudaFuncSetCacheConfig",
        "cudaFuncSetSharedMemConfig",
        "cudaFuncGetName",
        "cudaOccupancyMaxActiveBlocksPerMultiprocessor",
        "cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags",
        "cudaOccupancyMaxPotentialBlockSize",
        "cudaOccupancyMaxPotentialBlockSizeVariableSMem",
        "cudaOccupancyMaxPotentialBlockSizeWithFlags",
        "cudaOccupancyAvailableDynamicSMemPerBlock",
        "cudaOccupancyMaxActiveClusters",
    }
)
#: Dynamic shared memory a launch may use without opting in (`cudaFuncSetAttribute`).
DEFAULT_SMEM_LIMIT = 48 * 1024

# Expressions evaluated twice when they are repeated in a configuration: only these node types,
# none of which changes anything (no call, assignment, increment, `new`, comma, lambda).
_PURE_NODES = frozenset(
    {
        "identifier",
        "field_identifier",
        "number_literal",
        "char_literal",
        "true",
        "false",
        "this",
        "null",
        "nullptr",
        "parenthesized_expression",
        "binary_expression",
        "unary_expression",
        "pointer_expression",
        "field_expression",
        "subscript_expression",
        "cast_expression",
        "conditional_expression",
        "sizeof_expression",
        "qualified_identifier",
        "namespace_identifier",
        "type_descriptor",
        "primitive_type",
        "type_identifier",
        "sized_type_specifier",
        "type_qualifier",
        "abstract_pointer_declarator",
        "comment",
    }
)
_WRITES = frozenset({"update_expression", "assignment_expression"})
_LOOPS = frozenset({"for_statement", "for_range_loop", "while_statement", "do_statement"})
_INTEGER_TYPES = re.compile(
    r"(?:const\s+)?(?:(?:unsigned|signed|long|short)\s+)*(?:int|long|short|unsigned|size_t|"
    r"u?int(?:32|64)_t|dim3)\Z"
)


@dataclass(frozen=True)
class LaunchSite:
    """A `<<<...>>>` launch of the kernel."""

    callee: str  # as written: "k", "k<float, 128>", "ns::k"
    span: Span  # the `<<<...>>>`
    config: tuple[str, ...]  # the configuration as written: grid, block[, smem[, stream]]
    args: tuple[str, ...]  # the call's arguments as written

    @property
    def line(self) -> int:
        return self.span.start.line


@dataclass(frozen=True)
class Edit:
    """Replace `span` of the file with `new_text` (an insertion where the span is empty)."""

    span: Span
    new_text: str


@dataclass(frozen=True)
class SiteRewrite:
    site: LaunchSite
    edits: tuple[Edit, ...]
    config: str  # the site's new `<<<...>>>`, as written after the edit


@dataclass(frozen=True)
class SiteRefusal:
    """A launch (or a use of the kernel) that cannot be rewritten safely, and why."""

    reason: RefusalReason
    message: str  # names the place and the cause; says what to change by hand
    span: Span | None  # None: the whole file (`no_site`)


@dataclass(frozen=True)
class LaunchRewrite:
    """The outcome for every launch of one kernel in one file."""

    kernel: str
    config: LaunchConfig  # the new configuration, over size names
    rewrites: tuple[SiteRewrite, ...]
    refusals: tuple[SiteRefusal, ...]

    @property
    def safe(self) -> bool:
        """Every launch of the kernel is rewritten, and there is at least one."""
        return bool(self.rewrites) and not self.refusals

    @property
    def edits(self) -> tuple[Edit, ...]:
        return tuple(sorted((e for r in self.rewrites for e in r.edits), key=_edit_key))

    def apply(self, text: str) -> str:
        """`text` with every rewrite applied (refused sites left as they are)."""
        for edit in sorted(self.edits, key=_edit_key, reverse=True):
            text = replace_span(text, edit.span, edit.new_text)
        return text


def _edit_key(edit: Edit) -> tuple[Point, Point]:
    return edit.span.start, edit.span.end


@dataclass(frozen=True)
class SiteContext:
    """A launch site with what encloses it: the host function's name, its parameter names and
    its text up to the launch (where the launch's variables and allocations are defined)."""

    site: LaunchSite
    function: str  # "" at file scope
    params: tuple[str, ...]
    before: str


def sites_in_context(text: str, kernel: str) -> list[SiteContext]:
    """Every launch of `kernel` with its enclosing function (`source/launch_facts.py`)."""
    scan = _Scan(text, kernel)
    found = []
    for site, node in scan.sites():
        function = _ancestor(node, "function_definition")
        name, params, before = "", (), ""
        if function is not None:
            before = scan.data[function.start_byte : node.start_byte].decode("utf-8", "replace")
            declarator = function.child_by_field_name("declarator")
            while declarator is not None and declarator.type != "function_declarator":
                declarator = declarator.child_by_field_name("declarator")
            if declarator is not None:
                inner = declarator.child_by_field_name("declarator")
                name = scan.src(inner).split("::")[-1] if inner is not None else ""
                plist = declarator.child_by_field_name("parameters")
                params = tuple(
                    ids[-1]
                    for p in _items(plist)
                    if (ids := re.findall(r"[A-Za-z_]\w*", scan.src(p).split("=")[0]))
                )
        found.append(SiteContext(site, name, params, before))
    return found


def find_launch_sites(text: str, kernel: str) -> list[LaunchSite]:
    """Every `<<<...>>>` launch of `kernel` (its name without scope or template arguments)."""
    return [site for site, _ in _Scan(text, kernel).sites()]


def rewrite_launches(text: str, spec: TestSpec, config: LaunchConfig) -> LaunchRewrite:
    """Each launch site of `spec.kernel` in `text` rewritten for `config`, or refused with why.

    `spec` is the original's: its `args.X = "size"` entries say which scalar parameter carries
    each size. `config` holds expressions over the spec's size names (a parsed launch block).
    """
    scan = _Scan(text, spec.kernel)
    try:
        wanted = _Wanted(config, spec)
    except ExprError as e:  # a config not parsed by parse_launch_block: a caller's mistake
        raise ValueError(f"launch configuration does not parse: {e.message}") from e
    rewrites: list[SiteRewrite] = []
    refusals = list(scan.other_uses())
    sites = list(scan.sites())
    for site, node in sites:
        outcome = scan.rewrite(site, node, wanted)
        if isinstance(outcome, SiteRewrite):
            rewrites.append(outcome)
        else:
            refusals.append(outcome)
    if not sites and not refusals:
        refusals.append(
            SiteRefusal(
                "no_site",
                f"{spec.kernel} is never launched in this file (no {spec.kernel}<<<...>>>): "
                f"launch it with {config.describe()}",
                None,
            )
        )
    refusals.sort(key=lambda r: r.span.start if r.span else Point(-1, -1))
    return LaunchRewrite(spec.kernel, config, tuple(rewrites), tuple(refusals))


class _Wanted:
    """The new configuration parsed once, with the sizes it needs and where each is bound."""

    def __init__(self, config: LaunchConfig, spec: TestSpec) -> None:
        self.config = config
        self.grid = [parse_expr(t) for t in config.grid]
        self.block = [parse_expr(t) for t in config.block]
        smem = parse_expr(config.smem)
        self.smem: Expr | None = None if _is_zero(smem) else smem
        self.names: set[str] = set()
        for expr in [*self.grid, *self.block, *([self.smem] if self.smem else [])]:
            self.names |= expr.names()
        self.bound: dict[str, int] = {}  # size -> parameter index
        for arg in spec.args:
            value = (arg.value or "").strip()
            if not arg.is_pointer and value in spec.sizes and value not in self.bound:
                self.bound[value] = arg.index
        # a tunable is a compile-time constant, not a size: a site names it (its `#define`) or
        # its default value, whatever the arguments there
        self.tunables: dict[str, int] = dict(spec.tunables.default) if spec.tunables else {}
        # the tunables with a `#define` default in the file (parse_tunables found it)
        self.defined = frozenset(spec.tunables.defines) if spec.tunables else frozenset()
        self.needs_opt_in = self.smem is not None and _max_smem(config, spec) > DEFAULT_SMEM_LIMIT


def _is_zero(expr: Expr) -> bool:
    if expr.names():
        return False
    try:
        return expr.evaluate({}) == 0
    except ExprError:
        return False


def _max_smem(config: LaunchConfig, spec: TestSpec) -> int:
    """The largest dynamic shared memory over the spec's cases (unknown counts as large)."""
    expr = parse_expr(config.smem)
    largest = 0
    tunables = spec.tunables.default if spec.tunables else {}
    for index in range(spec.case_count):
        env = {**tunables, **{name: values[index] for name, values in spec.sizes.items()}}
        try:
            largest = max(largest, int(expr.evaluate(env)))
        except (ExprError, ValueError):
            return DEFAULT_SMEM_LIMIT + 1
    return largest


class _Scan:
    """One parse of the file, and the questions asked of it."""

    def __init__(self, text: str, kernel: str) -> None:
        self.text = text
        self.kernel = kernel
        self.tree, self.data = parse_tree(text)
        self.offsets = Offsets(text, self.data)
        # every macro the file defines, from the tree: a `#define` in a comment or a string
        # literal defines nothing
        self.macros = frozenset(
            self.src(name)
            for node in walk_nodes(self.tree.root_node)
            if node.type in ("preproc_def", "preproc_function_def")
            and (name := node.child_by_field_name("name")) is not None
        )

    # positions ----------------------------------------------------------------------------

    def point(self, byte: int) -> Point:
        return self.offsets.point(byte)

    def span(self, start: int, end: int) -> Span:
        return Span(self.point(start), self.point(end))

    def src(self, node: Node) -> str:
        return node_text(node, self.data)

    def where(self, node: Node) -> str:
        return f"line {node.start_point[0] + 1}"

    # finding ------------------------------------------------------------------------------

    def sites(self) -> Iterator[tuple[LaunchSite, Node]]:
        for node in walk_nodes(self.tree.root_node):
            callee = launch_callee(node)
            if callee is None or base_name(self.src(callee)) != self.kernel:
                continue
            call = node.parent
            assert call is not None
            arguments = call.child_by_field_name("arguments")
            args = tuple(self.src(a) for a in _items(arguments)) if arguments else ()
            config = tuple(self.src(c) for c in _items(node))
            site = LaunchSite(
                " ".join(self.src(callee).split()),
                self.span(node.start_byte, node.end_byte),
                config,
                args,
            )
            yield site, node

    def other_uses(self) -> Iterator[SiteRefusal]:
        """Uses of the kernel that launch it where we cannot rewrite: macros, launch APIs,
        the kernel taken as a value and passed where we cannot follow it."""
        for node in walk_nodes(self.tree.root_node):
            if node.type == "preproc_arg" and any(
                t.ident and t.text == self.kernel for t in lex(self.src(node))
            ):  # the body's names: not a comment or a string literal that mentions the kernel
                define = node.parent
                name = define.child_by_field_name("name") if define else None
                macro = self.src(name) if name is not None else "a macro"
                yield SiteRefusal(
                    "macro",
                    f"{self.where(node)}: the macro {macro} names {self.kernel}; a launch inside "
                    "a macro cannot be rewritten: change it by hand",
                    self.span(node.start_byte, node.end_byte),
                )
            elif node.type == "identifier" and self.src(node) == self.kernel:
                refusal = self._value_use(node)
                if refusal is not None:
                    yield refusal

    def _value_use(self, node: Node) -> SiteRefusal | None:
        while node.parent is not None and (
            (
                node.parent.type == "template_function"
                and node.parent.child_by_field_name("name") == node
            )
            or (
                node.parent.type == "qualified_identifier"
                and node.parent.child_by_field_name("name") == node
            )
        ):
            node = node.parent  # `k<float>`, `ns::k`: the whole name
        parent = node.parent
        if parent is None or parent.type == "function_declarator":
            return None  # the definition, a declaration, an explicit instantiation
        if launch_callee_of(parent, node) or self._shadowed(node):
            return None
        call = _enclosing_call(node)
        function = call.child_by_field_name("function") if call is not None else None
        callee = base_name(self.src(function)) if function is not None else ""
        span = self.span(node.start_byte, node.end_byte)
        if callee in NON_LAUNCHING_APIS:
            return None
        if callee in LAUNCH_APIS:
            return SiteRefusal(
                "launch_api",
                f"{self.where(node)}: {callee} launches {self.kernel} with a configuration of "
                "its own; it cannot be rewritten: change it by hand",
                span,
            )
        if callee and callee in self.macros:
            return SiteRefusal(
                "macro",
                f"{self.where(node)}: {self.kernel} is passed to the macro {callee}, which may "
                "launch it; a launch inside a macro cannot be rewritten: change it by hand",
                span,
            )
        what = f"passed to {callee}" if callee else "used as a value"
        return SiteRefusal(
            "indirect",
            f"{self.where(node)}: {self.kernel} is {what}, which may launch it with a "
            "configuration we cannot follow: change it by hand",
            span,
        )

    def _shadowed(self, node: Node) -> bool:
        """`node` names a variable or parameter of the same name, not the kernel."""
        function = _ancestor(node, "function_definition")
        if function is None:
            return False
        for found in walk_nodes(function):
            if found.type in ("init_declarator", "parameter_declaration", "declaration"):
                declared = found.child_by_field_name("declarator")
                while declared is not None and declared.type != "identifier":
                    declared = declared.child_by_field_name("declarator")
                if declared is not None and self.src(declared) == self.kernel:
                    return True
        return False

    # rewriting ----------------------------------------------------------------------------

    def rewrite(self, site: LaunchSite, node: Node, wanted: _Wanted) -> SiteRewrite | SiteRefusal:
        call = node.parent
        assert call is not None
        span = site.span
        arguments = call.child_by_field_name("arguments")
        arg_nodes = _items(arguments) if arguments is not None else []
        where = f"line {span.start.line + 1}: {site.callee}<<<{', '.join(site.config)}>>>"
        for arg in arg_nodes if wanted.names else []:
            if not _pure(arg):
                return SiteRefusal(
                    "side_effect",
                    f"{where}: the argument {self.src(arg)!r} has side effects (or calls a "
                    "function); the new configuration would evaluate it again: change it by "
                    f"hand to {wanted.config.describe()}",
                    span,
                )
        config_nodes = _items(node)
        names: dict[str, str] = {}
        for size in sorted(wanted.names):
            if size in wanted.tunables and size not in wanted.bound:
                names[size] = size if size in wanted.defined else str(wanted.tunables[size])
                continue
            index = wanted.bound.get(size)
            if index is None or index >= len(arg_nodes):
                return SiteRefusal(
                    "unbound_size",
                    f"{where}: the size {size} is not passed to {self.kernel} as a scalar "
                    f'parameter (no args.PARAM = "{size}" in the spec), so this site has no '
                    f"expression for it: change it by hand to {wanted.config.describe()}",
                    span,
                )
            names[size] = self.src(arg_nodes[index])
        for item in config_nodes[:3]:
            if any(n.type in _WRITES for n in walk_nodes(item)):
                return SiteRefusal(
                    "side_effect",
                    f"{where}: the configuration {self.src(item)!r} changes a variable; "
                    f"change it by hand to {wanted.config.describe()}",
                    span,
                )
        statement = call.parent
        if wanted.needs_opt_in and (
            statement is None
            or statement.type != "expression_statement"
            or statement.parent is None
            or statement.parent.type != "compound_statement"
        ):
            return SiteRefusal(
                "smem_attribute",
                f"{where}: the new configuration needs more than 48 KiB of shared memory, which "
                "takes a cudaFuncSetAttribute call before the launch, and this launch is not a "
                f"statement of its own: change it by hand to {wanted.config.describe()}",
                span,
            )
        return self._rewritten(site, node, config_nodes, names, wanted)

    def _rewritten(
        self,
        site: LaunchSite,
        node: Node,
        config_nodes: list[Node],
        names: Mapping[str, str],
        wanted: _Wanted,
    ) -> SiteRewrite:
        edits: list[Edit] = []
        stream = self.src(config_nodes[3]) if len(config_nodes) > 3 else None
        values: list[tuple[list[Expr], bool]] = [(wanted.grid, True), (wanted.block, True)]
        smem_exprs = [wanted.smem] if wanted.smem is not None else [parse_expr("0")]
        if wanted.smem is not None or stream is not None or len(config_nodes) > 2:
            values.append((smem_exprs, False))
        items: list[str] = []
        for position, (exprs, is_dims) in enumerate(values):
            rendered = [to_c(e, names) for e in exprs]
            old = config_nodes[position] if position < len(config_nodes) else None
            if position == 2 and wanted.smem is None and stream is None:
                declared = self._declaration(old, set(), node) if old is not None else None
                if old is not None and declared is not None:
                    edits.append(self._declaration_edit(declared, rendered))
                    items.append(self.src(old))
                continue  # dropped: no shared memory and no stream after it
            new = _dims(rendered) if is_dims else rendered[0]
            declared = self._declaration(old, set(rendered), node) if old else None
            if declared is not None and old is not None and _fits(declared, rendered):
                edits.append(self._declaration_edit(declared, rendered))
                items.append(self.src(old))
            else:
                items.append(new)
        if stream is not None:
            items.append(stream)
        config = "<<<" + ", ".join(items) + ">>>"
        edits.append(Edit(site.span, config))
        if wanted.needs_opt_in:
            edits.append(self._opt_in(site, node, to_c(wanted.smem or parse_expr("0"), names)))
        return SiteRewrite(site, tuple(sorted(edits, key=_edit_key)), config)

    def _opt_in(self, site: LaunchSite, node: Node, smem: str) -> Edit:
        """`cudaFuncSetAttribute(kernel, MaxDynamicSharedMemorySize, smem);` before the launch."""
        statement = node.parent.parent if node.parent else None
        assert statement is not None
        start = statement.start_byte
        line_start = self.data.rfind(b"\n", 0, start) + 1
        indent = self.data[line_start:start].decode("utf-8", errors="replace")
        if indent.strip():
            indent = " "
            sep = " "
        else:
            sep = "\n" + indent
        text = (
            f"cudaFuncSetAttribute({site.callee}, cudaFuncAttributeMaxDynamicSharedMemorySize, "
            f"{smem});{sep}"
        )
        point = self.point(start)
        return Edit(Span(point, point), text)

    # configuration variables --------------------------------------------------------------

    def _declaration(self, item: Node, uses: set[str], call: Node) -> Node | None:
        """The init-declarator of `item` when `item` is a local variable whose initialiser can
        be rewritten instead of the call: declared in this function before the call, in a block
        around it with no loop between, used nowhere else, and every name in `uses` (the site's
        expressions) neither mentioned between the declaration and the call nor aliased."""
        if item.type != "identifier":
            return None
        name = self.src(item)
        function = _ancestor(call, "function_definition")
        if function is None:
            return None
        declarators = [
            n
            for n in walk_nodes(function)
            if n.type == "init_declarator"
            and (d := n.child_by_field_name("declarator")) is not None
            and d.type == "identifier"
            and self.src(d) == name
        ]
        mentions = [
            n for n in walk_nodes(function) if n.type == "identifier" and self.src(n) == name
        ]
        if len(declarators) != 1 or len(mentions) != 2:
            return None
        declarator = declarators[0]
        declaration = declarator.parent
        if declaration is None or declaration.type != "declaration":
            return None
        block = declaration.parent
        if block is None or block.type != "compound_statement":
            return None
        if declaration.end_byte > call.start_byte or not _encloses(block, call):
            return None
        for ancestor in _ancestors(call):
            if ancestor == block:
                break
            if ancestor.type in _LOOPS:
                return None
        kind = " ".join(
            self.src(c)
            for c in declaration.children[:-1]
            if c.type != "init_declarator" and c.type != ","
        )
        if "constexpr" in kind or "static" in kind or not _INTEGER_TYPES.match(kind.strip()):
            return None
        identifiers: set[str] = set()
        for text in uses:
            identifiers |= set(re.findall(r"[A-Za-z_]\w*", text))
        between = self.data[declaration.end_byte : call.start_byte]
        for word in identifiers:
            pattern = rb"(?<![\w])" + re.escape(word.encode()) + rb"(?![\w])"
            if re.search(pattern, between):
                return None
            aliased = rb"&\s*" + re.escape(word.encode()) + rb"(?![\w])"
            if re.search(aliased, self.data[function.start_byte : function.end_byte]):
                return None
        return declarator

    def _declaration_edit(self, declarator: Node, rendered: list[str]) -> Edit:
        """The initialiser of `declarator` (found by `_declaration`) rewritten to `rendered`."""
        value = declarator.child_by_field_name("value")
        kind_is_dim3 = "dim3" in self.src(declarator.parent) if declarator.parent else False
        if value is None:  # `dim3 block;`: not reached (_fits requires a value)
            raise AssertionError("declaration without a value")
        if value.type == "argument_list":
            text = "(" + ", ".join(rendered) + ")"
        elif value.type == "initializer_list":
            text = "{" + ", ".join(rendered) + "}"
        elif kind_is_dim3 and len(rendered) > 1:
            text = _dims(rendered)
        else:
            text = rendered[0]
        return Edit(self.span(value.start_byte, value.end_byte), text)


def launch_callee_of(parent: Node, node: Node) -> bool:
    """`node` is the launched name of a `<<<...>>>` call."""
    if parent.type != "call_expression" or parent.child_by_field_name("function") != node:
        return False
    return any(c.type == "kernel_call_syntax" for c in parent.children)


def _fits(declarator: Node, rendered: list[str]) -> bool:
    """A declaration can hold the new value: `dim3` any dimensions, an integer one."""
    value = declarator.child_by_field_name("value")
    declaration = declarator.parent
    if value is None or declaration is None:
        return False
    is_dim3 = any(c.type == "type_identifier" and c.text == b"dim3" for c in declaration.children)
    return is_dim3 or len(rendered) == 1


def _dims(rendered: list[str]) -> str:
    return rendered[0] if len(rendered) == 1 else "dim3(" + ", ".join(rendered) + ")"


def _items(node: Node | None) -> list[Node]:
    """The comma-separated items of an argument list or a `<<<...>>>`, comments left out."""
    if node is None:
        return []
    return [c for c in node.named_children if c.type != "comment"]


def _pure(node: Node) -> bool:
    return all(n.type in _PURE_NODES for n in walk_nodes(node) if n.is_named)


def _enclosing_call(node: Node) -> Node | None:
    """The call whose argument list holds `node` (through casts and `&`)."""
    current = node.parent
    while current is not None and current.type != "argument_list":
        if current.type in ("compound_statement", "declaration", "expression_statement"):
            return None
        current = current.parent
    return current.parent if current is not None else None


def _ancestor(node: Node, kind: str) -> Node | None:
    return next((a for a in _ancestors(node) if a.type == kind), None)


def _ancestors(node: Node) -> Iterator[Node]:
    current = node.parent
    while current is not None:
        yield current
        current = current.parent


def _encloses(outer: Node, inner: Node) -> bool:
    return outer.start_byte <= inner.start_byte and inner.end_byte <= outer.end_byte
