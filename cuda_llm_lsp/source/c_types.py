"""C types of kernel parameters and the element types a test spec names (`float32`, `int64`, …).

One table, shared by the spec parser (does `float32[n]` match `const float*`?), the draft spec
and the evaluator (which numpy type a scalar argument is packed as). Knows nothing of specs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal

from cuda_llm_lsp.source.kernels import Param

DType = Literal[
    "float32", "float64", "float16", "bfloat16", "int8", "uint8", "int32", "uint32", "int64"
]
DTYPES: tuple[str, ...] = (
    "float32", "float64", "float16", "bfloat16", "int8", "uint8", "int32", "uint32", "int64",
)  # fmt: skip
FLOAT_DTYPES = frozenset({"float32", "float64", "float16", "bfloat16"})
# The values an integer type holds (both ends included).
INT_RANGES: dict[str, tuple[int, int]] = {
    "int8": (-(2**7), 2**7 - 1),
    "uint8": (0, 2**8 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint64": (0, 2**64 - 1),
    "bool": (0, 1),
}

_C_TYPES: dict[str, str] = {
    "float": "float32", "double": "float64",
    "half": "float16", "__half": "float16",
    "__nv_bfloat16": "bfloat16", "nv_bfloat16": "bfloat16", "__bfloat16": "bfloat16",
    "bfloat16": "bfloat16",
    "int": "int32", "signed": "int32", "signed int": "int32", "int32_t": "int32",
    "unsigned": "uint32", "unsigned int": "uint32", "uint32_t": "uint32", "uint": "uint32",
    "long": "int64", "long int": "int64", "long long": "int64", "long long int": "int64",
    "signed long": "int64", "signed long long": "int64", "int64_t": "int64",
    "ptrdiff_t": "int64", "ssize_t": "int64", "intptr_t": "int64",
    "unsigned long": "uint64", "unsigned long int": "uint64", "unsigned long long": "uint64",
    "unsigned long long int": "uint64", "uint64_t": "uint64", "size_t": "uint64",
    "uintptr_t": "uint64",
    "short": "int16", "short int": "int16", "signed short": "int16", "int16_t": "int16",
    "unsigned short": "uint16", "unsigned short int": "uint16", "uint16_t": "uint16",
    "char": "int8", "signed char": "int8", "int8_t": "int8",
    "unsigned char": "uint8", "uint8_t": "uint8",
    "bool": "bool",
}  # fmt: skip
# CUDA vector types: (element type, lanes); a `float4*` buffer of n vectors is float32[n * 4].
VECTOR_TYPES: dict[str, tuple[str, int]] = {
    "float2": ("float32", 2), "float4": ("float32", 4), "double2": ("float64", 2),
    "int2": ("int32", 2), "int4": ("int32", 4), "uint2": ("uint32", 2), "uint4": ("uint32", 4),
    "half2": ("float16", 2), "__half2": ("float16", 2), "__nv_bfloat162": ("bfloat16", 2),
    "char4": ("int8", 4), "uchar4": ("uint8", 4), "longlong2": ("int64", 2),
}  # fmt: skip


def normalize_c_type(c_type: str) -> str:
    """`const float* __restrict__` -> `float`: the base type without qualifiers or `*`/`&`."""
    text = re.sub(r"[*&]", " ", c_type)
    words = [
        w
        for w in text.split()
        if w not in ("const", "volatile", "__restrict__", "__restrict", "restrict", "struct")
    ]
    base = " ".join(words)
    return base.removeprefix("std::").removeprefix("::")


def c_type_dtype(c_type: str) -> str | None:
    """The numpy-style type of a C scalar/element type, or None if it has none."""
    return _C_TYPES.get(normalize_c_type(c_type))


def resolved_base(param: Param, template_args: Mapping[str, str]) -> str:
    """`param`'s base C type, a template parameter replaced by its argument (`T` -> `float`)."""
    base = normalize_c_type(param.base_type)
    return normalize_c_type(template_args.get(base, base))


_TYPEDEF = re.compile(r"\btypedef\s+([A-Za-z_][\w:\s]*?)\s+([A-Za-z_]\w*)\s*;")
_USING = re.compile(r"\busing\s+([A-Za-z_]\w*)\s*=\s*([A-Za-z_][\w:\s]*?)\s*;")


def type_aliases(source: str) -> dict[str, str]:
    """`typedef __nv_bfloat16 floatX;` / `using floatX = __nv_bfloat16;` -> {floatX: ...}."""
    aliases: dict[str, str] = {}
    for m in _TYPEDEF.finditer(source):
        aliases[m.group(2)] = normalize_c_type(m.group(1))
    for m in _USING.finditer(source):
        aliases[m.group(1)] = normalize_c_type(m.group(2))
    return aliases


def resolve_alias(base: str, aliases: dict[str, str]) -> str:
    seen: set[str] = set()
    while base in aliases and base not in seen:
        seen.add(base)
        base = aliases[base]
    return base
