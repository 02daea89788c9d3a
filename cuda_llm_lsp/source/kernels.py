"""Find `__global__` kernels in CUDA source with tree-sitter-cuda.

Gives each kernel's parameters, ranges (whole definition, name, body), template parameters,
`extern "C"` linkage, launch bounds, the `/* @cuda-llm ... */` spec block above it, and the
template instantiations seen at launch sites. Robust to half-typed code: a kernel whose
definition does not parse is skipped, never raises.
"""

from __future__ import annotations

from dataclasses import dataclass

from cuda_llm_lsp.source.text import Span


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

    @property
    def is_template(self) -> bool:
        return bool(self.template_params)

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)


def find_kernels(text: str) -> list[Kernel]:
    """Every `__global__` function definition in `text`, in source order."""
    raise NotImplementedError
