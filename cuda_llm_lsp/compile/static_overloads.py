"""Static and non-static member function templates overloaded on SFINAE, made legal for NVRTC.

ThunderKittens' `gl` (types/global/gl.cuh) declares each dimension twice, chosen by
`enable_if` on a defaulted template parameter:

    template <int B=__b__> __device__ __host__ static constexpr enable_if_t<(B > 0), int> batch()
    template <int B=__b__> __device__ __host__ enable_if_t<(B == -1), int> batch() const

nvcc's front end runs in GNU mode and, like g++, takes the pair; NVRTC's is strict and stops
at "static and nonstatic member functions with same parameter types cannot be overloaded",
then every call fails. In a header, each non-static template of such a pair is given one more
parameter, defaulted and of a type nobody else names (`cuda_llm_nonstatic_tag`, from the
prelude): the parameter lists differ, every call reads as before, and SFINAE still picks.
Only templates (g++ rejects a non-template pair too), only heads on one line, only in headers
(the columns after the insertion move; a header's problems are reported at its include line).
"""

from __future__ import annotations

import re

TAG = "cuda_llm_nonstatic_tag"
# a line starting a template declaration, and in it a function head: `name(params) const {`
_TEMPLATE_LINE = re.compile(r"^[ \t]*template\b[^\n]*$", re.MULTILINE)
_FUNCTION_HEAD = re.compile(r"\b(?P<name>\w+)[ \t]*\((?P<params>[^()]*)\)[^(){};=]*\{")


def separate(text: str) -> str:
    """`text` with each non-static member function template that has a static twin of the
    same name and parameters given a defaulted `cuda_llm_nonstatic_tag` parameter."""
    if "static" not in text or "template" not in text:
        return text
    heads: dict[tuple[str, str], list[tuple[bool, int, int]]] = {}  # -> static?, params
    for line in _TEMPLATE_LINE.finditer(text):
        head = _FUNCTION_HEAD.search(text, line.start(), line.end())
        if head is None:
            continue
        params = " ".join(head.group("params").split())
        static = re.search(r"\bstatic\b", text[line.start() : head.start()]) is not None
        where = (static, head.start("params"), head.end("params"))
        heads.setdefault((head.group("name"), params), []).append(where)
    edits: list[tuple[int, int, str]] = []  # start, end, replacement
    for (_, params), matches in heads.items():
        if all(static for static, _, _ in matches) or not any(s for s, _, _ in matches):
            continue
        for static, start, end in matches:
            if static:
                continue
            if params in ("", "void"):
                edits.append((start, end, f"::{TAG} = {{}}"))
            else:
                edits.append((end, end, f", ::{TAG} = {{}}"))
    for start, end, replacement in sorted(edits, reverse=True):
        text = text[:start] + replacement + text[end:]
    return text
