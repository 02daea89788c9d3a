"""A draft test spec for a kernel that has none: the "Add test spec" code action, `bench` and
`optimize` offer it for the user to review. Types come from the signature, sizes from the
integer parameters, the launch from the usual 1-D / 2-D / 3-D index patterns; the draft always
parses (`parse_spec`), though its values are guesses.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace

from cuda_llm_lsp.source.c_types import (
    DTYPES,
    FLOAT_DTYPES,
    VECTOR_TYPES,
    c_type_dtype,
    resolve_alias,
    resolved_base,
    type_aliases,
)
from cuda_llm_lsp.source.expr import ExprError, parse_expr
from cuda_llm_lsp.source.kernels import Kernel, Param
from cuda_llm_lsp.source.launch_facts import StaticLaunch, static_launch
from cuda_llm_lsp.source.roles import infer_roles
from cuda_llm_lsp.source.spec.cases import MAX_THREADS_PER_BLOCK
from cuda_llm_lsp.source.templates import (
    int_literal,
    split_template_args,
    template_constants,
    template_parameters,
)

_SIZE_DTYPES = frozenset({"int32", "uint32", "int64", "uint64"})
_ONE_D_NAMES = (
    "n",
    "size",
    "len",
    "length",
    "count",
    "num",
    "numel",
    "num_elements",
    "total",
    "elements",
)
_PAIRS = (
    ("rows", "cols"), ("nrows", "ncols"), ("num_rows", "num_cols"), ("n_rows", "n_cols"),
    ("height", "width"), ("h", "w"), ("ny", "nx"), ("m", "n"),
)  # fmt: skip
_COUNT_NOTES = ("# review: counts assume", "# counts assume")
_LAUNCH_NOTES = ("# 1-D launch", "# 2-D launch", "# 3-D launch")
_TRIPLES = (("nz", "ny", "nx"), ("depth", "height", "width"), ("d", "h", "w"))


def draft_spec(kernel: Kernel, source: str) -> str:
    """A reviewable `/* @cuda-llm ... */` block for a kernel without one; it must parse.

    Long because it writes the draft's lines in the order they appear, one block per spec key."""
    # an unnamed parameter is keyed by its position (`args.3`), as the spec parser reads it
    named = tuple(replace(p, name=p.name or str(p.index)) for p in kernel.params)
    kernel = replace(kernel, params=named)
    roles = infer_roles(kernel, source)
    aliases = type_aliases(source)
    lines = [
        "/* @cuda-llm",
        f"# Draft test spec for {kernel.name}, inferred from its signature: review every line.",
        "# Case i takes value i of every size list; the last case is the one that is timed.",
    ]
    template_args: dict[str, str] = {}
    if kernel.is_template:
        instance, template_args, note = _draft_instance(kernel, source)
        lines.append(f"# {note}")
        lines.append(f"instance = {_quote(instance)}")
    constants = template_constants(template_args)

    ints: list[Param] = []
    floats: list[Param] = []
    for p in kernel.params:
        if p.is_pointer:
            continue
        dtype = c_type_dtype(resolved_base(p, template_args))
        if dtype in FLOAT_DTYPES:
            floats.append(p)
        elif dtype is not None:
            ints.append(p)
    sizable = [
        p
        for p in ints
        if c_type_dtype(resolved_base(p, template_args)) in _SIZE_DTYPES
        and not p.name.isdigit()  # an unnamed parameter (`args.3`) is no name to size by
    ]
    by_lower = {p.name.lower(): p.name for p in sizable}
    block_size = _draft_block_size(kernel, constants)

    sizes: dict[str, list[int]] = {}
    counts: dict[str, str] = {}
    invented: str | None = None  # a size no parameter carries: the guessed buffer length
    pointers = [p for p in kernel.params if p.is_pointer]
    triple = next((t for t in _TRIPLES if all(n in by_lower for n in t)), None)
    pair = None if triple else next((t for t in _PAIRS if all(n in by_lower for n in t)), None)
    if triple:
        z, y, x = (by_lower[n] for n in triple)
        sizes = {x: [1, 17, 67, 256], y: [1, 9, 33, 256], z: [1, 5, 19, 256]}
        grid = f"[{_quote(f'cdiv({x}, 8)')}, {_quote(f'cdiv({y}, 8)')}, {_quote(f'cdiv({z}, 4)')}]"
        block = "[8, 8, 4]"
        lines.append(f"# 3-D launch: one thread per ({x}, {y}, {z}) point.")
        default_count = f"{z} * {y} * {x}"
    elif pair:
        y, x = (by_lower[n] for n in pair)
        sizes = {y: [1, 17, 100, 2048], x: [1, 33, 129, 2048]}
        grid = f"[{_quote(f'cdiv({x}, 16)')}, {_quote(f'cdiv({y}, 16)')}]"
        block = "[16, 16]"
        lines.append(f"# 2-D launch: one thread per ({x}, {y}) element, x along {x}.")
        default_count = f"{y} * {x}"
        k = by_lower.get("k") if pair == ("m", "n") else None
        if k is not None:
            sizes[k] = [1, 19, 64, 1024]
            lines.append(
                f"# Counts assume a = {y} x {k}, b = {k} x {x}, others {y} x {x}: check them."
            )
            for p in pointers:
                if p.name.lower() in ("a", "x", "lhs"):
                    counts[p.name] = f"{y} * {k}"
                elif p.name.lower() in ("b", "w", "rhs"):
                    counts[p.name] = f"{k} * {x}"
    else:
        main = next((by_lower[n] for n in _ONE_D_NAMES if n in by_lower), None)
        if main is None and sizable:
            main = sizable[0].name
        if main is None:
            main = invented = _fresh_name("n", {p.name for p in kernel.params})
            sizes[main] = [256, 1024, 65536, 1048576]
            lines.append(
                f"# {kernel.name} takes no size, so {main} is only the buffer length: these are "
                f"multiples of the block size; check what the kernel really indexes."
            )
        others = [p.name for p in sizable if p.name != main]
        if others:
            sizes[main] = [1, 17, 1000, 65536]
            for name in others:
                sizes[name] = [1, 3, 8, 32]
            lines.append(
                "# Review: counts assume every buffer holds "
                f"{' * '.join([main, *others])} elements."
            )
            default_count = " * ".join([main, *others])
        else:
            sizes.setdefault(main, [1, 17, 1000, 1048576])
            default_count = main
        block_text = block_size if isinstance(block_size, str) else str(block_size)
        grid = _quote(f"cdiv({main}, {block_text})")
        block = _quote(block_size) if isinstance(block_size, str) else str(block_size)
        lines.append(f"# 1-D launch: one thread per element of {main}.")

    facts = static_launch(kernel, source) if not kernel.is_template else None
    smem_line = None
    if facts is not None:
        used: set[str] = set()
        launch_known = facts.grid is not None and facts.block is not None
        exprs = [*facts.counts.values()]
        if launch_known:
            exprs += [*(facts.grid or ()), *(facts.block or ()), facts.smem or "0"]
        for text in exprs:
            used |= _names(text)
        int_names = {p.name for p in ints}
        if used <= int_names:
            for name in sorted(used - set(sizes), key=[p.name for p in ints].index):
                sizes[name] = [32, 64, 96, 768]
            counts.update({k: _folded(v) for k, v in facts.counts.items()})
            if all(p.name in facts.counts for p in pointers):  # the guesses' notes are moot
                lines = [ln for ln in lines if not ln.lower().startswith(_COUNT_NOTES)]
            if facts.counts:
                lines.append(f"# Counts of {', '.join(facts.counts)}: from the file's allocations.")
            if launch_known:
                lines = [ln for ln in lines if not ln.startswith(_LAUNCH_NOTES)]
                grid = _dims_text(facts.grid or ())
                block = _dims_text(facts.block or ())
                # one element per launched point: each grid dimension's sizes, multiplied (a
                # square launch over (N, N) is N * N; an integer it does not use, no factor)
                per_dim = [sorted(_names(t) & set(sizes)) for t in facts.grid or ()]
                factors = [" * ".join(names) for names in per_dim if names]
                if factors:
                    default_count = " * ".join(factors)
                    lines = [ln for ln in lines if not ln.lower().startswith(_COUNT_NOTES)]
                lines.append(f"# Launch as the file launches it (line {facts.line + 1}).")
                if facts.smem is None:
                    lines.append(
                        "# review: the launch site passes shared memory this draft "
                        "cannot express over the sizes: add smem"
                    )
                elif facts.smem != "0":
                    smem_line = f"smem = {_quote(facts.smem)}"
            if invented is not None and launch_known and all(p.name in counts for p in pointers):
                # the launch and every extent are the file's: the guessed length is no size
                launch = (*(facts.grid or ()), *(facts.block or ()), facts.smem or "0")
                used = set().union(*(_names(t) for t in (*counts.values(), *launch)))
                if invented not in used:
                    del sizes[invented]
                    lines = [ln for ln in lines if "takes no size" not in ln]
        if not sizes:
            lines = [ln for ln in lines if not ln.startswith("# Case i takes")]
            lines.append(
                "# No sizes: the file launches it and sizes its buffers with fixed numbers, "
                "so there is one case."
            )

    for name, values in sizes.items():
        lines.append(f"sizes.{name} = [{', '.join(str(v) for v in values)}]")
    lines.append(f"grid = {grid}")
    lines.append(f"block = {block}")
    if smem_line:
        lines.append(smem_line)
    lines.append("# Roles: in = only read (checked unchanged); inout = read and written;")
    lines.append("# out = only written (poisoned before each run: every element must be written).")
    width = max((len(p.name) for p in kernel.params), default=1)
    for p in kernel.params:
        pad = " " * (width - len(p.name))
        if p.is_pointer:
            base = resolve_alias(resolved_base(p, template_args), aliases)
            dtype = c_type_dtype(base)
            count = counts.get(p.name, default_count)
            note = ""
            if facts is not None and dtype not in DTYPES and p.name in facts.dtypes:
                dtype = facts.dtypes[p.name]  # a `void*` parameter: the allocation's type
            file_text = facts.written.get(p.name, "") if facts is not None else ""
            if count.isdigit() and file_text and file_text != count:
                note = f"  # {file_text} in the file"
            if base in VECTOR_TYPES:
                dtype, lanes = VECTOR_TYPES[base]
                count = f"({count}) * {lanes}" if " " in count else f"{count} * {lanes}"
                note = f"  # {base}: {lanes} {dtype} per element"
            elif dtype not in DTYPES:
                note = f"  # review: {base}* has no listed element type; counted as float32"
                dtype = "float32"
            lines.append(
                f"args.{p.name}{pad} = {_quote(f'{roles[p.name]} {dtype}[{count}]')}{note}"
            )
        elif p in ints:
            value, note = _int_value(p.name, sizes, facts)
            lines.append(f"args.{p.name}{pad} = {_quote(value)}{note}")
        elif p in floats:
            lines.append(f"args.{p.name}{pad} = 0.5  # review: a representative value")
        else:
            declared = p.base_type if "=" in p.c_type else p.c_type.strip()  # no default value
            lines.append(
                f"# TODO args.{p.name}: a {declared} cannot be given a value in a spec; a capture"
                " of your program can (`cuda-llm capture`, then `spec --from-capture` writes it"
                ' as "@captured")'
            )
    if not pointers:
        lines.append(f"# {kernel.name} has no pointer parameters: there is no output to compare.")
    lines.append("*/")
    return "\n".join(lines) + "\n"


def _int_value(
    name: str, sizes: Mapping[str, list[int]], facts: StaticLaunch | None
) -> tuple[str, str]:
    """An integer scalar's value and its line's comment: a size is its own name; else what the
    file passes for it, where that is a number or over the sizes; else 1, with what the file
    passes in a review comment (never a silent guess where the file says otherwise)."""
    if name in sizes:
        return name, ""
    if facts is None:
        return "1", ""
    value = facts.scalars.get(name)
    if value is not None and _names(value) <= set(sizes):
        return _folded(value), ""
    text = facts.passed.get(name)
    if text is None or text == "1":
        return "1", ""
    return "1", f"  # review: the file passes {text}, which this draft cannot express"


def _names(text: str) -> set[str]:
    try:
        return parse_expr(text).names()
    except ExprError:
        return {"?"}


def _folded(text: str) -> str:
    """An expression of literals only as its value (`14 * 27` -> `378`); others unchanged."""
    try:
        expr = parse_expr(text)
        if expr.names():
            return text
        value = expr.evaluate({})
    except (ExprError, ZeroDivisionError):
        return text
    return str(value) if isinstance(value, int) and value >= 0 else text


def _dims_text(parts: tuple[str, ...]) -> str:
    def one(text: str) -> str:
        return text if text.isdigit() else _quote(text)

    return one(parts[0]) if len(parts) == 1 else "[" + ", ".join(one(p) for p in parts) + "]"


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _fresh_name(name: str, taken: set[str]) -> str:
    candidate = name
    while candidate in taken:
        candidate += "_"
    return candidate


def _draft_block_size(kernel: Kernel, constants: Mapping[str, int]) -> int | str:
    for name, value in constants.items():
        upper = name.upper()
        if ("BLOCK" in upper or "THREADS" in upper) and 1 <= value <= MAX_THREADS_PER_BLOCK:
            return name
    if kernel.launch_bounds:
        first = int_literal(split_template_args(kernel.launch_bounds)[0])
        if first is not None and 1 <= first <= MAX_THREADS_PER_BLOCK:
            return first
    return 256


def _draft_instance(kernel: Kernel, source: str) -> tuple[str, dict[str, str], str]:
    params = template_parameters(kernel, source)
    for text in kernel.instantiations:
        m = re.fullmatch(r"\s*([A-Za-z_][\w:]*)\s*<(.*)>\s*", text, re.S)
        if m and m.group(1).split("::")[-1] == kernel.name:
            args = split_template_args(m.group(2))
            if 0 < len(args) <= len(kernel.template_params):
                return (
                    text.strip(),
                    dict(zip(kernel.template_params, args, strict=False)),
                    "instance: the first instantiation launched in this file.",
                )
    args = []
    for p in params:
        if p.default is not None:
            args.append(p.default)
        elif p.is_type:
            args.append("float")
        else:
            upper = p.name.upper()
            args.append(
                "16"
                if "TILE" in upper
                else "256"
                if ("BLOCK" in upper or "THREAD" in upper)
                else "4"
            )
    instance = f"{kernel.name}<{', '.join(args)}>"
    return (
        instance,
        dict(zip(kernel.template_params, args, strict=False)),
        "instance: no launch site found, so these template arguments are a guess: review them.",
    )
