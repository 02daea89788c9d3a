"""source/names.py's tokens and definitions, and the one byte-to-character converter
(source/kernels.py `Offsets`) every source module uses."""

from __future__ import annotations

import time

from cuda_llm_lsp.source.context import outline
from cuda_llm_lsp.source.kernels import Offsets, find_kernels, parse_tree
from cuda_llm_lsp.source.names import read_names
from cuda_llm_lsp.source.text import offset_of
from tests.support.load import slack


def _file(lines: int) -> str:
    parts = ["// µ-kernels: ½ of them scaled by «α»\n", "#define GAIN 2.0f  // gain in µV\n"]
    n = 0
    while sum(p.count("\n") for p in parts) < lines:
        parts.append(
            f"__device__ float h{n}(float v) {{ return v * GAIN; }}  // ü{n}\n"
            f'__global__ void k{n}(float* x) {{\n  const char* s = "€{n}";\n'
            f"  x[threadIdx.x] = h{n}(x[threadIdx.x]) + s[0];\n}}\n"
        )
        n += 1
    return "".join(parts)


def test_read_names_on_a_large_non_ascii_file_is_linear_and_exact() -> None:
    """Each offset decoded the whole prefix again: 1500 lines with one `µ` took 4.2 s."""
    text = _file(3000)
    assert text.count("\n") >= 3000 and not text.isascii()
    started = time.perf_counter()
    names = read_names(text)
    elapsed = time.perf_counter() - started
    # 0.6 s here idle (0.25 s for the same file in ASCII), was 4.4 s
    assert elapsed < 1.5 * slack(), elapsed
    assert len(names.tokens) > 10_000
    for token in names.tokens:
        assert text[token.start : token.end] == token.text
    last = names.tokens[-1]
    assert (last.text, text[last.end :]) == ("}", "\n")
    by_name = {d.name: d for d in names.definitions}
    helper = by_name["h500"]
    assert text[helper.start :].startswith("__device__ float h500(")
    assert text[helper.start - 1] == "\n"
    assert text[helper.start : helper.end].endswith("{ return v * GAIN; }")  # a comment follows
    gain = by_name["GAIN"]
    assert text[gain.start : gain.end] == "#define GAIN 2.0f  // gain in µV\n"


def test_offsets_and_points_agree_with_the_text_for_every_node() -> None:
    text = (
        "\ufeff// ä\r#define A 1 /* 𝄞 */\r\n__global__ void k(float* x) { /* €€ */ x[0] = A; }\nµ"
    )
    tree, data = parse_tree(text)
    offsets = Offsets(text, data)
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        start, end = offsets.offset(node.start_byte), offsets.offset(node.end_byte)
        span = offsets.span(node)
        assert offset_of(text, span.start) == start and offset_of(text, span.end) == end
        assert offsets.point(node.start_byte) == span.start
        if node.type in ("identifier", "comment", "number_literal"):
            assert text[start:end].isprintable() and text[start:end].strip() == text[start:end]
    (kernel,) = find_kernels(text)
    assert kernel.name_span.slice(text) == "k"
    assert kernel.body_span.slice(text) == "{ /* €€ */ x[0] = A; }"
    assert outline(text).defines == ("#define A 1 /* 𝄞 */",)
