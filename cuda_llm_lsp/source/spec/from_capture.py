"""A test spec from a captured launch (docs/design.md "Capture", issue 39): the sizes, launch,
buffer extents, roles and data the user's program really used.

- Sizes are the kernel's integer parameters that an extent or the grid is an expression of;
  the captured values are the timed (last) case, smaller cases are the same sizes scaled down
  (each keeps its power-of-two alignment, up to 32). Other integers keep their captured value.
- A pointer's extent is the bytes from the pointer to the end of its allocation, divided by its
  element size, matched against products of up to three integer parameters (fewest factors
  first); an allocation larger than any product (a caching allocator's segment) gets the
  largest product that fits, and no product at all a literal count: both with `# review:`.
- Roles come from the bytes: a buffer the launch changed is `inout` (the captured bytes before
  the launch are its data, so elements left alone compare too); an unchanged one is `in` when
  the source never writes it, else `inout`.
- The grid per dimension is `cdiv(P, b)` (P a product of up to two sizes, maybe times 32; b a
  block dimension or the block's thread count) where that equals the captured value, else the
  literal; the block and `smem` are the captured values.
- A parameter no spec value can give (a struct, an enum, `cutlass::half_t`) or whose bytes hold
  device addresses is `"@captured"` (with the element type of what it points to where its type
  names one): its bytes as passed, the addresses relocated by the evaluator
  (`evaluate/captured.with_captured_arguments`); the spec then has the captured case alone.
- `capture = "DIR"` makes the evaluator use the captured bytes as the timed case's inputs and
  first check that the original reproduces the captured outputs (`evaluate/inputs.py`,
  `evaluate/gpu.py`).
Pure: reads the manifest's data only (no array file).
"""

from __future__ import annotations

import itertools
import math
import re
import struct
from dataclasses import dataclass, replace

from cuda_llm_lsp.source.brackets import close_index, outside_angles, split_top
from cuda_llm_lsp.source.c_types import (
    DTYPES,
    FLOAT_DTYPES,
    INT_RANGES,
    VECTOR_TYPES,
    c_type_dtype,
    normalize_c_type,
    resolve_alias,
    type_aliases,
)
from cuda_llm_lsp.source.capture_manifest import (
    Capture,
    CapturedParam,
    CaptureError,
    function_name,
)
from cuda_llm_lsp.source.kernels import Kernel
from cuda_llm_lsp.source.roles import infer_roles
from cuda_llm_lsp.source.spec.model import CAPTURED

ITEMSIZE: dict[str, int] = {
    "float32": 4, "float64": 8, "float16": 2, "bfloat16": 2,
    "int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8,
}  # fmt: skip
_MAX_FACTORS = 3


@dataclass(frozen=True)
class Extent:
    count: str  # the element count expression
    factors: tuple[str, ...]  # the sizes it names
    review: str | None = None


def find_captured_kernel(kernels: list[Kernel], capture: Capture) -> Kernel:
    """The file's kernel the capture is of (by unqualified name, then parameter count)."""
    name = capture.function_name
    same = [k for k in kernels if k.name == name]
    fitting = [k for k in same if len(k.params) == len(capture.params)]
    if fitting:
        return fitting[0]
    if same:
        raise CaptureError(
            f"{name} takes {len(same[0].params)} parameters here but the captured launch passed "
            f"{len(capture.params)}: the file is not the source the program was built from"
        )
    names = ", ".join(k.name for k in kernels) or "none"
    raise CaptureError(
        f"the capture is of {capture.demangled or capture.mangled}; this file has no kernel "
        f"{name!r} (kernels: {names})"
    )


def template_instance(demangled: str) -> str | None:
    """`void ns::k<float, 4>(float*, int)` -> `k<float, 4>` (None without template arguments)."""
    depth, cut = 0, len(demangled)
    for i, ch in enumerate(demangled):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            cut = i
            break
    head = demangled[:cut].strip()
    if not head.endswith(">"):
        return None
    depth = 0
    for i in range(len(head) - 1, -1, -1):
        if head[i] == ">":
            depth += 1
        elif head[i] == "<":
            depth -= 1
            if depth == 0:
                name = function_name(head[:i] + "()")
                return f"{name}{head[i:]}"
    return None


def scalar_value(param: CapturedParam, dtype: str) -> int | float:
    """A by-value parameter's captured bytes as `dtype`."""
    raw = param.raw
    if dtype in FLOAT_DTYPES:
        if dtype == "float32" and len(raw) >= 4:
            return float(struct.unpack("<f", raw[:4])[0])
        if dtype == "float64" and len(raw) >= 8:
            return float(struct.unpack("<d", raw[:8])[0])
        if dtype == "float16" and len(raw) >= 2:
            return float(struct.unpack("<e", raw[:2])[0])
        if dtype == "bfloat16" and len(raw) >= 2:
            return float(struct.unpack("<f", b"\0\0" + raw[:2])[0])
        raise CaptureError(f"parameter {param.index}: {len(raw)} bytes for a {dtype}")
    signed = INT_RANGES.get(dtype, (-1, 0))[0] < 0
    width = {"int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "bool": 1}
    n = width.get(dtype, 8)
    return int.from_bytes(raw[:n], "little", signed=signed)


def match_extent(elements: int, ints: dict[str, int]) -> Extent:
    """`elements` as a product of the integer parameters (fewest factors, signature order)."""
    names = [n for n, v in ints.items() if v > 1]
    best_fit: tuple[int, tuple[str, ...]] | None = None
    for k in range(1, _MAX_FACTORS + 1):
        for combo in itertools.combinations(names, k):
            product = math.prod(ints[n] for n in combo)
            if product == elements:
                return Extent(" * ".join(combo), combo)
            if product < elements and (best_fit is None or product > best_fit[0]):
                best_fit = (product, combo)
    if best_fit is not None and best_fit[0] * 2 > elements:
        combo = best_fit[1]
        return Extent(
            " * ".join(combo),
            combo,
            f"the allocation holds {elements} elements past the pointer; counted as "
            f"{' * '.join(combo)} = {best_fit[0]}, the largest product of integer parameters "
            "that fits",
        )
    return Extent(
        str(max(elements, 1)),
        (),
        f"{elements} elements (the allocation past the pointer) is no product of the integer "
        "parameters: a fixed count, the same in every case",
    )


def match_grid(value: int, ints: dict[str, int], block: tuple[int, int, int]) -> Extent:
    """One grid dimension as `cdiv(P, b)` over the sizes, else the literal."""
    if value == 1:
        return Extent("1", ())
    threads = block[0] * block[1] * block[2]
    divisors = sorted({b for b in (*block, threads) if b > 1})
    names = [n for n, v in ints.items() if v > 1]
    for k in (1, 2):
        for combo in itertools.combinations(names, k):
            product = math.prod(ints[n] for n in combo)
            text = " * ".join(combo)
            if product == value:
                return Extent(text, combo)
            for d in divisors:
                for scale, shown in ((1, text), (32, f"{text} * 32")):
                    if -(-product * scale // d) == value:
                        return Extent(f"cdiv({shown}, {d})", combo)
    return Extent(
        str(value),
        (),
        f"{value} is no cdiv(size, block) of the captured sizes: fixed in every case",
    )


def tie_to_sizes(ints: dict[str, int], sizes: dict[str, int]) -> dict[str, str]:
    """Integer parameters that are no size but equal one (or a product of two) in the captured
    launch, as that size's expression: a leading dimension `lda == M`, a loop bound `K == M`.
    A literal would keep the captured value while the smaller cases shrink the sizes, and the
    kernel would index `A[i + k * lda]` past `A[M * K]` there."""
    tied: dict[str, str] = {}
    names = list(sizes)
    for name, value in ints.items():
        if name in sizes:
            continue
        for k in (1, 2):
            combo = next(
                (
                    c
                    for c in itertools.combinations(names, k)
                    if math.prod(sizes[n] for n in c) == value
                ),
                None,
            )
            if combo:
                tied[name] = " * ".join(combo)
                break
    return tied


def smaller(value: int, factor: int) -> int:
    """`value / factor`, keeping `value`'s power-of-two alignment (up to 32), at least 1."""
    align = min(value & -value, 32) if value > 0 else 1
    return max(align, value // factor // align * align)


def spec_from_capture(
    kernel: Kernel, source: str, capture: Capture, capture_path: str, cases: int = 3
) -> str:
    """The `/* @cuda-llm ... */` block for `kernel` from `capture`; it parses (`parse_spec`).

    Long because it writes the spec's lines in order, one block per key."""
    if len(capture.params) != len(kernel.params):
        raise CaptureError(
            f"the captured launch passed {len(capture.params)} parameters; {kernel.name} takes "
            f"{len(kernel.params)}"
        )
    aliases = type_aliases(source)
    roles = infer_roles(kernel, source)
    reviews: list[str] = []
    ints: dict[str, int] = {}
    scalars: dict[str, str] = {}
    # an unnamed parameter is keyed by its position (`args.3`), as the spec parser reads it
    params = [replace(p, name=p.name or str(p.index)) for p in kernel.params]
    demangled_types = parameter_types(capture.demangled)
    for p, cp in zip(params, capture.params, strict=True):
        if p.is_pointer:
            continue
        dtype = c_type_dtype(resolve_alias(normalize_c_type(p.base_type), aliases))
        if dtype is None or cp.regions:
            # a struct, enum or class type (or one holding device addresses): its bytes as
            # passed, the buffers they point to relocated (evaluate/captured.py)
            shown = demangled_types[p.index] if p.index < len(demangled_types) else p.c_type
            hint = None
            if cp.regions:
                hint = element_type(shown) or element_type(struct_body(source, shown))
            scalars[p.name] = f"{CAPTURED} {hint}" if hint else CAPTURED
            if cp.regions and not hint:
                reviews.append(
                    f"args.{p.name}: the {len(cp.regions)} buffer(s) it points to are compared "
                    f'byte for byte; "{CAPTURED} float32" (their element type) compares with '
                    "that type's tolerance"
                )
            continue
        value = scalar_value(cp, dtype)
        if isinstance(value, float):
            scalars[p.name] = repr(value) if math.isfinite(value) else "0.0"
        else:
            scalars[p.name] = str(value)
            if dtype != "bool" and value > 1:
                ints[p.name] = value

    lines_args: list[str] = []
    used: set[str] = set()
    width = max((len(p.name) for p in params), default=1)
    pointer_lines: dict[str, str] = {}
    for p, cp in zip(params, capture.params, strict=True):
        if not p.is_pointer:
            continue
        base = resolve_alias(normalize_c_type(p.base_type), aliases)
        dtype = c_type_dtype(base)
        lanes = 1
        if base in VECTOR_TYPES:
            dtype, lanes = VECTOR_TYPES[base]
        if dtype not in DTYPES:
            reviews.append(f"args.{p.name}: {base}* has no listed element type; read as uint8")
            dtype = "uint8"
        assert dtype is not None
        pointer = cp.pointer
        if pointer is None:
            reviews.append(
                f"args.{p.name}: the captured value 0x{cp.as_int(False):x} is not an address "
                "in device memory (null, or host memory): a 1-element placeholder"
            )
            pointer_lines[p.name] = f"in {dtype}[1]"
            continue
        itemsize = ITEMSIZE[dtype]
        elements = pointer.captured // itemsize
        extent = match_extent(elements, ints)
        if lanes > 1 and not extent.factors:
            extent = match_extent(elements // lanes, ints)
            if extent.factors:
                extent = Extent(f"{extent.count} * {lanes}", extent.factors, extent.review)
        used.update(extent.factors)
        if extent.review:
            reviews.append(f"args.{p.name}: {extent.review}")
        if pointer.captured % itemsize:
            reviews.append(f"args.{p.name}: {pointer.captured} bytes is no whole number of {dtype}")
        if pointer.changed:
            role = "inout"
            if p.is_const:
                role = "in"
                reviews.append(
                    f"args.{p.name}: const, yet its bytes changed (another parameter aliases it)"
                )
        elif roles.get(p.name, "in") == "in":
            role = "in"
        else:
            role = "inout"  # the source may write it: compared, not required unchanged
        pointer_lines[p.name] = f"{role} {dtype}[{extent.count}]"

    grid_parts = []
    for value in capture.grid:
        g = match_grid(value, ints, capture.block)
        used.update(g.factors)
        if g.review and value > 1:
            reviews.append(f"grid: {g.review}")
        grid_parts.append(g.count)
    while len(grid_parts) > 1 and grid_parts[-1] == "1":
        grid_parts.pop()
    block_parts = list(capture.block)
    while len(block_parts) > 1 and block_parts[-1] == 1:
        block_parts.pop()

    sizes = {name: value for name, value in ints.items() if name in used}
    tied = tie_to_sizes(ints, sizes)
    has_captured = any(v.startswith(CAPTURED) for v in scalars.values())
    if has_captured:  # the captured bytes fit the captured launch alone
        cases = 1
    factors = (16, 4)[-(cases - 1) :] if cases > 1 else ()
    rows: list[dict[str, int]] = []  # the smaller cases, each once (128 / 16 and 128 / 4 are
    for f in factors:  # both 32 at an alignment of 32) and never the captured case again
        row = {name: smaller(value, f) for name, value in sizes.items()}
        if row != sizes and row not in rows:
            rows.append(row)
    size_lists = {name: [r[name] for r in rows] + [value] for name, value in sizes.items()}

    instance = template_instance(capture.demangled) if kernel.is_template else None
    if kernel.is_template and instance is None:
        reviews.append("instance: the captured name carries no template arguments: add one")
    lines = [
        "/* @cuda-llm",
        f"# From a capture of {capture.demangled or capture.mangled}, launch {capture.launch}, on "
        f"{capture.device or 'the GPU'} ({capture.arch or '?'}): {capture.duration_ms:.4g} ms.",
        "# The last case is the captured one (its data: the capture); the others are smaller."
        if not has_captured
        else '# The captured case alone: "@captured" arguments pass the bytes the program did.',
        f"capture = {_quote(capture_path)}",
    ]
    if instance:
        lines.append(f"instance = {_quote(instance)}")
    for name, values in size_lists.items():
        lines.append(f"sizes.{name} = [{', '.join(str(v) for v in values)}]")
    grid = _dims(grid_parts)
    lines.append(f"grid = {grid}")
    lines.append(f"block = {_dims([str(b) for b in block_parts])}")
    if capture.smem:
        lines.append(f"smem = {capture.smem}")
        reviews.append(
            f"smem: {capture.smem} bytes as captured; if it depends on the sizes, write it as an "
            "expression"
        )
    if tied:
        lines.append(
            f"# {', '.join(tied)}: equal to a size in the captured launch, so in every case."
        )
    lines.append("# Roles: in = unchanged by the launch; inout = changed (or possibly written).")
    for p in params:
        pad = " " * (width - len(p.name))
        if p.is_pointer:
            lines_args.append(f"args.{p.name}{pad} = {_quote(pointer_lines[p.name])}")
        elif p.name in sizes:
            lines_args.append(f"args.{p.name}{pad} = {_quote(p.name)}")
        elif p.name in tied:
            lines_args.append(f"args.{p.name}{pad} = {_quote(tied[p.name])}")
        elif scalars[p.name].startswith(CAPTURED):
            lines_args.append(f"args.{p.name}{pad} = {_quote(scalars[p.name])}")
        else:
            lines_args.append(f"args.{p.name}{pad} = {scalars[p.name]}")
    lines.extend(lines_args)
    lines.extend(f"# review: {r}" for r in reviews)
    lines.append("*/")
    return "\n".join(lines) + "\n"


def parameter_types(demangled: str) -> list[str]:
    """The parameter types of a demangled signature, split at its top-level commas."""
    open_at = outside_angles(demangled, "(")
    if open_at < 0:
        return []
    brackets = ("<([", ">])")
    end = close_index(demangled, open_at + 1, *brackets)
    if end < 0:  # no closing ')': the last type is not known to be whole
        types = split_top(demangled[open_at + 1 :], *brackets)[:-1]
    else:
        types = split_top(demangled[open_at + 1 : end], *brackets)
    return [t for t in types if t]


_POINTEE = re.compile(r"([A-Za-z_][\w:]*(?:\s+(?:int|char|short|long))*)\s*\*")
_WRAPPED = re.compile(r"device_ptr<\s*([A-Za-z_][\w:\s]*?)\s*>")


def element_type(type_text: str) -> str | None:
    """The element type a by-value struct's pointers hold, where its type names one: the
    first `T*` inside it (`cute::gmem_ptr<float*>`) or `device_ptr<T>`; None otherwise."""
    for pattern in (_POINTEE, _WRAPPED):
        for m in pattern.finditer(type_text):
            dtype = c_type_dtype(normalize_c_type(m.group(1).replace("const", "").strip()))
            if dtype in DTYPES:
                return dtype
    return None


def struct_body(source: str, type_name: str) -> str:
    """The member declarations of the file's `struct` / `class` named like `type_name`'s last
    component (`ns::View` -> `View`), for its pointers' element type; "" when the file has none."""
    name = re.sub(r"<.*", "", type_name).rsplit("::", 1)[-1].strip()
    if not re.fullmatch(r"[A-Za-z_]\w*", name):
        return ""
    m = re.search(rf"\b(?:struct|class)\s+{name}\b[^{{;]*\{{", source)
    if not m:
        return ""
    end = close_index(source, m.end(), "{", "}", limit=20_000)
    return source[m.end() : end] if end >= 0 else ""


def _dims(parts: list[str]) -> str:
    def one(text: str) -> str:
        return text if text.isdigit() else _quote(text)

    if len(parts) == 1:
        return one(parts[0])
    return "[" + ", ".join(one(p) for p in parts) + "]"


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
