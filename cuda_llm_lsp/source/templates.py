"""Template kernels: the `template<...>` parameters of a kernel and the arguments of an instance.

The spec's `instance = "k<float, 256>"` is split here, defaults come from the kernel's own
`template<...>` list, and integer arguments become constants usable in expressions. Shared by
the spec parser, case evaluation and the draft spec; text-level only (tree-sitter's model gives
the parameter names, this module their kinds and defaults).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from cuda_llm_lsp.source.brackets import ANGLES, split_top
from cuda_llm_lsp.source.kernels import Kernel


def split_template_args(text: str) -> list[str]:
    """Top-level comma split of a template argument list (nested <>, (), [] kept)."""
    return split_top(text, *ANGLES)


def int_literal(text: str) -> int | None:
    """The value of a C integer literal (`256`, `0x100`, `-4`, `64u`), else None."""
    m = re.fullmatch(r"\s*(-?)\s*(0[xX][0-9a-fA-F]+|\d+)[uUlL]*\s*", text)
    if not m:
        return None
    value = int(m.group(2), 0) if m.group(2).lower().startswith("0x") else int(m.group(2))
    return -value if m.group(1) else value


def template_constants(template_args: Mapping[str, str]) -> dict[str, int]:
    """The integer-valued template arguments: names usable in spec expressions."""
    out: dict[str, int] = {}
    for name, text in template_args.items():
        value = int_literal(text)
        if value is not None:
            out[name] = value
    return out


@dataclass(frozen=True)
class TemplateParam:
    name: str
    is_type: bool
    c_type: str  # "typename" for type parameters, else the declared type ("int")
    default: str | None


def template_parameters(kernel: Kernel, source: str) -> list[TemplateParam]:
    """The kernel's `template<...>` parameters with their kinds, read from its source text."""
    if not kernel.is_template:
        return []
    text = kernel.span.slice(source)
    m = re.search(r"\btemplate\s*<", text)
    params: list[TemplateParam] = []
    if m:
        depth = 1
        i = m.end()
        while i < len(text) and depth:
            depth += {"<": 1, ">": -1}.get(text[i], 0)
            i += 1
        for part in split_template_args(text[m.end() : i - 1]):
            default = None
            if "=" in part:
                part, default = (s.strip() for s in part.split("=", 1))
            words = part.split()
            if not words:
                continue
            is_type = words[0] in ("typename", "class")
            name = words[-1] if len(words) > 1 else ""
            params.append(
                TemplateParam(name, is_type, words[0] if is_type else " ".join(words[:-1]), default)
            )
    names = [p.name for p in params]
    if names != list(kernel.template_params):  # fall back to the names the source model gives
        params = [TemplateParam(n, True, "typename", None) for n in kernel.template_params]
    return params
