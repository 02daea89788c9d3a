"""Kernel signatures compared by ABI, and a dropped `extern "C"` put back.

A candidate must be callable exactly as the original: the same name, parameters and linkage.
Spelling that the compiler treats as the same type is accepted: whitespace, `__restrict__`,
the order of qualifiers (`float const*` is `const float*`) and a `const` on the parameter itself
(`const int n` is `int n`, `float* const p` is `float* p`: top-level qualifiers are not part of
a function's type). A different pointee qualifier, type, name or count is a mismatch. A candidate
that drops the original's `extern "C"` would change the symbol host code or a loader looks up:
`restore_linkage` writes it back; one that adds it where the original had none is a mismatch.
"""

from __future__ import annotations

import re

from cuda_llm_lsp.source.kernels import Kernel, Param, find_kernels

_QUALIFIERS = ("const", "volatile")
_DROPPED = re.compile(r"\b(?:__restrict__|__restrict|restrict)\b")
_WORD = re.compile(r"[A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)*|<[^*&]*>|\S")


def abi_type(c_type: str) -> str:
    """`c_type` in one spelling per ABI type: qualifiers first in each level, top level dropped.

    `float const * const __restrict__` -> `const float*`; `const int` -> `int`.
    """
    text = _DROPPED.sub(" ", c_type)
    levels: list[list[str]] = [[]]
    for token in _WORD.findall(text):
        if token in ("*", "&"):
            levels[-1].append(token)
            levels.append([])
        else:
            levels[-1].append(" ".join(token.split()).replace(" :: ", "::"))
    last = levels[-1]
    levels[-1] = [t for t in last if t not in _QUALIFIERS]  # the parameter's own qualifiers
    written: list[str] = []
    for level in levels:
        pointer = [t for t in level if t in ("*", "&")]
        words = [t for t in level if t not in ("*", "&")]
        qualifiers = sorted(t for t in words if t in _QUALIFIERS)
        rest = [t for t in words if t not in _QUALIFIERS]
        written.append(" ".join(qualifiers + rest) + "".join(pointer))
    return " ".join(w for w in written if w).replace(" *", "*").replace(" &", "&").strip()


def abi_signature(kernel: Kernel) -> list[tuple[str, str]]:
    """(ABI type, name) of each parameter."""
    return [(abi_type(p.c_type), p.name) for p in kernel.params]


def signature_problem(original: Kernel, candidate: Kernel) -> str | None:
    """None when `candidate` can be called as `original` is, else what differs (for the model)."""
    a, b = abi_signature(original), abi_signature(candidate)
    if len(a) != len(b):
        return (
            f"{original.name} must keep its {len(a)} parameters ({_sig(original.params)}); "
            f"the candidate has {len(b)} ({_sig(candidate.params)})"
        )
    for (ta, na), (tb, nb), pb in zip(a, b, candidate.params, strict=True):
        if (ta, na) != (tb, nb):
            return (
                f"parameter `{ta} {na}` became `{pb.c_type} {pb.name}`: {original.name} must "
                f"keep its signature ({_sig(original.params)})"
            )
    if original.template_params != candidate.template_params:
        return (
            f"template parameters changed from <{', '.join(original.template_params)}> to "
            f"<{', '.join(candidate.template_params)}>"
        )
    if candidate.is_extern_c and not original.is_extern_c:
        return (
            f'the candidate declares {original.name} extern "C" and the original does not: '
            "that changes the symbol host code calls; keep the original's linkage"
        )
    return None


def restore_linkage(original: Kernel, candidate_source: str) -> str:
    """`candidate_source` with `extern "C"` put back before the kernel where the original had it
    and the candidate dropped it (unchanged otherwise, or when the kernel is not found)."""
    if not original.is_extern_c:
        return candidate_source
    found = [k for k in find_kernels(candidate_source) if k.name == original.name]
    if len(found) != 1 or found[0].is_extern_c:
        return candidate_source
    lines = candidate_source.split("\n")
    start = found[0].span.start
    line = lines[start.line]
    lines[start.line] = line[: start.column] + 'extern "C" ' + line[start.column :]
    return "\n".join(lines)


def _sig(params: tuple[Param, ...]) -> str:
    return ", ".join(f"{p.c_type} {p.name}" for p in params)
