"""Kernel symbols read back into source names (`compile.mangled`): how the nvcc tier puts
ptxas's figures on the kernel they belong to."""

from __future__ import annotations

import shutil

import pytest

from cuda_llm_lsp.compile import mangled
from cuda_llm_lsp.compile.mangled import base_name, display_names


@pytest.mark.parametrize(
    ("symbol", "name"),
    [
        ("_Z5saxpyifPKfPf", "saxpy"),  # a plain kernel
        ("_ZN2ns6detail1kEPf", "ns::detail::k"),  # namespaces
        ("_Z6reduceIfLj256ELb1EEvPT_S1_j", "reduce"),  # a template instance
        (
            "_ZN3cub6detail6reduce18DeviceReduceKernelINS_6PolicyEEEvPf",
            "cub::detail::reduce::DeviceReduceKernel",
        ),
        ("_ZN12_GLOBAL__N_16hiddenEPf", "hidden"),  # the anonymous namespace is not spelled
        ("_ZL6staticPf", "static"),  # internal linkage
        ("_ZNSt6thrust1kEv", "std::thrust::k"),
        ("saxpy", "saxpy"),  # extern "C": not mangled
    ],
)
def test_base_name_reads_the_qualified_function_name(symbol: str, name: str) -> None:
    assert base_name(symbol) == name


@pytest.mark.parametrize("symbol", ["_Z", "_Z99short", "_ZN", "not a symbol", ""])
def test_a_symbol_it_cannot_read_is_none_not_a_guess(symbol: str) -> None:
    assert base_name(symbol) is None


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="needs binutils' c++filt")
def test_display_names_drop_the_return_type_and_the_parameters() -> None:
    shown = display_names(
        ["_Z6reduceIfLj256ELb1EEvPT_S1_j", "_ZN2ns1kEPf", "_ZN12_GLOBAL__N_16hiddenEPf", "plain"]
    )
    assert shown == {
        "_Z6reduceIfLj256ELb1EEvPT_S1_j": "reduce<float, 256u, true>",
        "_ZN2ns1kEPf": "ns::k",
        "_ZN12_GLOBAL__N_16hiddenEPf": "hidden",
        "plain": "plain",
    }


def test_without_a_demangler_the_symbols_are_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mangled, "find_tool", lambda name: None)
    symbols = ["_Z6reduceIfLj256ELb1EEvPT_S1_j", "plain"]
    assert display_names(symbols) == {s: s for s in symbols}
