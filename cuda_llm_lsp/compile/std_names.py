"""The standard library names device code uses, given from libcu++ where NVRTC has no libstdc++.

With `--expt-relaxed-constexpr` (CUTLASS, ThunderKittens and most modern kernels build with it)
nvcc lets device code call libstdc++'s constexpr functions and use its constexpr classes:
`std::min`, `std::numeric_limits<float>::max()`, `std::array`, `std::bit_cast`, a
`template <std::integral T>` kernel. NVRTC has no libstdc++, and the host headers that declare
them are dropped from the device unit, so each use was a false error. libcu++ has the same
names, written for device code, in `cuda::std`: for every such name the unit's device code
spells `std::NAME`, a pre-included header declares `using ::cuda::std::NAME;` in `std` and
includes its libcu++ header. Only names the code uses are given (libcu++'s headers cost NVRTC
about a second), never one our stand-ins or the unit's own headers declare in `std` already;
`numeric_limits`, the commonest, comes from a stand-in of ours instead (`_STAND_INS`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

HEADER = "cuda_llm_std_names.h"

# libcu++ header (`<cuda/std/...>`) -> the constexpr names device code may take from `std`
_BY_HEADER: dict[str, str] = {
    "limits": "numeric_limits",
    "algorithm": """min max clamp minmax min_element max_element minmax_element fill fill_n copy
        copy_n copy_backward swap_ranges reverse all_of any_of none_of find find_if count
        count_if equal lower_bound upper_bound binary_search""",
    "utility": """pair make_pair move forward declval exchange swap as_const index_sequence
        make_index_sequence integer_sequence make_integer_sequence index_sequence_for in_place
        in_place_t piecewise_construct""",
    "array": "array",
    "tuple": "tuple make_tuple tie forward_as_tuple apply tuple_cat ignore get",
    "bit": """bit_cast popcount countl_zero countr_zero countl_one countr_one has_single_bit
        bit_width bit_ceil bit_floor rotl rotr endian""",
    "concepts": """same_as derived_from convertible_to common_reference_with common_with integral
        signed_integral unsigned_integral floating_point assignable_from swappable destructible
        constructible_from default_initializable move_constructible copy_constructible
        equality_comparable totally_ordered movable copyable semiregular regular invocable
        regular_invocable predicate""",
    "functional": """plus minus multiplies divides modulus negate equal_to not_equal_to greater
        less greater_equal less_equal logical_and logical_or logical_not bit_and bit_or bit_xor
        invoke reference_wrapper ref cref""",
    "numeric": "gcd lcm midpoint accumulate inner_product iota partial_sum",
    "optional": "optional nullopt nullopt_t make_optional",
    "span": "span dynamic_extent",
    "type_traits": "invoke_result invoke_result_t",
}
# `get` works on pairs and arrays as well as tuples
_ALSO: dict[str, tuple[str, ...]] = {"get": ("utility", "array")}
NAMES: dict[str, str] = {
    name: header for header, names in _BY_HEADER.items() for name in names.split()
}
# `cuda::std::tuple` in a file that has it only through a header the unit drops (Thrust's):
# its libcu++ header is included, nothing declared
_CUDA_STD_USE = re.compile(r"(?<![\w:])(?:::)?cuda::std::(\w+)")
_USE = re.compile(r"(?<![\w:])(?:::)?std::(\w+)")
_NUMBERS = "numbers"  # `std::numbers::pi`: a namespace, given as an alias
# Names NVRTC's builtin header declares in `std` itself, under the macro it defines when it does:
# a using-declaration of libcu++'s beside it makes each call ambiguous (CCCL 3.0's `cuda::std::
# move` is its own function; later CCCLs take NVRTC's)
_NVRTC_BUILTIN: dict[str, str] = {
    "move": "__NV_BUILTIN_MOVE_FORWARD",
    "forward": "__NV_BUILTIN_MOVE_FORWARD",
}


def used(texts: Iterable[str]) -> list[str]:
    """The names of NAMES (and `numbers`) that `texts` spell `std::NAME`, in first-use order."""
    found: dict[str, None] = {}
    for text in texts:
        if "std::" not in text:
            continue
        for match in _USE.finditer(text):
            name = match.group(1)
            if name in NAMES or name == _NUMBERS:
                found.setdefault(name)
    return list(found)


def used_from_libcuxx(texts: Iterable[str]) -> list[str]:
    """The names of NAMES that `texts` spell `cuda::std::NAME`, in first-use order."""
    found: dict[str, None] = {}
    for text in texts:
        if "cuda::std::" not in text:
            continue
        for match in _CUDA_STD_USE.finditer(text):
            if match.group(1) in NAMES:
                found.setdefault(match.group(1))
    return list(found)


def declared_in_std(name: str, texts: Iterable[str]) -> bool:
    """Whether a text that opens `namespace std` declares `name` itself (a project's own
    `std::numeric_limits<half>` specialisation, CuTe's `tuple_size`): a using-declaration beside
    it would clash."""
    # `template <> class numeric_limits<X>` (CuPy) specialises the name: no declaration of it
    declaration = re.compile(
        rf"\b(?:struct|class|using|concept)\s+{re.escape(name)}\b(?!\s*<)"
        rf"|\b{re.escape(name)}\s*\("
    )
    return any("namespace std" in text and declaration.search(text) for text in texts)


# Names given by a stand-in of our own instead of libcu++ (stub_headers/): `std::numeric_limits`
# is in most kernels that use any std name (every ggml file), and `<cuda/std/limits>` costs
# NVRTC's front end about a second; the stand-in costs nothing, matches libstdc++'s values (its
# test compares them under g++) and, as libstdc++'s, is `std`'s own template, which a project
# may specialise (CuPy's `template <> class numeric_limits<complex<float>>`).
_STAND_INS: dict[str, str] = {"numeric_limits": "cuda_llm_limits.h"}


def header_text(
    names: Iterable[str],
    libcuxx: Iterable[str] = (),
    exists: Callable[[str], bool] = lambda header: True,
) -> str:
    """The pre-included header giving `names` in `std`, from libcu++ or our stand-ins
    (`_STAND_INS`), and including the libcu++ headers of `libcuxx` (`used_from_libcuxx`).

    `exists(header)`: whether the toolkit's libcu++ has `header`. One it lacks (CCCL 3.0 has no
    `<cuda/std/algorithm>`) is replaced by the name's own internal header where there is one
    (`<cuda/std/__algorithm/min.h>`), else the name is not given: never an include NVRTC
    cannot open."""

    def header_of(name: str, public: str) -> str | None:
        if exists(f"cuda/std/{public}"):
            return f"cuda/std/{public}"
        own = f"cuda/std/__{public}/{name}.h"
        return own if exists(own) else None

    includes: dict[str, None] = {}
    for name in libcuxx:
        if name in NAMES and (found := header_of(name, NAMES[name])) is not None:
            includes.setdefault(found)
    given: list[str] = []
    for name in names:
        if name == _NUMBERS:
            if not exists("cuda/std/numbers"):
                continue
            includes.setdefault("cuda/std/numbers")
        elif name in _STAND_INS:
            includes.setdefault(_STAND_INS[name])
        else:
            found = header_of(name, NAMES[name])
            if found is None:
                continue
            includes.setdefault(found)
            for extra in _ALSO.get(name, ()):
                if exists(f"cuda/std/{extra}"):
                    includes.setdefault(f"cuda/std/{extra}")
        given.append(name)
    lines = [
        "/* cuda-llm-lsp: the std names this file's device code uses, from libcu++ (NVRTC has",
        " * no libstdc++; nvcc --expt-relaxed-constexpr lets device code use these). */",
        "#pragma once",
        *(f"#include <{header}>" for header in includes),
        "namespace std {",
        *(_declaration(name) for name in given if name not in _STAND_INS),
        "}",
    ]
    return "\n".join(lines) + "\n"


def _declaration(name: str) -> str:
    """The line giving `name` in `std` (none where NVRTC's builtin header declares it)."""
    if name == _NUMBERS:
        return "namespace numbers = ::cuda::std::numbers;"
    if name in _NVRTC_BUILTIN:
        return f"#ifndef {_NVRTC_BUILTIN[name]}\nusing ::cuda::std::{name};\n#endif"
    return f"using ::cuda::std::{name};"


def given(header: str) -> frozenset[str]:
    """The names the std-names header `header` (`header_text`) gives from libcu++."""
    return frozenset(re.findall(r"using ::cuda::std::(\w+);", header))
